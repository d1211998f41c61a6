//! Re-crawls of OK originals: the crawler sends a conditional GET with the
//! stored validators; a 304 or unchanged content only updates
//! `last_checked`, changed content becomes a new original the references
//! move to (the old one is collected).

use super::*;
use crate::domains::binaries::imaging;
use crate::domains::binaries::model::*;
use crate::domains::web::FetchError;
use crate::kernel::error::ApiError;
use crate::kernel::random_id;
use crate::store::{Cas, Condition};

impl Binaries {
    /// Takes a re-crawl's answer for an OK original; `Ok(true)` when its
    /// content changed.
    pub(super) async fn refetched(
        &self,
        o: &Original,
        arrival: Arrival,
    ) -> Result<bool, FetchError> {
        let temporary = |e: ApiError| FetchError::Temporary(e.message());
        let url = o.url.clone().unwrap_or_default();
        let fresh = random_id(22);
        let now = self.now();
        let ok = Condition::Equals(vec![("status", Some(BinaryStatus::Ok.as_str().into()))]);
        let (received, new_validators) = match arrival {
            Arrival::Failed(e) => return Err(e),
            Arrival::Body {
                body,
                mime,
                validators,
            } => (
                self.receive(&fresh, body, mime.as_deref()).await?,
                validators,
            ),
            Arrival::NotModified => {
                self.store()
                    .cas(Cas {
                        row: original_update(&o.id).set("last_checked", &now),
                        condition: ok,
                        ttl: None,
                    })
                    .await
                    .map_err(|e| temporary(e.into()))?;
                self.log_original(&o.id, "re-crawled: not modified").await;
                return Ok(false);
            }
        };
        if o.checksum.as_deref() == Some(received.checksum.as_str()) {
            self.drop_original(&fresh, received.parts).await;
            self.store()
                .cas(Cas {
                    row: original_update(&o.id)
                        .set("last_checked", &now)
                        .set_opt("e_tag", new_validators.e_tag.clone())
                        .set_opt("last_modified", new_validators.last_modified.clone()),
                    condition: ok,
                    ttl: None,
                })
                .await
                .map_err(|e| temporary(e.into()))?;
            self.log_original(&o.id, "re-crawled: the content is unchanged")
                .await;
            return Ok(false);
        }
        let Some(mime) = imaging::sniff(&received.head) else {
            self.drop_original(&fresh, received.parts).await;
            return Err(FetchError::Permanent(
                "the URL no longer serves an image; the stored one is kept".into(),
            ));
        };
        let replacement = Original {
            id: fresh.clone(),
            status: Some(BinaryStatus::Processing),
            url: Some(url.clone()),
            mime: Some(mime.to_owned()),
            size: Some(received.size as i64),
            parts: Some(received.parts),
            checksum: Some(received.checksum.clone()),
            created: Some(now.clone()),
            touched: Some(self.touch_token()),
            // Not for the worker: this run scales it.
            next_attempt: Some(self.later(self.inner.config.lease)),
            e_tag: new_validators.e_tag.clone(),
            last_modified: new_validators.last_modified.clone(),
            ..Default::default()
        };
        self.store()
            .cas(Cas {
                row: replacement.to_row(),
                condition: Condition::NotExists,
                ttl: None,
            })
            .await
            .map_err(|e| temporary(e.into()))?;
        let slot = self.scale_slot().await?;
        let finished = self.work(&replacement, slot).await?.indexed();
        // The references move while the replacement still holds its lease, so
        // the collector never sees it unreferenced.
        self.move_references(&o.id, &fresh, &url)
            .await
            .map_err(temporary)?;
        // Its references came after it was scaled: they get the "OK" line
        // here (`settle` writes it to those `scale` found: none).
        self.log_original(&fresh, "OK").await;
        // The checksum's index row goes with the OK status (none when the
        // store refused the derivatives and it was settled RETRY).
        self.settle(&replacement, BinaryStatus::Processing, Ok(finished))
            .await
            .map_err(temporary)?;
        self.log_original(
            &fresh,
            &format!("re-crawled: the content changed; now original {fresh}"),
        )
        .await;
        Ok(true)
    }
}
