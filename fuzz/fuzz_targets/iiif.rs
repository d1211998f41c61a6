//! IIIF Image API path parameters on an image of any size: a bad request,
//! or a region inside the image and a response inside the caps once turned.
//! Input: 8 bytes of width and height, then `region/size/rotation/quality.format`.
#![no_main]

use kartei::domains::binaries::iiif::{
    IiifError, MAX_AREA, MAX_SIDE, parse, region_rect, rotated_box, scaled_size,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((dims, path)) = data.split_first_chunk::<8>() else {
        return;
    };
    let w = u32::from_le_bytes([dims[0], dims[1], dims[2], dims[3]]).max(1);
    let h = u32::from_le_bytes([dims[4], dims[5], dims[6], dims[7]]).max(1);
    let Ok(path) = std::str::from_utf8(path) else {
        return;
    };
    let mut p = path.splitn(4, '/');
    let (region, size, rotation, qf) = (
        p.next().unwrap_or_default(),
        p.next().unwrap_or_default(),
        p.next().unwrap_or_default(),
        p.next().unwrap_or("default.jpg"),
    );
    let req = match parse(region, size, rotation, qf) {
        Ok(req) => req,
        Err(IiifError::BadRequest(_) | IiifError::NotImplemented(_)) => return,
    };
    assert!((0.0..=360.0).contains(&req.rotation.degrees));
    let Ok((x, y, rw, rh)) = region_rect(req.region, w, h) else {
        return;
    };
    assert!(rw > 0 && rh > 0);
    assert!(u64::from(x) + u64::from(rw) <= u64::from(w));
    assert!(u64::from(y) + u64::from(rh) <= u64::from(h));
    if let Ok((sw, sh)) = scaled_size(req.size, req.rotation, rw, rh) {
        let (bw, bh) = rotated_box(sw, sh, req.rotation.degrees);
        assert!(sw > 0 && sh > 0, "{req:?}");
        assert!(
            bw <= MAX_SIDE && bh <= MAX_SIDE && u64::from(bw) * u64::from(bh) <= MAX_AREA,
            "{req:?} on {w}x{h}: {sw}x{sh}, turned {bw}x{bh}"
        );
        if !req.size.upscale {
            assert!(sw <= rw && sh <= rh, "{req:?}");
        }
    }
});
