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

/// Memory that image decodes may hold at once, across the worker and IIIF.
/// A decode reserves its cost ([`decode_cost`]) before it allocates and gives
/// it back when done; one that alone needs more than the whole budget is refused.
pub struct DecodeBudget {
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    /// In KiB, the semaphore's unit (its permits are counted in u32).
    total_kib: u64,
}

impl DecodeBudget {
    pub fn new(bytes: u64) -> Self {
        let total_kib = (bytes / 1024).clamp(1, u64::from(u32::MAX >> 3));
        DecodeBudget {
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(total_kib as usize)),
            total_kib,
        }
    }

    /// Waits until `bytes` are free, or refuses what can never fit.
    pub async fn reserve(&self, bytes: u64) -> Result<tokio::sync::OwnedSemaphorePermit, String> {
        let kib = bytes.div_ceil(1024).max(1);
        if kib > self.total_kib {
            return Err(format!(
                "decoding it needs about {} MiB, more than the decode budget of {} MiB (--max-decode-bytes)",
                kib.div_ceil(1024),
                self.total_kib / 1024
            ));
        }
        self.permits
            .clone()
            .acquire_many_owned(kib as u32)
            .await
            .map_err(|_| "the decoder is shutting down".to_owned())
    }
}

/// What decoding `bytes` may hold at its peak, from the header alone: the
/// input, the decoded pixels three times (decoder output, and the conversions
/// to 8-bit RGBA and RGB on the way to JPEG), 8 bytes for each pixel of an
/// output of `output_pixels` (a IIIF response: the scaled and the rotated
/// copy), and `scratch(width, height)` of the image: what its resize holds
/// besides ([`resize_scratch`]).
pub fn decode_cost(
    bytes: &[u8],
    output_pixels: u64,
    scratch: impl FnOnce(u32, u32) -> u64,
) -> Result<u64, String> {
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| format!("cannot read the image: {e}"))?;
    let decoder = reader
        .into_decoder()
        .map_err(|e| format!("cannot decode the image: {e}"))?;
    let (w, h) = decoder.dimensions();
    let pixel = u64::from(decoder.color_type().bytes_per_pixel()).max(3);
    Ok((bytes.len() as u64)
        .saturating_add(
            u64::from(w)
                .saturating_mul(u64::from(h))
                .saturating_mul(pixel)
                .saturating_mul(3),
        )
        .saturating_add(output_pixels.saturating_mul(8))
        .saturating_add(scratch(w, h)))
}

/// The buffer a resize may allocate besides its input and output, reserved
/// for the `image` crate's `resize_exact` that [`resize`] falls back to
/// (`fast_image_resize`'s own is smaller): it
/// scales columns first, into a 32-bit float RGBA image as wide as its input
/// and as high as its output (16 bytes a pixel). A region 100,000,000 pixels
/// wide scaled to 1,000 rows needs 1.6 TB of it, so it is reserved too.
pub fn resize_scratch(input_width: u32, output_height: u32) -> u64 {
    u64::from(input_width)
        .saturating_mul(u64::from(output_height))
        .saturating_mul(16)
}

/// `img` scaled to exactly `w`×`h` with a Catmull-Rom filter, by
/// `fast_image_resize` (SIMD where the CPU has it: the derivatives'
/// resizes took about 7 ms instead of 40 with the `image` crate's, see
/// benches/derivatives.rs); the `image` crate's resize for pixel types that
/// crate does not take.
pub fn resize(img: &DynamicImage, w: u32, h: u32) -> DynamicImage {
    use fast_image_resize::{FilterType as Filter, ResizeAlg, ResizeOptions, Resizer};
    let mut out = DynamicImage::new(w, h, img.color());
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(Filter::CatmullRom));
    match Resizer::new().resize(img, &mut out, &options) {
        Ok(()) => out,
        Err(_) => img.resize_exact(w, h, FilterType::CatmullRom),
    }
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

const TRUNCATED_JPEG: &str = "the JPEG is truncated (no end-of-image marker after its last scan)";

/// Scans a JPEG may have. Each scan walks every block of the image, and the
/// worker's decoder (jpeg-decoder) has no bound of its own: a 10,000² JPEG
/// of 50,000 tiny refinement scans kept a scaling slot busy for hours. Real
/// progressive JPEGs have about 10 (zune-jpeg, the IIIF path's decoder,
/// stops at 100 too).
const MAX_JPEG_SCANS: usize = 100;

/// Refuses a JPEG that is cut off or has more scans than [`MAX_JPEG_SCANS`].
fn check_jpeg(bytes: &[u8]) -> Result<(), String> {
    if !jpeg_is_complete(bytes) {
        return Err(TRUNCATED_JPEG.into());
    }
    let scans = bytes.windows(2).filter(|w| *w == [0xFF, 0xDA]).count();
    if scans > MAX_JPEG_SCANS {
        return Err(format!(
            "the JPEG has {scans} scans; at most {MAX_JPEG_SCANS} are decoded"
        ));
    }
    Ok(())
}

/// Refuses an image by its header: no pixels, or more than the limit.
fn check_size(w: u32, h: u32, limits: &ImagingLimits) -> Result<(), String> {
    if u64::from(w) * u64::from(h) > limits.max_pixels {
        return Err(format!(
            "{w}×{h} pixels is more than the limit of {} pixels",
            limits.max_pixels
        ));
    }
    if w == 0 || h == 0 {
        return Err("the image has no pixels".into());
    }
    Ok(())
}

/// Decodes an original, oriented as it is meant to be seen.
pub fn decode(bytes: &[u8], limits: &ImagingLimits) -> Result<DynamicImage, String> {
    let mime =
        sniff(bytes).ok_or("not an image in a supported format (JPEG, PNG, WebP, GIF, TIFF)")?;
    if mime == "image/jpeg" {
        check_jpeg(bytes)?;
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
    check_size(w, h, limits)?;
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut image =
        DynamicImage::from_decoder(decoder).map_err(|e| format!("cannot decode the image: {e}"))?;
    image.apply_orientation(orientation);
    Ok(image)
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

/// The result of scaling an original: its (oriented) size and the derivatives.
pub struct Made {
    pub width: u32,
    pub height: u32,
    pub derivatives: Vec<(u32, u32, Vec<u8>)>,
}

/// Decodes an original and makes a JPEG for each box (largest first). A JPEG
/// is decoded at the smallest DCT scale (1/1, 1/2, 1/4 or 1/8) that still
/// covers the largest box, which is most of the work saved on big photos.
pub fn derivatives_of(
    bytes: &[u8],
    boxes: &[(u32, u32)],
    limits: &ImagingLimits,
) -> Result<Made, String> {
    let first = boxes.first().copied().unwrap_or((1, 1));
    let (width, height, image) = decode_for(bytes, limits, first)?;
    // Boxes are fitted against the full size, then taken from the (maybe smaller) decode.
    let targets: Vec<(u32, u32)> = boxes
        .iter()
        .map(|&(bw, bh)| fit(width, height, bw, bh))
        .collect();
    Ok(Made {
        width,
        height,
        derivatives: derivatives(image, &targets, limits.jpeg_quality)?,
    })
}

/// The original's full (oriented) size, and the image decoded for scaling
/// into `largest`: a JPEG at the smallest DCT scale that still covers it,
/// anything else whole.
pub fn decode_for(
    bytes: &[u8],
    limits: &ImagingLimits,
    largest: (u32, u32),
) -> Result<(u32, u32, DynamicImage), String> {
    if sniff(bytes) == Some("image/jpeg")
        && let Some(found) = jpeg_scaled(bytes, limits, largest)?
    {
        return Ok(found);
    }
    let image = decode(bytes, limits)?;
    Ok((image.width(), image.height(), image))
}

/// A JPEG decoded at a reduced DCT scale, oriented; `None` for pixel formats
/// left to the general decoder (CMYK).
fn jpeg_scaled(
    bytes: &[u8],
    limits: &ImagingLimits,
    target: (u32, u32),
) -> Result<Option<(u32, u32, DynamicImage)>, String> {
    use image::metadata::Orientation;
    check_jpeg(bytes)?;
    let mut d = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    d.read_info()
        .map_err(|e| format!("cannot decode the image: {e}"))?;
    let info = d.info().ok_or("cannot decode the image: no JPEG header")?;
    let (fw, fh) = (u32::from(info.width), u32::from(info.height));
    check_size(fw, fh, limits)?;
    if info.pixel_format == jpeg_decoder::PixelFormat::CMYK32 {
        return Ok(None);
    }
    let orientation = d
        .exif_data()
        .and_then(Orientation::from_exif_chunk)
        .unwrap_or(Orientation::NoTransforms);
    let swapped = matches!(
        orientation,
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    );
    let (ow, oh) = if swapped { (fh, fw) } else { (fw, fh) };
    let (tw, th) = fit(ow, oh, target.0, target.1);
    let (sw, sh) = if swapped { (th, tw) } else { (tw, th) };
    d.scale(sw.min(65_535) as u16, sh.min(65_535) as u16)
        .map_err(|e| format!("cannot decode the image: {e}"))?;
    let pixels = d
        .decode()
        .map_err(|e| format!("cannot decode the image: {e}"))?;
    let info = d.info().ok_or("cannot decode the image")?;
    let (w, h) = (u32::from(info.width), u32::from(info.height));
    let broken = || "cannot decode the image: wrong pixel count".to_owned();
    let mut image = match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => {
            DynamicImage::ImageLuma8(image::GrayImage::from_raw(w, h, pixels).ok_or_else(broken)?)
        }
        jpeg_decoder::PixelFormat::L16 => {
            let v: Vec<u16> = pixels
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            DynamicImage::ImageLuma16(image::ImageBuffer::from_raw(w, h, v).ok_or_else(broken)?)
        }
        jpeg_decoder::PixelFormat::RGB24 => {
            DynamicImage::ImageRgb8(image::RgbImage::from_raw(w, h, pixels).ok_or_else(broken)?)
        }
        jpeg_decoder::PixelFormat::CMYK32 => return Ok(None),
    };
    image.apply_orientation(orientation);
    Ok(Some((ow, oh, image)))
}

/// Scales `img` into each box (largest first), each from the previous result
/// when that is still larger than the box, and encodes them as JPEG.
/// `boxes` are exact target sizes here (already fitted to the full image).
pub fn derivatives(
    img: DynamicImage,
    boxes: &[(u32, u32)],
    quality: u8,
) -> Result<Vec<(u32, u32, Vec<u8>)>, String> {
    let mut source = for_jpeg(img);
    let mut out: Vec<(u32, u32, Vec<u8>)> = Vec::with_capacity(boxes.len());
    for &(w, h) in boxes {
        // An image smaller than several boxes is the same in each of them
        // (`source` is always the last one made): encoded once, as the
        // encoder gives the same bytes for the same pixels.
        if let Some((pw, ph, bytes)) = out.last()
            && (*pw, *ph) == (w, h)
        {
            let bytes = bytes.clone();
            out.push((w, h, bytes));
            continue;
        }
        if (w, h) != (source.width(), source.height()) {
            source = resize(&source, w, h);
        }
        out.push((w, h, encode_jpeg(&source, quality)?));
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

    /// A JPEG with an EXIF orientation (6: the camera was turned 90° clockwise).
    fn rotated_jpeg(w: u32, h: u32, orientation: u16) -> Vec<u8> {
        let mut plain = Vec::new();
        image::RgbImage::from_fn(w, h, |x, _| image::Rgb([(x % 256) as u8, 90, 160]))
            .write_to(&mut Cursor::new(&mut plain), image::ImageFormat::Jpeg)
            .unwrap();
        let mut tiff = b"II*\0\x08\0\0\0\x01\0".to_vec();
        tiff.extend_from_slice(&0x0112u16.to_le_bytes());
        tiff.extend_from_slice(&3u16.to_le_bytes());
        tiff.extend_from_slice(&1u32.to_le_bytes());
        tiff.extend_from_slice(&u32::from(orientation).to_le_bytes());
        tiff.extend_from_slice(&0u32.to_le_bytes());
        let mut app1 = b"Exif\0\0".to_vec();
        app1.extend_from_slice(&tiff);
        let mut out = plain[..2].to_vec();
        out.extend_from_slice(&[0xFF, 0xE1]);
        out.extend_from_slice(&((app1.len() + 2) as u16).to_be_bytes());
        out.extend_from_slice(&app1);
        out.extend_from_slice(&plain[2..]);
        out
    }

    #[test]
    fn derivatives_are_oriented_fitted_and_scaled_at_decode() {
        let limits = ImagingLimits::default();
        let boxes = [(800, 600), (440, 330), (140, 105), (116, 87)];
        let made = derivatives_of(&rotated_jpeg(1600, 1200, 6), &boxes, &limits).unwrap();
        assert_eq!(
            (made.width, made.height),
            (1200, 1600),
            "EXIF orientation applied"
        );
        let sizes: Vec<(u32, u32)> = made.derivatives.iter().map(|d| (d.0, d.1)).collect();
        assert_eq!(sizes, [(450, 600), (248, 330), (79, 105), (65, 87)]);
        for (w, h, jpeg) in &made.derivatives {
            let img = image::load_from_memory(jpeg).unwrap();
            assert_eq!((img.width(), img.height()), (*w, *h));
        }
        // Smaller than every box: never upscaled.
        let small = derivatives_of(&rotated_jpeg(100, 50, 1), &boxes, &limits).unwrap();
        assert_eq!(small.derivatives[0].0, 100);
        assert_eq!(small.derivatives[3].0, 100);
        // Encoded once for all four: the same bytes a separate encode gives.
        assert!(small.derivatives.iter().all(|d| d.2 == small.derivatives[0].2));
        let (_, _, decoded) = decode_for(&rotated_jpeg(100, 50, 1), &limits, boxes[0]).unwrap();
        let once = derivatives(
            decoded,
            &[(100, 50)],
            limits.jpeg_quality,
        )
        .unwrap();
        assert_eq!(once[0].2, small.derivatives[3].2);
        // Grayscale PNG with 16 bits.
        let mut png = Vec::new();
        image::DynamicImage::ImageLuma16(image::ImageBuffer::from_fn(900, 300, |x, _| {
            image::Luma([(x * 70) as u16])
        }))
        .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
        let made = derivatives_of(&png, &boxes, &limits).unwrap();
        assert_eq!((made.derivatives[0].0, made.derivatives[0].1), (800, 267));
    }

    #[test]
    fn gif_tiff_webp_and_gray_inputs_are_scaled() {
        let limits = ImagingLimits::default();
        let boxes = [(800, 600), (116, 87)];
        let rgb = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(1000, 500, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 7])
        }));
        for format in [
            image::ImageFormat::Gif,
            image::ImageFormat::Tiff,
            image::ImageFormat::WebP,
            image::ImageFormat::Png,
        ] {
            let mut bytes = Vec::new();
            rgb.write_to(&mut Cursor::new(&mut bytes), format).unwrap();
            let made = derivatives_of(&bytes, &boxes, &limits).unwrap();
            assert_eq!((made.width, made.height), (1000, 500), "{format:?}");
            assert_eq!(
                (made.derivatives[0].0, made.derivatives[0].1),
                (800, 400),
                "{format:?}"
            );
            assert_eq!(
                (made.derivatives[1].0, made.derivatives[1].1),
                (116, 58),
                "{format:?}"
            );
        }
        let mut gray = Vec::new();
        image::DynamicImage::ImageLuma8(image::GrayImage::new(300, 300))
            .write_to(&mut Cursor::new(&mut gray), image::ImageFormat::Jpeg)
            .unwrap();
        let made = derivatives_of(&gray, &boxes, &limits).unwrap();
        assert_eq!(made.derivatives[1].0, 87);
    }

    #[test]
    fn cmyk_jpegs_come_out_in_their_colours() {
        // Written by Pillow: left half red, right half blue, in CMYK with an Adobe marker.
        let cmyk = include_bytes!("../../../tests/data/cmyk.jpg");
        let made = derivatives_of(cmyk, &[(160, 100)], &ImagingLimits::default()).unwrap();
        let img = image::load_from_memory(&made.derivatives[0].2)
            .unwrap()
            .to_rgb8();
        let (left, right) = (img.get_pixel(30, 50), img.get_pixel(130, 50));
        assert!(left[0] > 200 && left[2] < 60, "left is red: {left:?}");
        assert!(right[2] > 200 && right[0] < 60, "right is blue: {right:?}");
    }

    #[test]
    fn the_decode_budget_refuses_what_cannot_fit_and_queues_the_rest() {
        let mut png = Vec::new();
        image::RgbaImage::new(1000, 1000)
            .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let cost = decode_cost(&png, 0, |_, _| 0).unwrap();
        assert!(cost >= 12_000_000, "4 MB of RGBA, three times: {cost}");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let budget = DecodeBudget::new(20 << 20);
            let first = budget.reserve(cost).await.unwrap();
            // A second one waits while the first holds its share.
            let second =
                tokio::time::timeout(std::time::Duration::from_millis(50), budget.reserve(cost));
            assert!(second.await.is_err(), "waits for memory");
            drop(first);
            assert!(budget.reserve(cost).await.is_ok());
            let e = DecodeBudget::new(8 << 20).reserve(cost).await.unwrap_err();
            assert!(e.contains("--max-decode-bytes"), "{e}");
        });
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
        // A scan bomb: more start-of-scan segments than any real JPEG has,
        // refused before either decoder (the worker's, the IIIF path's) runs.
        let mut bomb = ok[..ok.len() - 2].to_vec();
        for _ in 0..MAX_JPEG_SCANS {
            bomb.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x02]);
        }
        bomb.extend_from_slice(&[0xFF, 0xD9]);
        let e = decode(&bomb, &limits).err().unwrap();
        assert!(e.contains("scans"), "{e}");
        let e = derivatives_of(&bomb, &[(16, 16)], &limits).err().unwrap();
        assert!(e.contains("scans"), "{e}");
        assert!(decode(&ok, &limits).is_ok());
    }
}
