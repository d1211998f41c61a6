//! The background worker and the entry point for fetched bodies: the worker
//! claims due originals whose bytes are stored (uploads) and scales them;
//! [`Binaries::link_fetched`] takes what the crawler fetched for a URL (the
//! seam where a body arrives for an original). Both settle the outcome (OK,
//! RETRY with a doubling delay, ERROR).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use super::settle::Finished;
use super::*;
use crate::domains::binaries::model::*;
use crate::domains::web::FetchError;
use crate::kernel::error::ApiResult;
use crate::kernel::parse_time;
use crate::kernel::worker::Passes;
use crate::store::buckets::all_buckets;
use crate::store::{Cas, Condition, Cursor, Mutation, Page, Slice, Value};

impl Binaries {
    // ----- the worker -----

    /// Starts the background work: the scaling worker processes due
    /// originals whenever woken, and at least every `interval`; the collector
    /// removes unreferenced originals every `gc_every`. Both hold the service
    /// weakly and end with it (or at `workers().stop()`).
    pub fn spawn_worker(&self, interval: Duration, gc_every: Duration) {
        let weak = Arc::downgrade(&self.inner);
        self.inner.workers.spawn(Passes {
            name: "binaries-scaling",
            service: weak.clone(),
            wake: Some(self.inner.wake.clone()),
            every: interval,
            pass: |inner| async move { Binaries { inner }.process_due().await.map(drop) }.boxed(),
        });
        // The first pass comes `gc_every` after the start, not at it.
        let mut first = true;
        self.inner.workers.spawn(Passes {
            name: "binaries-collector",
            service: weak,
            wake: None,
            every: gc_every,
            pass: move |inner| {
                let skip = std::mem::take(&mut first);
                async move {
                    if skip {
                        return Ok(());
                    }
                    let r = Binaries { inner }.collect_garbage().await?;
                    if r.removed > 0 {
                        tracing::info!(removed = r.removed, "collected unreferenced originals");
                    }
                    Ok(())
                }
                .boxed()
            },
        });
    }

    /// Frees the claims of a process that is gone: every queued upload that
    /// waits for scaling under a worker's lease becomes due now. Only for the
    /// embedded store at start-up, where no other process can hold a claim
    /// (the file is locked): a server killed while scaling is taken over at
    /// once instead of after its lease (5 min). Returns how many it freed.
    pub async fn release_dead_claims(&self) -> ApiResult<usize> {
        let mut freed = 0;
        let mut after = None;
        let now = self.now();
        loop {
            let page = self.pending_page(after).await?;
            for row in &page.rows {
                let id = row.string("original_id");
                let Some(o) = self.original(&id).await? else {
                    continue;
                };
                let claimed = o.status == Some(BinaryStatus::Processing)
                    && o.parts.is_some()
                    && o.next_attempt
                        .as_deref()
                        .and_then(parse_time)
                        .is_some_and(|t| t > self.inner.clock.now());
                if !claimed {
                    continue;
                }
                let applied = self
                    .store()
                    .cas(Cas {
                        row: original_update(&id).set("next_attempt", &now),
                        condition: Condition::Equals(vec![
                            ("status", Some(BinaryStatus::Processing.as_str().into())),
                            ("next_attempt", o.next_attempt.clone().map(Value::Text)),
                        ]),
                        ttl: None,
                    })
                    .await?
                    .applied;
                if applied {
                    self.store()
                        .apply(vec![Mutation::upsert(pending_row(&id, &now))])
                        .await?;
                    freed += 1;
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(freed),
            }
        }
    }

    /// Starts every queued original that is due and for which a slot is free,
    /// each in a task of its own: one slow download delays only itself, and
    /// an upload (which needs no download) only waits for a scaling slot.
    /// Returns how many it started; what finds no slot waits for a later pass.
    pub async fn process_due(&self) -> ApiResult<usize> {
        let mut started = 0;
        let mut after = None;
        let now = self.now();
        loop {
            if self.inner.scale_slots.available_permits() == 0 {
                return Ok(started);
            }
            let page = self.pending_page(after).await?;
            for row in page.rows.iter().filter(|r| r.string("due") <= now) {
                let id = row.string("original_id");
                if self.in_flight(&id) {
                    continue;
                }
                let Some(o) = self.original(&id).await? else {
                    self.unqueue(&id).await?;
                    continue;
                };
                if o.parts.is_none()
                    && let Some(url) = &o.url
                {
                    // Its body comes from the crawler (a queue row of an
                    // older version).
                    self.inner.frontier.want(url).await?;
                    self.unqueue(&id).await?;
                    continue;
                }
                let Ok(slot) = self.inner.scale_slots.clone().try_acquire_owned() else {
                    continue;
                };
                self.inner
                    .in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.clone());
                let this = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = this.process(o, slot).await {
                        tracing::warn!(original_id = %id, error = e.message(), "binary worker: processing failed");
                    }
                    this.inner
                        .in_flight
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&id);
                });
                started += 1;
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(started),
            }
        }
    }

    /// A page of the queue of originals waiting for work, all buckets merged.
    async fn pending_page(&self, after: Option<Cursor>) -> ApiResult<Page> {
        Ok(self.store().merged_slice(&PENDING_ORIGINALS,
            &all_buckets(&[]),
            &Slice::partition(vec![]).limit(100).after(after),
        )
        .await?)
    }

    /// Waits for one of the scaling slots.
    pub(super) async fn scale_slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, FetchError> {
        self.inner
            .scale_slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| FetchError::Temporary("the worker is stopping".into()))
    }

    pub(super) fn in_flight(&self, id: &str) -> bool {
        self.inner
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }

    /// Claims and processes one original, holding `slot` (a download slot when
    /// it must be fetched first, else a scaling slot); `false` if there was
    /// nothing to do.
    pub(super) async fn process(
        &self,
        o: Original,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> ApiResult<bool> {
        let id = o.id.as_str();
        let status = match o.status {
            Some(s @ (BinaryStatus::Processing | BinaryStatus::Retry)) => s,
            _ => {
                self.unqueue(id).await?;
                return Ok(false);
            }
        };
        if o.next_attempt
            .as_deref()
            .and_then(parse_time)
            .is_some_and(|t| t > self.inner.clock.now())
        {
            return Ok(false);
        }
        if !self.claim(&o, status).await? {
            return Ok(false);
        }
        let outcome = self.work(&o, slot).await;
        self.settle(&o, status, outcome).await?;
        Ok(true)
    }

    /// Claims an original for work: moves `next_attempt` past the lease, if
    /// nobody else did since `o` was read.
    pub(super) async fn claim(&self, o: &Original, status: BinaryStatus) -> ApiResult<bool> {
        Ok(self
            .store()
            .cas(Cas {
                row: original_update(&o.id)
                    .set("next_attempt", self.later(self.inner.config.lease)),
                condition: Condition::Equals(vec![
                    ("status", Some(status.as_str().into())),
                    ("next_attempt", o.next_attempt.clone().map(Value::Text)),
                ]),
                ttl: None,
            })
            .await?
            .applied)
    }

    /// Does the work a claimed original needs: scale its stored bytes,
    /// holding a scaling slot.
    pub(super) async fn work(
        &self,
        o: &Original,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Finished, FetchError> {
        if o.parts.is_some() {
            return self.scale(o.clone(), None, slot).await;
        }
        Err(FetchError::Permanent("the upload never finished".into()))
    }
}
