//! Decoding originals and making the scaled JPEGs: fit inside the box, aspect
//! kept, never upscaled, EXIF orientation applied, alpha flattened on white.
//! Decoding is bounded: the pixel count is checked from the header before any
//! pixel is decoded, and the decoder's allocations are capped, so a
//! decompression bomb or a corrupt file ends in an error, never a crash.

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageReader, Limits};

#[derive(Clone, Copy, Debug)]
pub struct ImagingLimits {
    /// Largest accepted width × height.
    pub max_pixels: u64,
    pub jpeg_quality: u8,
}

impl Default for ImagingLimits {
    fn default() -> Self {
        ImagingLimits {
            max_pixels: 100_000_000,
            jpeg_quality: 85,
        }
    }
}

/// A decoded original, oriented as it is meant to be seen.
pub struct Decoded {
    pub image: DynamicImage,
    pub mime: &'static str,
}

/// The MIME type of an image format we decode, from its first bytes.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let format = image::guess_format(bytes).ok()?;
    Some(match format {
        image::ImageFormat::Jpeg => "image/jpeg",
        image::ImageFormat::Png => "image/png",
        image::ImageFormat::WebP => "image/webp",
        image::ImageFormat::Gif => "image/gif",
        image::ImageFormat::Tiff => "image/tiff",
        _ => return None,
    })
}

/// JPEG decoders fill a cut-off scan with gray instead of failing, so a JPEG
/// must have its end-of-image marker after its last start-of-scan. (Markers
/// cannot hide in entropy-coded data: a 0xFF there is always stuffed with 0x00.)
fn jpeg_is_complete(bytes: &[u8]) -> bool {
    let last = |marker: u8| bytes.windows(2).rposition(|w| w == [0xFF, marker]);
    matches!((last(0xDA), last(0xD9)), (Some(sos), Some(eoi)) if eoi > sos)
}

pub fn decode(bytes: &[u8], limits: &ImagingLimits) -> Result<Decoded, String> {
    let mime =
        sniff(bytes).ok_or("not an image in a supported format (JPEG, PNG, WebP, GIF, TIFF)")?;
    if mime == "image/jpeg" && !jpeg_is_complete(bytes) {
        return Err("the JPEG is truncated (no end-of-image marker after its last scan)".into());
    }
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| format!("cannot read the image: {e}"))?;
    let mut l = Limits::default();
    // Room for the decoded pixels (up to 16-bit RGBA) plus the decoder's own buffers.
    l.max_alloc = Some(limits.max_pixels.saturating_mul(8).saturating_add(64 << 20));
    reader.limits(l);
    let mut decoder = reader
        .into_decoder()
        .map_err(|e| format!("cannot decode the image: {e}"))?;
    let (w, h) = decoder.dimensions();
    if u64::from(w) * u64::from(h) > limits.max_pixels {
        return Err(format!(
            "{w}×{h} pixels is more than the limit of {} pixels",
            limits.max_pixels
        ));
    }
    if w == 0 || h == 0 {
        return Err("the image has no pixels".into());
    }
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut image =
        DynamicImage::from_decoder(decoder).map_err(|e| format!("cannot decode the image: {e}"))?;
    image.apply_orientation(orientation);
    Ok(Decoded { image, mime })
}

/// The size of `w`×`h` fitted inside `bw`×`bh`, aspect kept, never larger.
pub fn fit(w: u32, h: u32, bw: u32, bh: u32) -> (u32, u32) {
    if w <= bw && h <= bh {
        return (w, h);
    }
    let scale = f64::min(f64::from(bw) / f64::from(w), f64::from(bh) / f64::from(h));
    let nw = ((f64::from(w) * scale).round() as u32).clamp(1, bw);
    let nh = ((f64::from(h) * scale).round() as u32).clamp(1, bh);
    (nw, nh)
}

/// Flattens onto white and drops to 8-bit RGB (or gray), as JPEG needs.
pub fn for_jpeg(img: DynamicImage) -> DynamicImage {
    match img {
        DynamicImage::ImageLuma8(_) | DynamicImage::ImageRgb8(_) => img,
        DynamicImage::ImageLuma16(_) => DynamicImage::ImageLuma8(img.to_luma8()),
        other if other.color().has_alpha() => {
            let rgba = other.to_rgba8();
            let mut rgb = image::RgbImage::new(rgba.width(), rgba.height());
            for (o, p) in rgb.pixels_mut().zip(rgba.pixels()) {
                let a = u16::from(p[3]);
                for c in 0..3 {
                    o[c] = ((u16::from(p[c]) * a + 255 * (255 - a)) / 255) as u8;
                }
            }
            DynamicImage::ImageRgb8(rgb)
        }
        other => DynamicImage::ImageRgb8(other.to_rgb8()),
    }
}

pub fn encode_jpeg(img: &DynamicImage, quality: u8) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let enc = JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100));
    img.write_with_encoder(enc)
        .map_err(|e| format!("cannot encode JPEG: {e}"))?;
    Ok(out)
}

/// Scales `img` into each box (largest first), each from the previous result
/// when that is still larger than the box, and encodes them as JPEG.
pub fn derivatives(
    img: DynamicImage,
    boxes: &[(u32, u32)],
    quality: u8,
) -> Result<Vec<(u32, u32, Vec<u8>)>, String> {
    let mut source = for_jpeg(img);
    let mut out = Vec::with_capacity(boxes.len());
    for &(bw, bh) in boxes {
        let (w, h) = fit(source.width(), source.height(), bw, bh);
        let scaled = if (w, h) == (source.width(), source.height()) {
            source.clone()
        } else {
            source.resize_exact(w, h, FilterType::CatmullRom)
        };
        out.push((w, h, encode_jpeg(&scaled, quality)?));
        source = scaled;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitting_keeps_aspect_and_never_upscales() {
        assert_eq!(fit(4000, 3000, 800, 600), (800, 600));
        assert_eq!(fit(3000, 4000, 800, 600), (450, 600));
        assert_eq!(fit(6000, 1000, 140, 105), (140, 23));
        assert_eq!(fit(100, 80, 800, 600), (100, 80));
        assert_eq!(fit(10_000, 1, 116, 87), (116, 1));
    }

    #[test]
    fn garbage_and_bombs_are_errors() {
        let limits = ImagingLimits::default();
        assert!(decode(b"hello", &limits).is_err());
        // A PNG header claiming 100000 x 100000 pixels.
        let mut png = Vec::new();
        image::RgbImage::new(4, 4)
            .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let e = decode(&png, &limits).err().unwrap();
        assert!(e.contains("limit") || e.contains("decode"), "{e}");
        // Truncated.
        let mut ok = Vec::new();
        image::RgbImage::new(64, 64)
            .write_to(&mut Cursor::new(&mut ok), image::ImageFormat::Jpeg)
            .unwrap();
        assert!(decode(&ok[..ok.len() / 3], &limits).is_err());
    }
}
