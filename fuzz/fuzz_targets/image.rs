//! Originals (uploads and crawled bodies) through the bounded decoder: an
//! image within the pixel limit or an error, never a crash.
#![no_main]

use kartei::domains::binaries::imaging::{ImagingLimits, decode};
use libfuzzer_sys::fuzz_target;

const LIMITS: ImagingLimits = ImagingLimits {
    max_pixels: 1 << 22,
    jpeg_quality: 85,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(img) = decode(data, &LIMITS) {
        assert!(u64::from(img.width()) * u64::from(img.height()) <= LIMITS.max_pixels);
        assert!(img.width() > 0 && img.height() > 0);
    }
});
