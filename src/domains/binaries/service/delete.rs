//! Deleting references, and the collector of originals nobody references
//! (see the module's note on how it never races a new reference).

use super::*;
use crate::domains::binaries::model::*;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::kernel::{check_id, parse_time};
use futures::TryStreamExt;

use crate::store::buckets::bucket_of;
use crate::store::table_pages;
use crate::store::{Cas, Condition, Mutation, Value};

impl Binaries {
    // ----- deleting -----

    /// Deletes one reference and its logs (admin).
    pub async fn delete_reference(&self, who: &Principal, id: &str) -> ApiResult<()> {
        who.require(Role::Admin)?;
        let r = self
            .reference(id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("binary reference {id}")))?;
        self.remove_reference_rows(&r).await?;
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Deletes every reference of a context; returns how many.
    pub async fn delete_context(&self, who: &Principal, context: &str) -> ApiResult<u64> {
        who.require(Role::Admin)?;
        check_id("context", context)?;
        let mut n = 0;
        loop {
            let page = self.context_page(context, PAGE, None).await?;
            if page.items.is_empty() {
                return Ok(n);
            }
            for (_, entry) in page.items {
                let r = Reference {
                    id: entry.reference_id,
                    original_id: entry.original_id,
                    context: context.to_owned(),
                    created: String::new(),
                };
                self.remove_reference_rows(&r).await?;
                n += 1;
            }
        }
    }

    // ----- the collector -----

    /// Removes every original that no reference points to and that nobody
    /// touched within the grace period.
    pub async fn collect_garbage(&self) -> ApiResult<GcReport> {
        let mut report = GcReport::default();
        let mut pages = std::pin::pin!(table_pages(self.store().as_ref(), &ORIGINALS, None, 200));
        while let Some(page) = pages.try_next().await? {
            for row in &page.rows {
                report.checked += 1;
                let o = Original::from_row(row);
                if self.collect(&o).await? {
                    report.removed += 1;
                }
            }
        }
        Ok(report)
    }

    pub(super) async fn collect(&self, listed: &Original) -> ApiResult<bool> {
        // Decide on the row as it is now, not as the scan page saw it.
        let Some(o) = self.original(&listed.id).await? else {
            return Ok(false);
        };
        let o = &o;
        if o.status != Some(BinaryStatus::Deleting) {
            let now = self.inner.clock.now();
            let grace = self.inner.config.gc_grace;
            let fresh = o
                .touched
                .as_deref()
                .and_then(touched_at)
                .is_none_or(|t| now - t < grace);
            // Work in progress (an upload, a claimed download, a recheck's
            // replacement) holds a lease in next_attempt.
            let leased = matches!(
                o.status,
                Some(BinaryStatus::Processing | BinaryStatus::Retry)
            ) && o
                .next_attempt
                .as_deref()
                .and_then(parse_time)
                .is_some_and(|t| t > now);
            if fresh || leased || !self.refs_of(&o.id).await?.is_empty() {
                return Ok(false);
            }
            let marked = self
                .store()
                .cas(Cas {
                    row: original_update(&o.id).set("status", BinaryStatus::Deleting.as_str()),
                    condition: Condition::Equals(vec![
                        ("status", o.status.map(|s| s.as_str().into())),
                        ("touched", o.touched.clone().map(Value::Text)),
                        ("next_attempt", o.next_attempt.clone().map(Value::Text)),
                    ]),
                    ttl: None,
                })
                .await?;
            if !marked.applied {
                return Ok(false);
            }
        }
        let id = o.id.as_str();
        // Chunks: as many as recorded, and on past that while any remain (an
        // upload that died before recording its count).
        let mut part = 0;
        loop {
            let exists = self
                .store()
                .get(&ORIGINALS_DATA, &[id.into(), part.into()])
                .await?
                .is_some();
            if !exists && part >= o.parts.unwrap_or(0) {
                break;
            }
            self.store()
                .apply(vec![Mutation::delete(
                    &ORIGINALS_DATA,
                    vec![id.into(), part.into()],
                )])
                .await?;
            part += 1;
        }
        let urls = self
            .store()
            .partition_rows(&URLS_ORIGINAL, id.into(), 1_000)
            .await?;
        let mut batch = Vec::new();
        for u in &urls {
            // Emptied only while it still points here: a registration may
            // have moved the URL to a new original since (see `url_target`).
            self.store()
                .cas(Cas {
                    row: Row::new(&URLS)
                        .set("url", u.string("url"))
                        .set("original_id", ""),
                    condition: Condition::Equals(vec![("original_id", Some(id.into()))]),
                    ttl: None,
                })
                .await?;
        }
        if let Some(c) = &o.checksum {
            let mapped = self
                .store()
                .get(&ORIGINALS_CHECKSUM, &[c.as_str().into()])
                .await?;
            if mapped.is_some_and(|m| m.text("original_id") == Some(id)) {
                batch.push(Mutation::delete(
                    &ORIGINALS_CHECKSUM,
                    vec![c.as_str().into()],
                ));
            }
        }
        for (_, _, t) in DERIVATIVES {
            batch.push(Mutation::delete(t, vec![id.into()]));
        }
        batch.extend(Binaries::pyramid_deletes(id));
        batch.push(Mutation::delete(&URLS_ORIGINAL, vec![id.into()]));
        batch.push(Mutation::delete(
            &PENDING_ORIGINALS,
            vec![bucket_of(id).into(), id.into()],
        ));
        self.store().apply(batch).await?;
        self.store()
            .apply(vec![Mutation::delete(&ORIGINALS, vec![id.into()])])
            .await?;
        Ok(true)
    }
}
