//! IIIF images of stored originals: a stored derivative when one answers the
//! request exactly, else rendered within the render budget (fair per client)
//! and the decode budget, and cached.

use std::net::IpAddr;
use std::sync::Arc;

use super::*;
use crate::domains::binaries::imaging;
use crate::domains::binaries::model::*;
use crate::domains::binaries::render_budget::Refusal;
use crate::kernel::error::ApiError;

/// Why a IIIF image could not be made.
pub enum IiifFailure {
    Request(crate::domains::binaries::iiif::IiifError),
    Api(ApiError),
    /// No room for the render now: the client may retry later.
    Busy(ApiError),
}

impl From<Refusal> for IiifFailure {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::TooLarge { .. } => IiifFailure::Api(r.into_api_error()),
            Refusal::QueueFull { .. } | Refusal::WaitedTooLong { .. } => {
                IiifFailure::Busy(r.into_api_error())
            }
        }
    }
}

/// What a render is counted as in the render budget: the original's pixels,
/// all decoded, and the response's, once rotated.
fn render_pixels(width: u32, height: u32, response: (u32, u32)) -> u64 {
    u64::from(width)
        .saturating_mul(u64::from(height))
        .saturating_add(u64::from(response.0).saturating_mul(u64::from(response.1)))
}

impl From<ApiError> for IiifFailure {
    fn from(e: ApiError) -> Self {
        IiifFailure::Api(e)
    }
}

impl Binaries {
    /// Reserves the decode budget for decoding an OK original again (a
    /// render, a pyramid) into `output_pixels` with `scratch` bytes beside:
    /// a header that no longer reads is an internal error, a decode the
    /// budget can never hold a 413.
    pub(super) async fn reserve_redecode(
        &self,
        bytes: &[u8],
        output_pixels: u64,
        scratch: u64,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, IiifFailure> {
        let cost = imaging::decode_cost(bytes, output_pixels, |_, _| scratch).map_err(|e| {
            tracing::error!(error = %e, "an OK original's header no longer reads");
            IiifFailure::Api(ApiError::Internal)
        })?;
        let reserved = self.inner.decode_budget.reserve(cost).await;
        reserved.map_err(|e| IiifFailure::Api(ApiError::PayloadTooLarge(e)))
    }

    /// A IIIF image of an OK original: a stored derivative when it is exactly
    /// that, else computed (from the original) in `client`'s share of the
    /// render budget, and cached.
    pub async fn iiif_image(
        &self,
        o: &Original,
        req: &crate::domains::binaries::iiif::ImageRequest,
        key: &str,
        client: IpAddr,
    ) -> Result<Arc<Vec<u8>>, IiifFailure> {
        use crate::domains::binaries::iiif::{Format, Quality, Region};
        let (w, h) = (
            o.width.unwrap_or(0).max(0) as u32,
            o.height.unwrap_or(0).max(0) as u32,
        );
        let plain = req.region == Region::Full
            && req.rotation.degrees % 360.0 == 0.0
            && !req.rotation.mirror
            && matches!(req.quality, Quality::Default | Quality::Color)
            && req.format == Format::Jpg;
        if plain {
            let (ow, oh) = crate::domains::binaries::iiif::output_size(req.size, w, h)
                .map_err(IiifFailure::Request)?;
            for (bw, bh, table) in DERIVATIVES {
                if imaging::fit(w, h, bw, bh) == (ow, oh)
                    && let Some(bytes) = self.derivative(&o.id, table).await?
                {
                    return Ok(Arc::new(bytes));
                }
            }
        }
        if let Some(tile) = super::tiles::tile_of(req, w, h) {
            match self.tile(o, tile, client).await {
                // A pyramid the decode budget has no room for: render the
                // tile as any other region.
                Err(IiifFailure::Api(ApiError::PayloadTooLarge(_))) => {}
                other => return other,
            }
        }
        let key = format!("{}/{key}", o.id);
        if let Some(hit) = self.inner.render_cache.get(&key) {
            return Ok(hit);
        }
        // Check the request against the size, and wait for room to render
        // it, before reading anything.
        let (_, _, rw, rh) = crate::domains::binaries::iiif::region_rect(req.region, w, h)
            .map_err(IiifFailure::Request)?;
        let (ow, oh) = crate::domains::binaries::iiif::scaled_size(req.size, req.rotation, rw, rh)
            .map_err(IiifFailure::Request)?;
        let (bw, bh) = crate::domains::binaries::iiif::rotated_box(ow, oh, req.rotation.degrees);
        // Owned, and moved into the render: a client that hangs up drops
        // this future but not the blocking render, which keeps its room.
        let room = self
            .inner
            .render_budget
            .reserve(client, render_pixels(w, h, (bw, bh)))
            .await?;
        let bytes = self.read_all(o).await?;
        let limits = self.inner.config.imaging;
        let req = *req;
        let scratch = if (ow, oh) == (rw, rh) {
            0
        } else {
            imaging::resize_scratch(rw, oh)
        };
        let memory = self
            .reserve_redecode(&bytes, u64::from(bw) * u64::from(bh), scratch)
            .await?;
        let out = tokio::task::spawn_blocking(move || {
            let decoded = imaging::decode(&bytes, &limits).map_err(|e| {
                tracing::error!(error = %e, "an OK original no longer decodes");
                IiifFailure::Api(ApiError::Internal)
            })?;
            let out = crate::domains::binaries::iiif::render(&decoded, &req)
                .map_err(IiifFailure::Request);
            drop((memory, room));
            out
        })
        .await
        .map_err(|_| IiifFailure::Api(ApiError::Internal))??;
        let out = Arc::new(out);
        self.inner.render_cache.put(key, out.clone());
        Ok(out)
    }
}
