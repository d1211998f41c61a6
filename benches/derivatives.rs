//! Benchmark (not a test): the four derivatives (fit inside 800×600, 440×330,
//! 140×105, 116×87, JPEG quality 85) of one 24-megapixel JPEG, made by our
//! pipeline and, side by side in the same run, by libvips' `vipsthumbnail`
//! (Debian package libvips-tools) making the same four files. Reports the
//! median of several runs of each and the ratio.
//!
//! Run: `cargo bench --bench derivatives` (scripts/bench-derivatives.sh
//! installs libvips-tools first when it is missing).

use std::io::Cursor;
use std::process::Command;
use std::time::{Duration, Instant};

use kartei::domains::binaries::imaging::{self, ImagingLimits};

const BOXES: [(u32, u32); 4] = [(800, 600), (440, 330), (140, 105), (116, 87)];
const RUNS: usize = 5;

/// A photo-like 6000×4000 JPEG: smooth gradients with fine texture.
fn photo() -> Vec<u8> {
    let (w, h) = (6000u32, 4000u32);
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        let n = (x.wrapping_mul(73_856_093) ^ y.wrapping_mul(19_349_663)) % 23;
        image::Rgb([
            ((x * 255 / w) as u8).wrapping_add(n as u8),
            ((y * 255 / h) as u8).wrapping_add((n * 2) as u8),
            (((x + y) * 255 / (w + h)) as u8).wrapping_add((n * 3) as u8),
        ])
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut Cursor::new(&mut out), 90)
        .encode_image(&img)
        .expect("encode");
    out
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    kartei::tune_allocator();
    let dir = tempfile::tempdir().expect("temporary directory");
    let input = dir.path().join("photo.jpg");
    let bytes = photo();
    std::fs::write(&input, &bytes).expect("write input");
    println!(
        "input: 6000×4000 JPEG, {:.1} MB; {RUNS} runs each, median",
        bytes.len() as f64 / 1e6
    );

    let limits = ImagingLimits::default();
    let mut ours = Vec::new();
    let mut sizes = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let out = imaging::derivatives_of(&bytes, &BOXES, &limits).expect("derivatives");
        ours.push(t.elapsed());
        sizes = out.derivatives.iter().map(|(w, h, _)| (*w, *h)).collect();
    }
    let ours = median(ours);
    println!(
        "kartei:        {:>8.1} ms  {sizes:?}",
        ours.as_secs_f64() * 1e3
    );

    // The floor: one DCT-scaled decode and the four encodes, nothing else
    // (the scaled images made beforehand, outside the clock).
    let (_, _, decoded) = imaging::decode_for(&bytes, &limits, BOXES[0]).expect("decode");
    let scaled: Vec<image::DynamicImage> = sizes
        .iter()
        .map(|&(w, h)| imaging::resize(&decoded, w, h))
        .collect();
    let mut floor = Vec::new();
    let mut decodes = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let (_, _, image) = imaging::decode_for(&bytes, &limits, BOXES[0]).expect("decode");
        decodes.push(t.elapsed());
        std::hint::black_box(image);
        for s in &scaled {
            std::hint::black_box(imaging::encode_jpeg(s, limits.jpeg_quality).expect("encode"));
        }
        floor.push(t.elapsed());
    }
    let (floor, decodes) = (median(floor), median(decodes));
    println!(
        "floor (one scaled decode {:.1} ms + four encodes): {:>8.1} ms; kartei is x{:.2} of it",
        decodes.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3,
        ours.as_secs_f64() / floor.as_secs_f64()
    );

    // The same without DCT-scaled decoding (full decode, then scale): why jpeg-decoder is here.
    let mut full = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let image = imaging::decode(&bytes, &limits).expect("decode");
        let (w, h) = (image.width(), image.height());
        let targets: Vec<(u32, u32)> = BOXES
            .iter()
            .map(|&(bw, bh)| imaging::fit(w, h, bw, bh))
            .collect();
        imaging::derivatives(image, &targets, limits.jpeg_quality).expect("derivatives");
        full.push(t.elapsed());
    }
    let full = median(full);
    println!(
        "kartei, full decode: {:>8.1} ms (DCT scaling saves x{:.1})",
        full.as_secs_f64() * 1e3,
        full.as_secs_f64() / ours.as_secs_f64()
    );

    let vips_ok = Command::new("vipsthumbnail")
        .arg("--vips-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !vips_ok {
        println!("vipsthumbnail not found: install libvips-tools for the reference");
        return;
    }
    let mut vips = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for (w, h) in BOXES {
            let out = dir.path().join(format!("vips-{w}x{h}.jpg"));
            let status = Command::new("vipsthumbnail")
                .arg(&input)
                .args(["--size", &format!("{w}x{h}")])
                .arg("-o")
                .arg(format!("{}[Q=85]", out.display()))
                .status()
                .expect("vipsthumbnail");
            assert!(status.success());
        }
        vips.push(t.elapsed());
    }
    let vips = median(vips);
    let vips_sizes: Vec<(u32, u32)> = BOXES
        .iter()
        .map(|(w, h)| {
            let p = dir.path().join(format!("vips-{w}x{h}.jpg"));
            image::image_dimensions(p).expect("vips output")
        })
        .collect();
    println!(
        "vipsthumbnail: {:>8.1} ms  {vips_sizes:?}",
        vips.as_secs_f64() * 1e3
    );
    println!(
        "ratio kartei / vipsthumbnail: {:.2} (below 1 means kartei is faster)",
        ours.as_secs_f64() / vips.as_secs_f64()
    );
    println!(
        "BENCH|four derivatives of a 24 MP JPEG against their floor (one DCT-scaled decode and four encodes)|{:.0} ms|{:.0} ms|x{:.2}|report",
        ours.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3,
        ours.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "the floor is x{:.2} of vipsthumbnail: no pipeline built on one decode goes below that",
        floor.as_secs_f64() / vips.as_secs_f64()
    );
    println!(
        "BENCH|four derivatives of a 24 MP JPEG (median)|{:.0} ms|{:.0} ms vipsthumbnail|x{:.2}|<= x1.0",
        ours.as_secs_f64() * 1e3,
        vips.as_secs_f64() * 1e3,
        ours.as_secs_f64() / vips.as_secs_f64()
    );
}
