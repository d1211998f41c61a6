//! Re-validating originals fetched from URLs: a conditional GET with the
//! stored validators; changed content becomes a new original the references
//! move to.

use super::*;
use crate::binaries::fetch::{FetchError, Validators};
use crate::binaries::imaging;
use crate::binaries::model::*;
use crate::common::random_id;
use crate::error::{ApiError, ApiResult};
use crate::store::{Cas, Condition, Mutation, Row};

impl Binaries {
    /// Re-validates every OK original fetched from a URL: a conditional GET
    /// with its ETag and Last-Modified; unchanged content only updates
    /// `last_checked`, changed content becomes a new original (scaled at once)
    /// that the references and the URL move to; the old one is collected.
    pub async fn recheck(&self) -> ApiResult<RecheckReport> {
        let mut report = RecheckReport::default();
        let mut after = None;
        loop {
            let page = self.store().scan(&ORIGINALS, after, 200).await?;
            for row in &page.rows {
                let o = Original::from_row(row);
                if o.status != Some(BinaryStatus::Ok) || o.url.is_none() {
                    continue;
                }
                report.checked += 1;
                match self.recheck_one(&o).await {
                    Ok(true) => report.changed += 1,
                    Ok(false) => report.unchanged += 1,
                    Err(e) => {
                        report.failed += 1;
                        self.log_original(&o.id, &format!("recheck failed: {}", e.message()))
                            .await;
                    }
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(report),
            }
        }
    }

    /// Re-validates one original; `Ok(true)` when its content changed.
    pub async fn recheck_original(&self, id: &str) -> ApiResult<bool> {
        let o = self
            .original(id)
            .await?
            .filter(|o| o.status == Some(BinaryStatus::Ok) && o.url.is_some())
            .ok_or_else(|| ApiError::NotFound(format!("OK original {id} fetched from a URL")))?;
        self.recheck_one(&o)
            .await
            .map_err(|e| ApiError::bad_input(e.message().to_owned()))
    }

    pub(super) async fn recheck_one(&self, o: &Original) -> Result<bool, FetchError> {
        let temporary = |e: ApiError| FetchError::Temporary(e.message());
        let url = o.url.clone().unwrap_or_default();
        let validators = Validators {
            e_tag: o.e_tag.clone(),
            last_modified: o.last_modified.clone(),
        };
        let fresh = random_id(22);
        let now = self.now();
        let ok = Condition::Equals(vec![("status", Some(BinaryStatus::Ok.as_str().into()))]);
        let Some((received, _, new_validators)) = self.download(&fresh, &url, &validators).await?
        else {
            self.store()
                .cas(Cas {
                    row: original_update(&o.id).set("last_checked", &now),
                    condition: ok,
                    ttl: None,
                })
                .await
                .map_err(|e| temporary(e.into()))?;
            self.log_original(&o.id, "rechecked: not modified").await;
            return Ok(false);
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
            self.log_original(&o.id, "rechecked: the content is unchanged")
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
            next_attempt: Some(self.later(LEASE)),
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
        let finished = self.work(&replacement, slot).await?;
        // The references move while the replacement still holds its lease, so
        // the collector never sees it unreferenced.
        self.move_references(&o.id, &fresh, &url)
            .await
            .map_err(temporary)?;
        self.settle(&replacement, BinaryStatus::Processing, Ok(finished))
            .await
            .map_err(temporary)?;
        self.store()
            .apply(vec![Mutation::upsert(
                Row::new(&ORIGINALS_CHECKSUM)
                    .set("checksum", &received.checksum)
                    .set("original_id", &fresh),
            )])
            .await
            .map_err(|e| temporary(e.into()))?;
        self.log_original(
            &fresh,
            &format!("rechecked: the content changed; now original {fresh}"),
        )
        .await;
        Ok(true)
    }
}
