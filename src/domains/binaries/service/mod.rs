//! The binaries rules: registering URLs and uploads, streaming originals into
//! chunks, deduplicating by content, the background worker that downloads and
//! scales, serving, deletion, and the collector of unreferenced originals.
//!
//! References and the collector never race: a reference is written first and
//! then proves its original alive with a lightweight transaction on the
//! original's row (`touched`); the collector reads that row, checks that no
//! reference exists, and marks it DELETING only `IF touched` is still what it
//! read. Whichever LWT comes second sees the other: either the collector gives
//! up, or the new reference sees DELETING and moves to a fresh original.
//!
//! Bodies from URLs come from the crawl frontier (`crate::domains::crawl`): a new URL
//! is handed to the [`Frontier`], and the crawler calls
//! [`Binaries::link_fetched`] with what the site answered. Work that outlives
//! a request on stored bytes (scaling an upload, a retry of it) is queued in
//! `pending_originals`, so any instance's worker can do it, and claimed with an
//! LWT on the original's `next_attempt`.

mod arrival;
mod chunks;
mod delete;
mod recheck;
mod register;
mod render;
mod settle;
pub mod tiles;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

use super::imaging::{self, ImagingLimits};
use super::model::*;
use super::render_budget::{RenderBudget, RenderLimits};
use crate::domains::web::FetchPolicy;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::{Clock, check_id, parse_time, random_id};
use crate::store::buckets::bucket_of;
use crate::store::{Cursor, DynStore, Listed, Mutation, Row, Slice, Table, Value};

/// Chunk size of stored originals.
pub const CHUNK: usize = 1 << 20;
/// How long an upload in progress keeps its original from the collector.
const UPLOAD_LEASE: Duration = Duration::from_secs(3600);
/// An upload still receiving renews its lease this often (a slow upload may
/// take longer than one lease).
const UPLOAD_RENEW: Duration = Duration::from_secs(900);
/// References deleted or logs read per page.
const PAGE: usize = 500;
/// References whose log lines are read at a time for a context's logs.
pub const LOG_PAGE: usize = 50;

#[derive(Clone, Debug)]
pub struct BinaryConfig {
    /// Largest original, uploaded or downloaded.
    pub max_bytes: u64,
    pub imaging: ImagingLimits,
    /// Download attempts before a temporary failure becomes ERROR.
    pub max_attempts: i32,
    /// First retry delay; doubles with every attempt.
    pub retry_base: Duration,
    /// An unreferenced original is collected only when untouched this long.
    pub gc_grace: Duration,
    /// The server's public base URL (for IIIF ids); else taken from `Host`.
    pub public_url: Option<String>,
    /// Bytes of computed IIIF responses kept in memory.
    pub iiif_cache_bytes: usize,
    /// Memory all decodes together may hold (see [`imaging::DecodeBudget`]).
    pub max_decode_bytes: u64,
    /// The budget of uncached IIIF renders and each client's share of it.
    pub render: RenderLimits,
    /// How long a worker owns an original it claimed for scaling; a claim of
    /// a process that died is taken over by another instance after this.
    pub lease: Duration,
}

impl Default for BinaryConfig {
    fn default() -> Self {
        BinaryConfig {
            max_bytes: 256 << 20,
            imaging: ImagingLimits::default(),
            max_attempts: 5,
            retry_base: Duration::from_secs(30),
            gc_grace: Duration::from_secs(600),
            public_url: None,
            iiif_cache_bytes: 64 << 20,
            max_decode_bytes: 2 << 30,
            render: RenderLimits::default(),
            lease: Duration::from_secs(300),
        }
    }
}

/// A reference listed under its context.
#[derive(Clone, Debug)]
pub struct ContextEntry {
    pub reference_id: String,
    pub original_id: String,
}

/// What a registration or upload answers.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub reference_id: String,
    pub original_id: String,
    pub status: &'static str,
}

/// What the site answered for a link, as the crawler hands it over.
pub enum Arrival {
    Body {
        body: crate::domains::web::Download,
        mime: Option<String>,
        validators: crate::domains::web::Validators,
    },
    NotModified,
    Failed(crate::domains::web::FetchError),
}

/// What became of the binary behind a fetched link.
#[derive(Clone, Debug, Default)]
pub struct Settled {
    /// The original's status afterwards; `None` when no binary wants the URL.
    pub status: Option<BinaryStatus>,
    /// For RETRY: when the next attempt is due (RFC 3339).
    pub retry_at: Option<String>,
    /// The content's checksum, when a body was stored.
    pub checksum: Option<String>,
    /// The URL's original still waits for a body: a RETRY, or a new original
    /// the URL was given while this fetch was under way (when this fetch
    /// settled its original OK, the crawler's `url_waits` looks for that).
    pub waiting: bool,
    /// The original this fetch settled OK, or the one the URL points at
    /// when that is OK (it never waits again).
    pub ok_original: Option<String>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    pub checked: u64,
    pub removed: u64,
}

#[derive(Clone)]
pub struct Binaries {
    inner: Arc<Inner>,
}

struct Inner {
    store: DynStore,
    config: BinaryConfig,
    /// Which URLs may be registered (the crawler's SSRF rules, checked early).
    policy: FetchPolicy,
    /// Where a URL whose body is wanted goes (the crawl frontier).
    frontier: Arc<dyn Frontier>,
    wake: Arc<Notify>,
    /// Computed IIIF images, and the room for computing more, per client.
    render_cache: super::iiif::RenderCache,
    render_budget: RenderBudget,
    /// The worker's scaling slots.
    scale_slots: Arc<tokio::sync::Semaphore>,
    /// Originals this process is working on (a pass skips them).
    in_flight: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Checksums of fetched bodies this process is settling, each with the
    /// lock a body with the same bytes waits on (see `arrival::SameBytes`).
    settling: std::sync::Mutex<
        std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    >,
    /// Originals whose tile pyramid this process is building, each with
    /// the lock their tile requests wait on.
    pyramids: std::sync::Mutex<
        std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    >,
    decode_budget: imaging::DecodeBudget,
    clock: Clock,
    /// The scaling worker and the collector, once started.
    workers: crate::kernel::worker::Workers,
}

/// Where the binaries domain sends a URL whose body it wants: the crawl
/// frontier, which fetches it politely and hands the answer back through
/// [`Binaries::link_fetched`].
#[async_trait::async_trait]
pub trait Frontier: Send + Sync {
    /// Queues `url` for a fetch as soon as its site allows (idempotent).
    async fn want(&self, url: &str) -> ApiResult<()>;
}

/// Scaling runs on the blocking pool; more at once than cores only adds memory.
const SCALE_SLOTS: usize = 2;

fn touched_at(token: &str) -> Option<time::OffsetDateTime> {
    parse_time(token.split('#').next().unwrap_or_default())
}

/// A CAS that sets some columns of an original if its status (and optionally
/// its touched token) is what was read.
pub(super) fn original_update(id: &str) -> Row {
    Row::new(&ORIGINALS).set("original_id", id)
}

use chunks::{ChunkWriter, NOT_AN_IMAGE, Received, WriteError};
pub use render::IiifFailure;

impl Binaries {
    pub fn new(
        store: DynStore,
        config: BinaryConfig,
        policy: FetchPolicy,
        frontier: Arc<dyn Frontier>,
    ) -> Self {
        Self::with_clock(store, config, policy, frontier, Clock::system())
    }

    /// A service reading time from `clock` (tests of leases and grace periods).
    pub fn with_clock(
        store: DynStore,
        config: BinaryConfig,
        policy: FetchPolicy,
        frontier: Arc<dyn Frontier>,
        clock: Clock,
    ) -> Self {
        Binaries {
            inner: Arc::new(Inner {
                store,
                config: config.clone(),
                policy,
                frontier,
                wake: Arc::new(Notify::new()),
                render_cache: super::iiif::RenderCache::new(config.iiif_cache_bytes),
                render_budget: RenderBudget::new(config.render),
                scale_slots: Arc::new(tokio::sync::Semaphore::new(SCALE_SLOTS)),
                in_flight: Default::default(),
                settling: Default::default(),
                pyramids: Default::default(),
                decode_budget: imaging::DecodeBudget::new(config.max_decode_bytes),
                clock,
                workers: Default::default(),
            }),
        }
    }

    fn now(&self) -> String {
        self.inner.clock.precise()
    }

    fn later(&self, d: Duration) -> String {
        self.inner.clock.after(d)
    }

    /// A fresh `touched` token: the time (for the collector's grace period) and
    /// randomness (so two touches in the same nanosecond still differ).
    fn touch_token(&self) -> String {
        format!("{}#{}", self.now(), random_id(6))
    }

    fn store(&self) -> &DynStore {
        &self.inner.store
    }

    pub fn config(&self) -> &BinaryConfig {
        &self.inner.config
    }

    /// The scaling worker and the collector (`spawn_worker`), as the admin sees them.
    pub fn workers(&self) -> &crate::kernel::worker::Workers {
        &self.inner.workers
    }

    // ----- reading -----

    pub async fn reference(&self, id: &str) -> ApiResult<Option<Reference>> {
        if check_id("reference", id).is_err() {
            return Ok(None);
        }
        Ok(self
            .store()
            .get(&BINARY_REFS, &[id.into()])
            .await?
            .map(|r| Reference::from_row(&r)))
    }

    pub async fn original(&self, id: &str) -> ApiResult<Option<Original>> {
        Ok(self
            .store()
            .get(&ORIGINALS, &[id.into()])
            .await?
            .map(|r| Original::from_row(&r)))
    }

    /// A reference with its original.
    pub async fn resolve(&self, reference_id: &str) -> ApiResult<Option<(Reference, Original)>> {
        let Some(r) = self.reference(reference_id).await? else {
            return Ok(None);
        };
        let o = self.original(&r.original_id).await?;
        Ok(o.map(|o| (r, o)))
    }

    /// Many references by id (for lists), in the order given.
    pub async fn references(&self, ids: &[String]) -> ApiResult<Vec<Option<Reference>>> {
        self.by_ids(&BINARY_REFS, ids, Reference::from_row).await
    }

    /// Many originals by id (for lists), in the order given.
    pub async fn originals(&self, ids: &[String]) -> ApiResult<Vec<Option<Original>>> {
        self.by_ids(&ORIGINALS, ids, Original::from_row).await
    }

    /// Rows of a table keyed by one text id, in the order given.
    async fn by_ids<T>(
        &self,
        table: &'static Table,
        ids: &[String],
        from_row: fn(&Row) -> T,
    ) -> ApiResult<Vec<Option<T>>> {
        let keys: Vec<Vec<Value>> = ids.iter().map(|i| vec![i.as_str().into()]).collect();
        Ok(self
            .store()
            .get_many(table, &keys)
            .await?
            .iter()
            .map(|r| r.as_ref().map(from_row))
            .collect())
    }

    /// One stored chunk of an original.
    pub async fn part(&self, original_id: &str, part: i32) -> ApiResult<Bytes> {
        match self
            .store()
            .get(&ORIGINALS_DATA, &[original_id.into(), part.into()])
            .await?
        {
            Some(r) => match r.get("data") {
                Some(Value::Blob(b)) => Ok(Bytes::from(b.clone())),
                _ => Err(ApiError::Internal),
            },
            None => {
                tracing::error!(original_id, part, "a chunk of an OK original is missing");
                Err(ApiError::Internal)
            }
        }
    }

    /// The whole original in memory (bounded by the size limit).
    async fn read_all(&self, o: &Original) -> ApiResult<Vec<u8>> {
        let mut out = Vec::with_capacity(o.size.unwrap_or(0).max(0) as usize);
        for p in 0..o.parts.unwrap_or(0) {
            out.extend_from_slice(&self.part(&o.id, p).await?);
        }
        Ok(out)
    }

    pub async fn derivative(
        &self,
        original_id: &str,
        table: &'static Table,
    ) -> ApiResult<Option<Vec<u8>>> {
        Ok(self
            .store()
            .get(table, &[original_id.into()])
            .await?
            .and_then(|r| match r.get("data") {
                Some(Value::Blob(b)) => Some(b.clone()),
                _ => None,
            }))
    }

    /// The references of a context, in id order.
    pub async fn context_page(
        &self,
        context: &str,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<Listed<ContextEntry>> {
        let page = self
            .store()
            .slice(
                &BINARY_REFS_CONTEXT,
                &Slice::partition(vec![context.into()])
                    .limit(first)
                    .after(after),
            )
            .await?;
        Ok(page.listed(|r| {
            Some(ContextEntry {
                reference_id: r.string("reference_id"),
                original_id: r.string("original_id"),
            })
        }))
    }

    /// Log lines of a reference, oldest first: (timestamp, message).
    pub async fn logs(&self, reference_id: &str) -> ApiResult<Vec<(String, String)>> {
        let rows = self
            .store()
            .partition_rows(&LOGS, reference_id.into(), 1_000)
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.string("timestamp"), r.string("message")))
            .collect())
    }

    /// Log lines of a page of a context's references, from `after`:
    /// (reference, timestamp, message), and where the next page starts.
    /// A page holds [`LOG_PAGE`] references, each at most 1,000 lines.
    pub async fn context_logs_page(
        &self,
        context: &str,
        after: Option<Cursor>,
    ) -> ApiResult<(Vec<(String, String, String)>, Option<Cursor>)> {
        let page = self.context_page(context, LOG_PAGE, after).await?;
        let logs = futures::future::try_join_all(
            page.items.iter().map(|(_, e)| self.logs(&e.reference_id)),
        )
        .await?;
        let mut out = Vec::new();
        for ((_, e), lines) in page.items.iter().zip(logs) {
            out.extend(
                lines
                    .into_iter()
                    .map(|(t, m)| (e.reference_id.clone(), t, m)),
            );
        }
        let next = match (page.has_next, page.items.last()) {
            (true, Some((c, _))) => Some(c.clone()),
            _ => None,
        };
        Ok((out, next))
    }

    async fn log(&self, reference_ids: &[String], message: &str) -> ApiResult<()> {
        self.write_lines(reference_ids, &[(self.now(), message.to_owned())])
            .await
    }

    /// Writes `lines` (each with its time) to the references given.
    async fn write_lines(
        &self,
        reference_ids: &[String],
        lines: &[(String, String)],
    ) -> ApiResult<()> {
        if !reference_ids.is_empty() {
            self.store().apply(log_rows(reference_ids, lines)).await?;
        }
        Ok(())
    }

    async fn refs_of(&self, original_id: &str) -> ApiResult<Vec<String>> {
        let rows = self
            .store()
            .partition_rows(&BINARY_REFS_ORIGINAL, original_id.into(), 1_000)
            .await?;
        Ok(rows.iter().map(|r| r.string("reference_id")).collect())
    }

    /// Logs `message` to every reference of the original; returns those.
    async fn log_original(&self, original_id: &str, message: &str) -> Vec<String> {
        self.log_original_except(original_id, message, &[]).await
    }

    /// As [`Self::log_original`], leaving out the references in `done`.
    async fn log_original_except(
        &self,
        original_id: &str,
        message: &str,
        done: &[String],
    ) -> Vec<String> {
        let line = [(self.now(), message.to_owned())];
        self.log_lines(original_id, &line, done).await
    }

    /// Logs `lines` (each with its time) to every reference of the original
    /// but those in `done`; returns the references written to.
    async fn log_lines(
        &self,
        original_id: &str,
        lines: &[(String, String)],
        done: &[String],
    ) -> Vec<String> {
        let written = match self.refs_of(original_id).await {
            Ok(mut refs) => {
                refs.retain(|r| !done.contains(r));
                self.write_lines(&refs, lines).await.map(|()| refs)
            }
            Err(e) => Err(e),
        };
        written.unwrap_or_else(|e| {
            tracing::warn!(
                original_id,
                lines = ?lines,
                error = e.message(),
                "could not write log lines"
            );
            Vec::new()
        })
    }
}

/// The log rows of `lines` (each with the time it was made at) for every
/// reference in `reference_ids`; lines of one time keep their order (the
/// line's place leads the random part of the key).
fn log_rows(reference_ids: &[String], lines: &[(String, String)]) -> Vec<Mutation> {
    let mut rows = Vec::with_capacity(reference_ids.len() * lines.len());
    for (place, (time, message)) in lines.iter().enumerate() {
        for r in reference_ids {
            rows.push(Mutation::upsert(
                Row::new(&LOGS)
                    .set("reference_id", r)
                    .set("timestamp", format!("{time}#{place}{}", random_id(4)))
                    .set("message", message),
            ));
        }
    }
    rows
}

fn pending_row(id: &str, due: &str) -> Row {
    Row::new(&PENDING_ORIGINALS)
        .set("bucket", bucket_of(id))
        .set("original_id", id)
        .set("due", due)
}
