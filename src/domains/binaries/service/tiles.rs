//! Deep zoom: each original's tile pyramid, built once (on the first tile
//! request) and stored, so that a viewer's tile costs a read and no decode
//! of the whole original. info.json advertises the tiles ([`TILE`] pixels,
//! scale factors 1, 2, 4, ... until the image fits one tile); a request
//! that is exactly such a tile (region on the grid, size its scaled size,
//! no rotation, default or color quality, JPEG) is served from the
//! pyramid; any other request is rendered as before.
//!
//! Building decodes the original once, halves it level by level (a box
//! filter of `thumbnail_exact`, the level above as input) and encodes each level's tiles. It
//! holds the render budget and the decode budget like a render of the whole
//! image, and one build per original runs in this process at a time (the
//! other requests for its tiles wait for it). Two processes may both build
//! one pyramid: the tiles they write are the same.

use std::sync::Arc;

use image::DynamicImage;

use super::*;
use crate::domains::binaries::iiif::{Format, ImageRequest, Quality, Region};
use crate::domains::binaries::imaging;
use crate::domains::binaries::model::{Original, TILE_PYRAMIDS, TILES};
use crate::domains::binaries::service::render::IiifFailure;
use crate::kernel::error::ApiError;

/// The side of a tile, in pixels of its level.
pub const TILE: u32 = 512;
/// JPEG quality of the tiles.
const QUALITY: u8 = 85;
/// Tiles written at once.
const WRITES_AT_ONCE: usize = 8;
/// Scale factors tried at most (2^15: an image of 16 million pixels a side).
const MAX_SCALES: u32 = 16;

/// The scale factors of an image's pyramid: 1, 2, 4, ... until the image
/// fits one tile.
pub fn scale_factors(w: u32, h: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut s = 1u32;
    while out.len() < MAX_SCALES as usize {
        out.push(s);
        if w.div_ceil(s) <= TILE && h.div_ceil(s) <= TILE {
            break;
        }
        s *= 2;
    }
    out
}

/// Tiles a pyramid may have (a 10,000-pixel square has some 540).
const MAX_TILES: u64 = 4_096;

/// Whether an image gets a pyramid: its last level fits one tile, and it
/// has at most [`MAX_TILES`] (an image of extreme shape is rendered).
pub fn has_pyramid(w: u32, h: u32) -> bool {
    let scales = scale_factors(w, h);
    let Some(last) = scales.last() else {
        return false;
    };
    let tiles: u64 = scales
        .iter()
        .map(|s| u64::from(w.div_ceil(*s).div_ceil(TILE)) * u64::from(h.div_ceil(*s).div_ceil(TILE)))
        .sum();
    w > 0 && h > 0 && w.div_ceil(*last) <= TILE && h.div_ceil(*last) <= TILE && tiles <= MAX_TILES
}

/// The tile (scale, column, row) a request is exactly, if it is one.
pub fn tile_of(req: &ImageRequest, w: u32, h: u32) -> Option<(u32, u32, u32)> {
    if !has_pyramid(w, h) || req.rotation.degrees % 360.0 != 0.0
        || req.rotation.mirror
        || !matches!(req.quality, Quality::Default | Quality::Color)
        || req.format != Format::Jpg
        || w == 0
        || h == 0
    {
        return None;
    }
    let (x, y, rw, rh) = match req.region {
        Region::Full => (0, 0, w, h),
        Region::Pixels(x, y, rw, rh) => (x, y, rw.min(w.saturating_sub(x)), rh.min(h.saturating_sub(y))),
        _ => return None,
    };
    let (ow, oh) = crate::domains::binaries::iiif::scaled_size(req.size, req.rotation, rw, rh).ok()?;
    scale_factors(w, h).into_iter().find_map(|s| {
        let side = TILE * s;
        let on_grid = x % side == 0
            && y % side == 0
            && x < w
            && y < h
            && rw == side.min(w - x)
            && rh == side.min(h - y)
            && (ow, oh) == (rw.div_ceil(s), rh.div_ceil(s));
        on_grid.then_some((s, x / side, y / side))
    })
}

/// Every tile of `image`: (scale, column, row, JPEG).
/// A tile: scale, column, row, JPEG.
pub type Tile = (u32, u32, u32, Vec<u8>);

pub fn pyramid(image: DynamicImage) -> Result<Vec<Tile>, String> {
    let (w, h) = (image.width(), image.height());
    let mut level = imaging::for_jpeg(image);
    let mut out = Vec::new();
    for s in scale_factors(w, h) {
        if s > 1 {
            let (lw, lh) = (w.div_ceil(s), h.div_ceil(s));
            // Halving with the integer box filter of `thumbnail_exact`: the
            // level above averaged, at a fraction of a triangle filter's cost.
            level = level.thumbnail_exact(lw, lh);
        }
        let (lw, lh) = (level.width(), level.height());
        for col in 0..lw.div_ceil(TILE) {
            for row in 0..lh.div_ceil(TILE) {
                let (x, y) = (col * TILE, row * TILE);
                let tile = level.crop_imm(x, y, TILE.min(lw - x), TILE.min(lh - y));
                out.push((s, col, row, imaging::encode_jpeg(&tile, QUALITY)?));
            }
        }
    }
    Ok(out)
}

impl Binaries {
    /// The tile (`scale`, `col`, `row`) of an OK original, building its
    /// pyramid first when it has none (in `client`'s share of the render
    /// budget).
    pub async fn tile(
        &self,
        o: &Original,
        (scale, col, row): (u32, u32, u32),
        client: std::net::IpAddr,
    ) -> Result<Arc<Vec<u8>>, IiifFailure> {
        if let Some(t) = self.stored_tile(&o.id, scale, col, row).await? {
            return Ok(t);
        }
        let lock = {
            let mut building = self.inner.pyramids.lock().unwrap_or_else(|p| p.into_inner());
            building.entry(o.id.clone()).or_default().clone()
        };
        let guard = lock.clone().lock_owned().await;
        // The build runs in a task of its own that holds the lock: a client
        // that hangs up does not stop it (its tiles and marker are all
        // written), and the other requests for the original wait for it.
        let this = self.clone();
        let original = o.clone();
        let outcome = tokio::spawn(async move {
            let _one_build = guard;
            let built = this
                .store()
                .get(&TILE_PYRAMIDS, &[original.id.as_str().into()])
                .await
                .map_err(ApiError::from)?
                .is_some();
            let outcome = if built {
                Ok(())
            } else {
                this.build_pyramid(&original, client).await
            };
            // Built or failed, this build's entry goes (a failed build is
            // tried again by the next request); a newer entry stays.
            let mut building = this.inner.pyramids.lock().unwrap_or_else(|p| p.into_inner());
            if building.get(&original.id).is_some_and(|l| Arc::ptr_eq(l, &lock)) {
                building.remove(&original.id);
            }
            outcome
        })
        .await
        .map_err(|_| IiifFailure::Api(ApiError::Internal))?;
        outcome?;
        self.stored_tile(&o.id, scale, col, row)
            .await?
            .ok_or_else(|| {
                tracing::error!(original = %o.id, scale, col, row, "a built pyramid lacks a tile");
                IiifFailure::Api(ApiError::Internal)
            })
    }

    async fn stored_tile(&self, id: &str, scale: u32, col: u32, row: u32) -> Result<Option<Arc<Vec<u8>>>, ApiError> {
        let key = [id.into(), (scale as i32).into(), (col as i32).into(), (row as i32).into()];
        Ok(self.store().get(&TILES, &key).await?.and_then(|r| match r.get("data") {
            Some(Value::Blob(b)) => Some(Arc::new(b.clone())),
            _ => None,
        }))
    }

    async fn build_pyramid(&self, o: &Original, client: std::net::IpAddr) -> Result<(), IiifFailure> {
        let (w, h) = (o.width.unwrap_or(0).max(0) as u32, o.height.unwrap_or(0).max(0) as u32);
        let pixels = u64::from(w) * u64::from(h);
        // Like a render of the whole image: its pixels, and a level half
        // its size being made from it.
        let room = self
            .inner
            .render_budget
            .reserve(client, pixels + pixels / 4)
            .await?;
        let bytes = self.read_all(o).await?;
        // `thumbnail_exact` needs no scratch beyond its output.
        let memory = self.reserve_redecode(&bytes, pixels / 4, 0).await?;
        let limits = self.inner.config.imaging;
        let started = std::time::Instant::now();
        let tiles = tokio::task::spawn_blocking(move || {
            let image = imaging::decode(&bytes, &limits)?;
            let out = pyramid(image);
            drop((memory, room));
            out
        })
        .await
        .map_err(|_| IiifFailure::Api(ApiError::Internal))?
        .map_err(|e| {
            tracing::error!(error = %e, "an OK original's pyramid could not be made");
            IiifFailure::Api(ApiError::Internal)
        })?;
        let count = tiles.len();
        let size: usize = tiles.iter().map(|t| t.3.len()).sum();
        let scales = scale_factors(w, h).len();
        // One write a tile (a batch of blobs would pass the cluster's batch
        // size limits), several at once.
        let writes = crate::kernel::bounded(tiles, WRITES_AT_ONCE, |(s, c, r, data)| async move {
            let row = Row::new(&TILES)
                .set("original_id", o.id.as_str())
                .set("scale", s as i32)
                .set("col", c as i32)
                .set("row", r as i32)
                .set("data", Value::Blob(data));
            self.store().apply(vec![Mutation::upsert(row)]).await
        })
        .await;
        for w in writes {
            w.map_err(ApiError::from)?;
        }
        self.store()
            .apply(vec![Mutation::upsert(
                Row::new(&TILE_PYRAMIDS)
                    .set("original_id", o.id.as_str())
                    .set("tile", TILE as i32)
                    .set("scales", scales as i32)
                    .set("built", self.inner.clock.rfc3339()),
            )])
            .await
            .map_err(ApiError::from)?;
        // The collector may have taken the original meanwhile: then the
        // pyramid goes too.
        let still = self.original(&o.id).await?;
        if !still.is_some_and(|s| s.status == Some(crate::domains::binaries::model::BinaryStatus::Ok)) {
            self.store()
                .apply(Binaries::pyramid_deletes(&o.id))
                .await
                .map_err(ApiError::from)?;
            return Err(IiifFailure::Api(ApiError::NotFound(format!("binary original {}", o.id))));
        }
        tracing::info!(
            original = %o.id,
            tiles = count,
            bytes = size,
            ms = started.elapsed().as_millis() as u64,
            "tile pyramid built"
        );
        Ok(())
    }

    /// Deletes an original's pyramid (the collector, with the original).
    pub(super) fn pyramid_deletes(id: &str) -> Vec<Mutation> {
        let mut out: Vec<Mutation> = (0..MAX_SCALES)
            .map(|k| Mutation::delete(&TILES, vec![id.into(), (1i32 << k).into()]))
            .collect();
        out.push(Mutation::delete(&TILE_PYRAMIDS, vec![id.into()]));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domains::binaries::iiif::parse;

    fn req(region: &str, size: &str) -> ImageRequest {
        parse(region, size, "0", "default.jpg").unwrap()
    }

    #[test]
    fn scale_factors_run_until_the_image_fits_one_tile() {
        assert_eq!(scale_factors(400, 300), [1]);
        assert_eq!(scale_factors(513, 10), [1, 2]);
        assert_eq!(scale_factors(6000, 4000), [1, 2, 4, 8, 16]);
        assert!(has_pyramid(6000, 4000));
        assert!(!has_pyramid(100_000_000, 1), "an extreme shape is rendered");
        assert!(!has_pyramid(0, 10));
    }

    #[test]
    fn tiles_on_the_grid_are_found_and_others_are_not() {
        let (w, h) = (6000, 4000);
        assert_eq!(tile_of(&req("0,0,512,512", "512,512"), w, h), Some((1, 0, 0)));
        assert_eq!(tile_of(&req("0,0,512,512", "512,"), w, h), Some((1, 0, 0)));
        assert_eq!(tile_of(&req("1024,1024,1024,1024", "512,512"), w, h), Some((2, 1, 1)));
        // The last column and row are narrower.
        assert_eq!(tile_of(&req("5632,3584,368,416", "368,416"), w, h), Some((1, 11, 7)));
        assert_eq!(tile_of(&req("full", "375,250"), w, h), Some((16, 0, 0)));
        assert_eq!(tile_of(&req("0,0,512,512", "256,256"), w, h), None, "not its size");
        assert_eq!(tile_of(&req("10,0,512,512", "512,512"), w, h), None, "off the grid");
        assert_eq!(tile_of(&parse("0,0,512,512", "512,512", "90", "default.jpg").unwrap(), w, h), None);
        assert_eq!(tile_of(&parse("0,0,512,512", "512,512", "0", "gray.jpg").unwrap(), w, h), None);
        assert_eq!(tile_of(&parse("0,0,512,512", "512,512", "0", "default.png").unwrap(), w, h), None);
    }

    #[test]
    fn a_pyramid_has_every_tile_of_every_level() {
        let img = DynamicImage::ImageRgb8(image::RgbImage::from_fn(1100, 600, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 0])
        }));
        let tiles = pyramid(img).unwrap();
        // Scale 1: 3 × 2; scale 2 (550 × 300): 2 × 1; scale 4 (275 × 150): 1.
        let keys: Vec<(u32, u32, u32)> = tiles.iter().map(|t| (t.0, t.1, t.2)).collect();
        assert_eq!(
            keys,
            [(1, 0, 0), (1, 0, 1), (1, 1, 0), (1, 1, 1), (1, 2, 0), (1, 2, 1), (2, 0, 0), (2, 1, 0), (4, 0, 0)]
        );
        let last = image::load_from_memory(&tiles[5].3).unwrap();
        assert_eq!((last.width(), last.height()), (1100 - 1024, 600 - 512));
        let top = image::load_from_memory(&tiles[8].3).unwrap();
        assert_eq!((top.width(), top.height()), (275, 150));
    }
}
