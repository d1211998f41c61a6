//! The IIIF Image API 3.0 at compliance level 2 (with mirroring, arbitrary
//! rotation, upscaling and WebP on top): parsing of the four path parameters,
//! the image pipeline (region, size, rotation, quality, format), and the
//! bounded cache of computed images. The HTTP handlers live in `http.rs`.

use std::collections::{HashMap, VecDeque};
use std::io::Cursor;
use std::sync::Mutex;

use image::{DynamicImage, ImageFormat, Rgba, RgbaImage};

/// The largest width or height a response may have (also declared in info.json).
pub const MAX_SIDE: u32 = 10_000;
/// The largest area a response may have.
pub const MAX_AREA: u64 = 40_000_000;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Region {
    Full,
    Square,
    Pixels(u32, u32, u32, u32),
    Percent(f64, f64, f64, f64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeKind {
    Max,
    Width(u32),
    Height(u32),
    Percent(f64),
    Exact(u32, u32),
    Confined(u32, u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Size {
    pub upscale: bool,
    pub kind: SizeKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rotation {
    pub mirror: bool,
    pub degrees: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quality {
    Default,
    Color,
    Gray,
    Bitonal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Jpg,
    Png,
    Webp,
}

impl Format {
    pub fn mime(self) -> &'static str {
        match self {
            Format::Jpg => "image/jpeg",
            Format::Png => "image/png",
            Format::Webp => "image/webp",
        }
    }
}

/// A parsed image request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImageRequest {
    pub region: Region,
    pub size: Size,
    pub rotation: Rotation,
    pub quality: Quality,
    pub format: Format,
}

/// Why a request cannot be answered: 400 for bad syntax or an impossible
/// request, 501 for a well-formed one this server does not implement.
#[derive(Debug, PartialEq)]
pub enum IiifError {
    BadRequest(String),
    NotImplemented(String),
}

fn bad(msg: impl Into<String>) -> IiifError {
    IiifError::BadRequest(msg.into())
}

fn number(s: &str) -> Option<f64> {
    // Plain decimals only: no signs, exponents, "inf" or "nan".
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn integer(s: &str) -> Option<u32> {
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub fn parse_region(s: &str) -> Result<Region, IiifError> {
    match s {
        "full" => return Ok(Region::Full),
        "square" => return Ok(Region::Square),
        _ => {}
    }
    let (pct, rest) = match s.strip_prefix("pct:") {
        Some(r) => (true, r),
        None => (false, s),
    };
    let parts: Vec<&str> = rest.split(',').collect();
    if parts.len() != 4 {
        return Err(bad(format!(
            "region {s:?} is not full, square, x,y,w,h or pct:x,y,w,h"
        )));
    }
    if pct {
        let v: Vec<f64> = parts
            .iter()
            .map(|p| number(p))
            .collect::<Option<_>>()
            .ok_or_else(|| bad(format!("region {s:?}: not numbers")))?;
        if v[2] <= 0.0 || v[3] <= 0.0 {
            return Err(bad("a region needs a positive width and height"));
        }
        Ok(Region::Percent(v[0], v[1], v[2], v[3]))
    } else {
        let v: Vec<u32> = parts
            .iter()
            .map(|p| integer(p))
            .collect::<Option<_>>()
            .ok_or_else(|| bad(format!("region {s:?}: not whole numbers")))?;
        if v[2] == 0 || v[3] == 0 {
            return Err(bad("a region needs a positive width and height"));
        }
        Ok(Region::Pixels(v[0], v[1], v[2], v[3]))
    }
}

pub fn parse_size(s: &str) -> Result<Size, IiifError> {
    let (upscale, rest) = match s.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let kind = if rest == "max" {
        SizeKind::Max
    } else if let Some(p) = rest.strip_prefix("pct:") {
        let v = number(p).ok_or_else(|| bad(format!("size {s:?}: not a percentage")))?;
        if v <= 0.0 {
            return Err(bad("a size percentage must be positive"));
        }
        SizeKind::Percent(v)
    } else {
        let (confined, wh) = match rest.strip_prefix('!') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let (w, h) = wh
            .split_once(',')
            .ok_or_else(|| bad(format!("size {s:?} is not max, w,h, !w,h, w,, ,h or pct:n")))?;
        let w = if w.is_empty() {
            None
        } else {
            Some(integer(w).ok_or_else(|| bad(format!("size {s:?}: bad width")))?)
        };
        let h = if h.is_empty() {
            None
        } else {
            Some(integer(h).ok_or_else(|| bad(format!("size {s:?}: bad height")))?)
        };
        match (confined, w, h) {
            (_, Some(0), _) | (_, _, Some(0)) => return Err(bad("a size must be positive")),
            (false, Some(w), Some(h)) => SizeKind::Exact(w, h),
            (true, Some(w), Some(h)) => SizeKind::Confined(w, h),
            (false, Some(w), None) => SizeKind::Width(w),
            (false, None, Some(h)) => SizeKind::Height(h),
            _ => return Err(bad(format!("size {s:?} is not valid"))),
        }
    };
    Ok(Size { upscale, kind })
}

pub fn parse_rotation(s: &str) -> Result<Rotation, IiifError> {
    let (mirror, rest) = match s.strip_prefix('!') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let degrees = number(rest).ok_or_else(|| bad(format!("rotation {s:?} is not 0 to 360")))?;
    if degrees > 360.0 {
        return Err(bad(format!("rotation {s:?} is not 0 to 360")));
    }
    Ok(Rotation { mirror, degrees })
}

/// `quality.format`, the last path segment.
pub fn parse_quality_format(s: &str) -> Result<(Quality, Format), IiifError> {
    let (q, f) = s
        .rsplit_once('.')
        .ok_or_else(|| bad(format!("{s:?} is not quality.format")))?;
    let quality = match q {
        "default" => Quality::Default,
        "color" => Quality::Color,
        "gray" => Quality::Gray,
        "bitonal" => Quality::Bitonal,
        _ => {
            return Err(bad(format!(
                "quality {q:?} is not default, color, gray or bitonal"
            )));
        }
    };
    let format = match f {
        "jpg" => Format::Jpg,
        "png" => Format::Png,
        "webp" => Format::Webp,
        "tif" | "gif" | "jp2" | "pdf" => {
            return Err(IiifError::NotImplemented(format!(
                "format {f} is not offered (jpg, png, webp are)"
            )));
        }
        _ => return Err(bad(format!("format {f:?} is not known"))),
    };
    Ok((quality, format))
}

pub fn parse(
    region: &str,
    size: &str,
    rotation: &str,
    qf: &str,
) -> Result<ImageRequest, IiifError> {
    let (quality, format) = parse_quality_format(qf)?;
    Ok(ImageRequest {
        region: parse_region(region)?,
        size: parse_size(size)?,
        rotation: parse_rotation(rotation)?,
        quality,
        format,
    })
}

/// The region in pixels of a `w`×`h` image, clipped to it.
pub fn region_rect(r: Region, w: u32, h: u32) -> Result<(u32, u32, u32, u32), IiifError> {
    let (x, y, rw, rh) = match r {
        Region::Full => (0, 0, w, h),
        Region::Square => {
            let side = w.min(h);
            ((w - side) / 2, (h - side) / 2, side, side)
        }
        Region::Pixels(x, y, rw, rh) => (x, y, rw, rh),
        Region::Percent(px, py, pw, ph) => {
            let fx = |p: f64| (p / 100.0 * f64::from(w)).round();
            let fy = |p: f64| (p / 100.0 * f64::from(h)).round();
            let x = fx(px).min(f64::from(u32::MAX)) as u32;
            let y = fy(py).min(f64::from(u32::MAX)) as u32;
            let rw = (fx(pw).min(f64::from(u32::MAX)) as u32).max(1);
            let rh = (fy(ph).min(f64::from(u32::MAX)) as u32).max(1);
            (x, y, rw, rh)
        }
    };
    if x >= w || y >= h {
        return Err(bad("the region lies outside the image"));
    }
    Ok((x, y, rw.min(w - x), rh.min(h - y)))
}

/// The output size for a region of `rw`×`rh`.
pub fn output_size(s: Size, rw: u32, rh: u32) -> Result<(u32, u32), IiifError> {
    let (rwf, rhf) = (f64::from(rw), f64::from(rh));
    let (w, h) = match s.kind {
        SizeKind::Max => {
            let mut scale: f64 = 1.0;
            scale = scale
                .min(f64::from(MAX_SIDE) / rwf)
                .min(f64::from(MAX_SIDE) / rhf);
            scale = scale.min((MAX_AREA as f64 / (rwf * rhf)).sqrt());
            (
                (rwf * scale).floor().max(1.0),
                (rhf * scale).floor().max(1.0),
            )
        }
        SizeKind::Width(w) => (f64::from(w), (f64::from(w) * rhf / rwf).round().max(1.0)),
        SizeKind::Height(h) => ((f64::from(h) * rwf / rhf).round().max(1.0), f64::from(h)),
        SizeKind::Percent(p) => (
            (rwf * p / 100.0).round().max(1.0),
            (rhf * p / 100.0).round().max(1.0),
        ),
        SizeKind::Exact(w, h) => (f64::from(w), f64::from(h)),
        SizeKind::Confined(bw, bh) => {
            let scale = f64::min(f64::from(bw) / rwf, f64::from(bh) / rhf);
            // A box larger than the region asks for upscaling: without `^` that
            // is a 400, as the public validator (size_noup) expects.
            (
                (rwf * scale).round().clamp(1.0, f64::from(bw)),
                (rhf * scale).round().clamp(1.0, f64::from(bh)),
            )
        }
    };
    if !s.upscale && (w > rwf || h > rhf) {
        return Err(bad(
            "the size is larger than the region; ask with ^ to allow upscaling",
        ));
    }
    if w > f64::from(MAX_SIDE) || h > f64::from(MAX_SIDE) || w * h > MAX_AREA as f64 {
        return Err(bad(format!(
            "the size is larger than {MAX_SIDE} pixels a side or {MAX_AREA} pixels"
        )));
    }
    Ok((w as u32, h as u32))
}

/// The bounding box of a `w`×`h` image turned by `degrees` (what `rotate_any` makes).
pub fn rotated_box(w: u32, h: u32, degrees: f64) -> (u32, u32) {
    let deg = degrees % 360.0;
    if deg == 0.0 || deg == 180.0 {
        return (w, h);
    }
    if deg == 90.0 || deg == 270.0 {
        return (h, w);
    }
    let (s, c) = deg.to_radians().sin_cos();
    let (wf, hf) = (f64::from(w), f64::from(h));
    (
        (wf * c.abs() + hf * s.abs()).round().max(1.0) as u32,
        (wf * s.abs() + hf * c.abs()).round().max(1.0) as u32,
    )
}

fn within_caps(w: u32, h: u32) -> bool {
    w <= MAX_SIDE && h <= MAX_SIDE && u64::from(w) * u64::from(h) <= MAX_AREA
}

/// The scaled size (before rotation) for a region of `rw`×`rh`, such that the
/// response, once rotated, stays within [`MAX_SIDE`] and [`MAX_AREA`]: `max`
/// shrinks to fit, any other size beyond the caps is a 400.
pub fn scaled_size(s: Size, rotation: Rotation, rw: u32, rh: u32) -> Result<(u32, u32), IiifError> {
    let (mut w, mut h) = output_size(s, rw, rh)?;
    let (bw, bh) = rotated_box(w, h, rotation.degrees);
    if within_caps(bw, bh) {
        return Ok((w, h));
    }
    if s.kind == SizeKind::Max {
        // The box grows linearly with the scale: shrink by the factor that fits it.
        let (bwf, bhf) = (f64::from(bw), f64::from(bh));
        let k = f64::min(f64::from(MAX_SIDE) / bwf, f64::from(MAX_SIDE) / bhf)
            .min((MAX_AREA as f64 / (bwf * bhf)).sqrt());
        w = ((f64::from(w) * k).floor() as u32).max(1);
        h = ((f64::from(h) * k).floor() as u32).max(1);
        // The box is rounded again: a few small steps more absorb that.
        for _ in 0..32 {
            let (bw, bh) = rotated_box(w, h, rotation.degrees);
            if within_caps(bw, bh) {
                return Ok((w, h));
            }
            w = ((f64::from(w) * 0.999).floor() as u32).max(1);
            h = ((f64::from(h) * 0.999).floor() as u32).max(1);
        }
    }
    Err(bad(format!(
        "rotated, the image would be {bw}×{bh}: larger than {MAX_SIDE} pixels a side or {MAX_AREA} pixels"
    )))
}

/// Runs the pipeline on a decoded image and encodes the result.
pub fn render(img: &DynamicImage, req: &ImageRequest) -> Result<Vec<u8>, IiifError> {
    let (x, y, rw, rh) = region_rect(req.region, img.width(), img.height())?;
    let (w, h) = scaled_size(req.size, req.rotation, rw, rh)?;
    let mut out = img.crop_imm(x, y, rw, rh);
    if (w, h) != (rw, rh) {
        out = crate::domains::binaries::imaging::resize(&out, w, h);
    }
    if req.rotation.mirror {
        out = out.fliph();
    }
    let deg = req.rotation.degrees % 360.0;
    out = if deg == 0.0 {
        out
    } else if deg == 90.0 {
        out.rotate90()
    } else if deg == 180.0 {
        out.rotate180()
    } else if deg == 270.0 {
        out.rotate270()
    } else {
        rotate_any(&out, deg, req.format != Format::Jpg)
    };
    out = match req.quality {
        Quality::Default | Quality::Color => out,
        Quality::Gray => DynamicImage::ImageLuma8(out.to_luma8()),
        Quality::Bitonal => {
            let mut l = out.to_luma8();
            for p in l.pixels_mut() {
                p[0] = if p[0] >= 128 { 255 } else { 0 };
            }
            DynamicImage::ImageLuma8(l)
        }
    };
    encode(out, req.format)
}

fn encode(img: DynamicImage, format: Format) -> Result<Vec<u8>, IiifError> {
    let mut buf = Vec::new();
    let result = match format {
        Format::Jpg => {
            return super::imaging::encode_jpeg(&super::imaging::for_jpeg(img), 85)
                .map_err(IiifError::BadRequest);
        }
        Format::Png => img.write_to(&mut Cursor::new(&mut buf), ImageFormat::Png),
        Format::Webp => {
            // The WebP encoder takes 8-bit RGB(A) only.
            let img = if img.color().has_alpha() {
                DynamicImage::ImageRgba8(img.to_rgba8())
            } else {
                DynamicImage::ImageRgb8(img.to_rgb8())
            };
            img.write_to(&mut Cursor::new(&mut buf), ImageFormat::WebP)
        }
    };
    result.map_err(|e| IiifError::BadRequest(format!("cannot encode: {e}")))?;
    Ok(buf)
}

/// Rotates clockwise by any angle onto the bounding box; the corners are
/// transparent (PNG, WebP) or white (JPEG).
fn rotate_any(img: &DynamicImage, degrees: f64, alpha: bool) -> DynamicImage {
    let (w, h) = (f64::from(img.width()), f64::from(img.height()));
    let (s, c) = degrees.to_radians().sin_cos();
    let (nw, nh) = rotated_box(img.width(), img.height(), degrees);
    let src = img.to_rgba8();
    let background = if alpha {
        Rgba([0, 0, 0, 0])
    } else {
        Rgba([255, 255, 255, 255])
    };
    let (cx, cy) = (w / 2.0, h / 2.0);
    let (ncx, ncy) = (f64::from(nw) / 2.0, f64::from(nh) / 2.0);
    let out = RgbaImage::from_fn(nw, nh, |x, y| {
        // Inverse mapping: where in the source does this output pixel come from?
        let dx = f64::from(x) + 0.5 - ncx;
        let dy = f64::from(y) + 0.5 - ncy;
        let sx = dx * c + dy * s + cx;
        let sy = -dx * s + dy * c + cy;
        if sx >= 0.0 && sy >= 0.0 && sx < w && sy < h {
            *src.get_pixel(sx as u32, sy as u32)
        } else {
            background
        }
    });
    if alpha {
        DynamicImage::ImageRgba8(out)
    } else {
        super::imaging::for_jpeg(DynamicImage::ImageRgba8(out))
    }
}

/// A bounded cache of computed responses (least recently used goes first).
pub struct RenderCache {
    budget: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    used: usize,
    entries: HashMap<String, std::sync::Arc<Vec<u8>>>,
    order: VecDeque<String>,
}

impl RenderCache {
    pub fn new(budget: usize) -> Self {
        RenderCache {
            budget,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    pub fn get(&self, key: &str) -> Option<std::sync::Arc<Vec<u8>>> {
        let mut c = self.inner.lock().ok()?;
        let hit = c.entries.get(key).cloned()?;
        if let Some(i) = c.order.iter().position(|k| k == key) {
            let k = c.order.remove(i).expect("present");
            c.order.push_back(k);
        }
        Some(hit)
    }

    pub fn put(&self, key: String, value: std::sync::Arc<Vec<u8>>) {
        if value.len() > self.budget / 4 {
            return;
        }
        let Ok(mut c) = self.inner.lock() else { return };
        if c.entries.contains_key(&key) {
            return;
        }
        c.used += value.len();
        c.entries.insert(key.clone(), value);
        c.order.push_back(key);
        while c.used > self.budget {
            let Some(old) = c.order.pop_front() else {
                break;
            };
            if let Some(v) = c.entries.remove(&old) {
                c.used -= v.len();
            }
        }
    }
}

#[cfg(test)]
mod tests;
