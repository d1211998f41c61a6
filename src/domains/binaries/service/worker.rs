//! The background worker and the entry point for fetched bodies: the worker
//! claims due originals whose bytes are stored (uploads) and scales them;
//! [`Binaries::link_fetched`] takes what the crawler fetched for a URL (the
//! seam where a body arrives for an original). Both settle the outcome (OK,
//! RETRY with a doubling delay, ERROR).

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::domains::binaries::imaging;
use crate::domains::binaries::model::*;
use crate::domains::web::{Download, FetchError, Validators};
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::parse_time;
use crate::kernel::worker::{Worker, WorkerState};
use crate::store::buckets::{all_buckets, bucket_of, merged_slice};
use crate::store::{Cas, Condition, Cursor, Mutation, Page, Row, Slice, Value};

/// What scaling an original found out, for `settle`.
pub(super) struct Finished {
    original: Original,
    width: i32,
    height: i32,
    validators: Option<Validators>,
}

impl Binaries {
    // ----- the worker -----

    /// Starts the background work: the scaling worker processes due
    /// originals whenever woken, and at least every `interval`; the collector
    /// removes unreferenced originals every `gc_every`. Both hold the service
    /// weakly and end with it (or at `workers().stop()`).
    pub fn spawn_worker(&self, interval: Duration, gc_every: Duration) {
        let weak = Arc::downgrade(&self.inner);
        self.inner.workers.spawn(ScalingWorker {
            service: weak.clone(),
            wake: self.inner.wake.clone(),
            interval,
        });
        self.inner.workers.spawn(Collector {
            service: weak,
            every: gc_every,
            first: true,
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
        Ok(merged_slice(
            self.store().as_ref(),
            &PENDING_ORIGINALS,
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
    async fn claim(&self, o: &Original, status: BinaryStatus) -> ApiResult<bool> {
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

    /// What the crawler fetched for `url`: a body is stored and scaled for the
    /// URL's original waiting for one (PROCESSING or RETRY), or revalidates
    /// an OK one (a re-crawl: unchanged content only updates `last_checked`,
    /// changed content becomes a new original the references move to); a
    /// failure settles the waiting original as RETRY or ERROR.
    pub async fn link_fetched(&self, url: &str, arrival: Arrival) -> ApiResult<Settled> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(Settled::default());
        };
        let Some(o) = self.original(&id).await? else {
            return Ok(Settled::default());
        };
        match o.status {
            Some(status @ (BinaryStatus::Processing | BinaryStatus::Retry))
                if o.parts.is_none() =>
            {
                if !self.claim(&o, status).await? {
                    return self.settled(url, &id).await;
                }
                self.inner
                    .in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.clone());
                let outcome = match arrival {
                    Arrival::Body {
                        body,
                        mime,
                        validators,
                    } => match self.receive(&id, body, mime.as_deref()).await {
                        Ok(received) => {
                            self.body_arrived(&o, url, received, mime, validators).await
                        }
                        Err(e) => Err(e),
                    },
                    Arrival::NotModified => Err(FetchError::Temporary(
                        "the server answered 304 to an unconditional request".into(),
                    )),
                    Arrival::Failed(e) => Err(e),
                };
                let settled = self.settle(&o, status, outcome).await;
                self.inner
                    .in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                settled?;
                self.settled(url, &id).await
            }
            Some(BinaryStatus::Ok) => {
                if let Err(e) = self.refetched(&o, arrival).await {
                    self.log_original(&id, &format!("re-crawl failed: {}", e.message()))
                        .await;
                }
                self.settled(url, &id).await
            }
            _ => self.settled(url, &id).await,
        }
    }

    /// The state of the URL's original after a fetch, for the crawler, read
    /// again through the URL: `fetched_for` is the original the body went
    /// to; the URL may have a new one by now, which still waits for a body.
    async fn settled(&self, url: &str, fetched_for: &str) -> ApiResult<Settled> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(Settled::default());
        };
        let o = self.original(&id).await?;
        Ok(match o {
            None => Settled::default(),
            Some(o) => Settled {
                retry_at: (o.status == Some(BinaryStatus::Retry))
                    .then(|| o.next_attempt.clone())
                    .flatten(),
                checksum: o.checksum.clone(),
                waiting: o.parts.is_none()
                    && (o.status == Some(BinaryStatus::Retry)
                        || (o.status == Some(BinaryStatus::Processing) && o.id != fetched_for)),
                status: o.status,
            },
        })
    }

    /// Whether the URL's original waits for a body nobody has given it: a
    /// new original, made for the URL after a fetch of it had looked.
    pub async fn url_waits(&self, url: &str) -> ApiResult<bool> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(false);
        };
        Ok(matches!(
            self.original(&id).await?,
            Some(o) if o.parts.is_none() && o.status == Some(BinaryStatus::Processing)
        ))
    }

    /// The original a URL points at now.
    async fn url_original(&self, url: &str) -> ApiResult<Option<String>> {
        let row = self.store().get(&URLS, &[url.into()]).await?;
        Ok(super::register::url_target(row.as_ref()))
    }

    /// Makes the URL's original wait for a body again when it ended in ERROR
    /// (an admin asked for a re-crawl); `true` when it did.
    pub async fn retry_url(&self, url: &str) -> ApiResult<bool> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(false);
        };
        let Some(o) = self.original(&id).await? else {
            return Ok(false);
        };
        if o.status != Some(BinaryStatus::Error) || o.parts.is_some() {
            return Ok(false);
        }
        let reset = self
            .store()
            .cas(Cas {
                row: original_update(&id)
                    .set("status", BinaryStatus::Processing.as_str())
                    .set("attempts", 0)
                    .set("next_attempt", self.now()),
                condition: Condition::Equals(vec![(
                    "status",
                    Some(BinaryStatus::Error.as_str().into()),
                )]),
                ttl: None,
            })
            .await?;
        if reset.applied {
            self.log_original(&id, "an admin asked for a re-crawl")
                .await;
        }
        Ok(reset.applied)
    }

    /// THE SEAM where a fetched body enters the pipeline: its chunks are
    /// stored under `o`; this checks that it is an image, moves the
    /// references to an identical original stored before, or scales it.
    /// (The crawler reaches it through [`Binaries::link_fetched`].)
    pub(super) async fn body_arrived(
        &self,
        o: &Original,
        url: &str,
        received: Received,
        mime: Option<String>,
        validators: Validators,
    ) -> Result<Finished, FetchError> {
        let sniffed = imaging::sniff(&received.head).ok_or_else(|| {
            FetchError::Permanent(format!(
                "not an image in a supported format (the server said {})",
                mime.as_deref().unwrap_or("nothing")
            ))
        })?;
        if let Some(other) = self
            .by_checksum(&received.checksum)
            .await
            .map_err(|e| FetchError::Temporary(e.message()))?
            && other != o.id
        {
            self.log_original(
                &o.id,
                &format!(
                    "identical content is stored as original {other}; the references move there"
                ),
            )
            .await;
            self.move_references(&o.id, &other, url)
                .await
                .map_err(|e| FetchError::Temporary(e.message()))?;
            return Err(FetchError::Permanent(format!(
                "duplicate of original {other}"
            )));
        }
        let o = Original {
            size: Some(received.size as i64),
            parts: Some(received.parts),
            checksum: Some(received.checksum),
            mime: Some(sniffed.to_owned()),
            ..o.clone()
        };
        self.log_original(
            &o.id,
            &format!("downloaded {} bytes ({sniffed})", received.size),
        )
        .await;
        let slot = self.scale_slot().await?;
        self.scale(o, Some(validators), slot).await
    }

    /// Makes and stores the derivatives of a stored original, within a
    /// scaling slot and the decode budget.
    async fn scale(
        &self,
        o: Original,
        fetched: Option<Validators>,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Finished, FetchError> {
        let bytes = self
            .read_all(&o)
            .await
            .map_err(|e| FetchError::Temporary(e.message()))?;
        let limits = self.inner.config.imaging;
        // The largest derivative is scaled from the whole image, each smaller
        // one from the previous result: the first resize holds the most.
        let cost = imaging::decode_cost(&bytes, 0, |w, h| {
            let tallest = DERIVATIVES
                .iter()
                .map(|(bw, bh, _)| imaging::fit(w, h, *bw, *bh).1)
                .max()
                .unwrap_or(0);
            imaging::resize_scratch(w, tallest)
        })
        .map_err(FetchError::Permanent)?;
        let memory = self
            .inner
            .decode_budget
            .reserve(cost)
            .await
            .map_err(FetchError::Permanent)?;
        let boxes: Vec<(u32, u32)> = DERIVATIVES.iter().map(|(w, h, _)| (*w, *h)).collect();
        let made = tokio::task::spawn_blocking(move || {
            let made = imaging::derivatives_of(&bytes, &boxes, &limits);
            drop(memory);
            made
        })
        .await
        .map_err(|e| FetchError::Permanent(format!("scaling failed: {e}")))?
        .map_err(FetchError::Permanent)?;
        drop(slot);
        let (w, h, scaled) = (made.width, made.height, made.derivatives);
        for ((_, _, table), (_, _, jpeg)) in DERIVATIVES.iter().zip(scaled) {
            self.store()
                .apply(vec![Mutation::upsert(
                    Row::new(table).set("original_id", &o.id).set("data", jpeg),
                )])
                .await
                .map_err(|e| {
                    // The text goes into the public log: the store's own
                    // message (a driver's) stays in ours.
                    tracing::warn!(error = %e, original = %o.id, "storing a derivative failed");
                    FetchError::Temporary("the store did not take the derivatives".into())
                })?;
        }
        self.log_original(&o.id, &format!("{w}×{h} pixels; 4 derivatives made"))
            .await;
        Ok(Finished {
            original: o,
            width: w as i32,
            height: h as i32,
            validators: fetched,
        })
    }

    /// Points every reference of `from` (and the URL) at `to`.
    pub(super) async fn move_references(&self, from: &str, to: &str, url: &str) -> ApiResult<()> {
        for id in self.refs_of(from).await? {
            let Some(r) = self.reference(&id).await? else {
                continue;
            };
            let moved = Reference {
                original_id: to.to_owned(),
                ..r.clone()
            };
            if self.attach(&moved).await?.is_none() {
                return Err(ApiError::Unavailable);
            }
            self.store()
                .apply(vec![Mutation::delete(
                    &BINARY_REFS_ORIGINAL,
                    vec![from.into(), id.as_str().into()],
                )])
                .await?;
        }
        self.store()
            .cas(Cas {
                row: Row::new(&URLS).set("url", url).set("original_id", to),
                condition: Condition::Equals(vec![("original_id", Some(from.into()))]),
                ttl: None,
            })
            .await?;
        self.store()
            .apply(vec![Mutation::upsert(
                Row::new(&URLS_ORIGINAL)
                    .set("original_id", to)
                    .set("url", url),
            )])
            .await?;
        Ok(())
    }

    /// Streams a fetched body into chunk rows of `id`.
    pub(super) async fn receive(
        &self,
        id: &str,
        mut body: Download,
        mime: Option<&str>,
    ) -> Result<Received, FetchError> {
        let mut writer = ChunkWriter::new(self, id);
        while let Some(piece) = body.next_chunk().await? {
            match writer.push(&piece).await {
                Ok(()) => {}
                Err(WriteError::TooLarge) => {
                    return Err(FetchError::Permanent(format!(
                        "the file is larger than the limit of {} bytes",
                        self.inner.config.max_bytes
                    )));
                }
                Err(WriteError::NotAnImage) => {
                    return Err(FetchError::Permanent(format!(
                        "{NOT_AN_IMAGE} (the server said {})",
                        mime.unwrap_or("nothing")
                    )));
                }
                Err(WriteError::Store(e)) => return Err(FetchError::Temporary(e.message())),
            }
        }
        match writer.finish().await {
            Ok(r) if r.size == 0 => Err(FetchError::Permanent("the server sent no bytes".into())),
            Ok(r) => Ok(r),
            Err(WriteError::TooLarge | WriteError::NotAnImage) => {
                Err(FetchError::Permanent("too large".into()))
            }
            Err(WriteError::Store(e)) => Err(FetchError::Temporary(e.message())),
        }
    }

    /// Records the outcome of a claimed piece of work.
    pub(super) async fn settle(
        &self,
        o: &Original,
        status: BinaryStatus,
        outcome: Result<Finished, FetchError>,
    ) -> ApiResult<()> {
        let id = o.id.as_str();
        let expect = Condition::Equals(vec![("status", Some(status.as_str().into()))]);
        match outcome {
            Ok(f) => {
                let now = self.now();
                let mut row = original_update(id)
                    .set("status", BinaryStatus::Ok.as_str())
                    .set("width", f.width)
                    .set("height", f.height)
                    .set("last_checked", &now)
                    .set("next_attempt", &now);
                if let (Some(size), Some(parts), Some(checksum), Some(mime)) = (
                    f.original.size,
                    f.original.parts,
                    f.original.checksum.clone(),
                    f.original.mime.clone(),
                ) {
                    row = row
                        .set("size", size)
                        .set("parts", parts)
                        .set("checksum", &checksum)
                        .set("mime", mime);
                    if f.validators.is_some() && self.by_checksum(&checksum).await?.is_none() {
                        self.store()
                            .apply(vec![Mutation::upsert(
                                Row::new(&ORIGINALS_CHECKSUM)
                                    .set("checksum", &checksum)
                                    .set("original_id", id),
                            )])
                            .await?;
                    }
                }
                if let Some(v) = &f.validators {
                    row = row
                        .set_opt("e_tag", v.e_tag.clone())
                        .set_opt("last_modified", v.last_modified.clone());
                }
                // The log line first: whoever sees the new status also sees why.
                self.log_original(id, "OK").await;
                self.store()
                    .cas(Cas {
                        row,
                        condition: expect,
                        ttl: None,
                    })
                    .await?;
                self.unqueue(id).await?;
            }
            Err(FetchError::Permanent(e)) => {
                self.log_original(id, &format!("ERROR: {e}")).await;
                self.store()
                    .cas(Cas {
                        row: original_update(id)
                            .set("status", BinaryStatus::Error.as_str())
                            .set("error", &e),
                        condition: expect,
                        ttl: None,
                    })
                    .await?;
                self.unqueue(id).await?;
            }
            Err(FetchError::Temporary(e)) => {
                let attempts = o.attempts + 1;
                if attempts >= self.inner.config.max_attempts {
                    return Box::pin(self.settle(
                        &Original {
                            attempts,
                            ..o.clone()
                        },
                        status,
                        Err(FetchError::Permanent(format!(
                            "{e} (gave up after {attempts} attempts)"
                        ))),
                    ))
                    .await;
                }
                let delay = self.inner.config.retry_base * 2u32.saturating_pow(attempts as u32 - 1);
                let due = self.later(delay);
                self.log_original(
                    id,
                    &format!("RETRY: {e} (attempt {attempts}; next at {due})"),
                )
                .await;
                self.store()
                    .cas(Cas {
                        row: original_update(id)
                            .set("status", BinaryStatus::Retry.as_str())
                            .set("attempts", attempts)
                            .set("next_attempt", &due)
                            .set("error", &e),
                        condition: expect,
                        ttl: None,
                    })
                    .await?;
                // Stored bytes are retried by the worker; a URL's body by
                // the crawler, which re-queues the link for `due`.
                if o.parts.is_some() || o.url.is_none() {
                    self.store()
                        .apply(vec![Mutation::upsert(pending_row(id, &due))])
                        .await?;
                }
            }
        }
        Ok(())
    }

    pub(super) async fn unqueue(&self, id: &str) -> ApiResult<()> {
        self.store()
            .apply(vec![Mutation::delete(
                &PENDING_ORIGINALS,
                vec![bucket_of(id).into(), id.into()],
            )])
            .await?;
        Ok(())
    }
}

/// Processes due originals (downloads, scaling), a pass at a time.
struct ScalingWorker {
    service: std::sync::Weak<super::Inner>,
    wake: Arc<tokio::sync::Notify>,
    interval: Duration,
}

#[async_trait::async_trait]
impl Worker for ScalingWorker {
    fn name(&self) -> String {
        "binaries-scaling".into()
    }

    async fn work(&mut self) -> ApiResult<WorkerState> {
        let Some(inner) = self.service.upgrade() else {
            return Ok(WorkerState::Done);
        };
        Binaries { inner }.process_due().await?;
        Ok(WorkerState::Idle)
    }

    async fn wait_for_work(&mut self) {
        tokio::select! {
            _ = self.wake.notified() => {}
            _ = tokio::time::sleep(self.interval) => {}
        }
    }
}

/// Removes originals nobody references, a whole pass every `every` (the
/// first one `every` after the start, not at it).
struct Collector {
    service: std::sync::Weak<super::Inner>,
    every: Duration,
    first: bool,
}

#[async_trait::async_trait]
impl Worker for Collector {
    fn name(&self) -> String {
        "binaries-collector".into()
    }

    async fn work(&mut self) -> ApiResult<WorkerState> {
        let Some(inner) = self.service.upgrade() else {
            return Ok(WorkerState::Done);
        };
        if std::mem::take(&mut self.first) {
            return Ok(WorkerState::Idle);
        }
        let r = Binaries { inner }.collect_garbage().await?;
        if r.removed > 0 {
            tracing::info!(removed = r.removed, "collected unreferenced originals");
        }
        Ok(WorkerState::Idle)
    }

    async fn wait_for_work(&mut self) {
        tokio::time::sleep(self.every).await;
    }
}
