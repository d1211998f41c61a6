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
//! Work that outlives a request (downloads, retries, derivatives) is queued in
//! `pending_originals`, so any instance's worker can do it, and claimed with an
//! LWT on the original's `next_attempt`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use super::fetch::{FetchError, Fetched, Fetcher, Validators, check_host_now, check_url};
use super::imaging::{self, ImagingLimits};
use super::model::*;
use crate::common::{Clock, check_id, parse_time, random_id};
use crate::error::{ApiError, ApiResult};
use crate::store::buckets::{all_buckets, bucket_of, merged_slice};
use crate::store::{Cas, Condition, DynStore, Mutation, Page, Row, Slice, Table, Value};

/// Chunk size of stored originals.
pub const CHUNK: usize = 1 << 20;
/// How long a worker owns an original it claimed.
const LEASE: Duration = Duration::from_secs(300);
/// How long an upload in progress keeps its original from the collector.
const UPLOAD_LEASE: Duration = Duration::from_secs(3600);
/// References deleted or logs read per page.
const PAGE: usize = 500;

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
    /// Downloads run at once.
    pub downloads: usize,
    /// Memory all decodes together may hold (see [`imaging::DecodeBudget`]).
    pub max_decode_bytes: u64,
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
            downloads: 8,
            max_decode_bytes: 2 << 30,
        }
    }
}

/// What a registration or upload answers.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub reference_id: String,
    pub original_id: String,
    pub status: &'static str,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct RecheckReport {
    pub checked: u64,
    pub unchanged: u64,
    pub changed: u64,
    pub failed: u64,
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
    fetcher: Fetcher,
    wake: Arc<Notify>,
    /// Computed IIIF images, and how many may be computed at once.
    render_cache: super::iiif::RenderCache,
    render_slots: tokio::sync::Semaphore,
    /// The worker's slots: downloads and scaling are counted apart, so that
    /// an upload waiting to be scaled never waits for a slow download.
    download_slots: Arc<tokio::sync::Semaphore>,
    scale_slots: Arc<tokio::sync::Semaphore>,
    /// Originals this process is working on (a pass skips them).
    in_flight: std::sync::Mutex<std::collections::HashSet<String>>,
    decode_budget: imaging::DecodeBudget,
    clock: Clock,
}

/// Scaling runs on the blocking pool; more at once than cores only adds memory.
const SCALE_SLOTS: usize = 2;

fn touched_at(token: &str) -> Option<time::OffsetDateTime> {
    parse_time(token.split('#').next().unwrap_or_default())
}

/// A CAS that sets some columns of an original if its status (and optionally
/// its touched token) is what was read.
fn original_update(id: &str) -> Row {
    Row::new(&ORIGINALS).set("original_id", id)
}

struct Received {
    size: u64,
    parts: i32,
    checksum: String,
    head: Vec<u8>,
}

/// Writes a byte stream into chunk rows of `original_id`, hashing as it goes.
struct ChunkWriter<'a> {
    binaries: &'a Binaries,
    original_id: String,
    buf: Vec<u8>,
    parts: i32,
    size: u64,
    hasher: Sha256,
    head: Vec<u8>,
}

impl<'a> ChunkWriter<'a> {
    fn new(binaries: &'a Binaries, original_id: &str) -> Self {
        ChunkWriter {
            binaries,
            original_id: original_id.to_owned(),
            buf: Vec::with_capacity(CHUNK),
            parts: 0,
            size: 0,
            hasher: Sha256::new(),
            head: Vec::new(),
        }
    }

    /// Adds bytes; `Err(limit)` once the total passes the size limit.
    async fn push(&mut self, mut data: &[u8]) -> Result<(), WriteError> {
        self.size += data.len() as u64;
        if self.size > self.binaries.inner.config.max_bytes {
            return Err(WriteError::TooLarge);
        }
        if self.head.len() < 64 {
            let n = (64 - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            // Refuse what is not an image from its first bytes, not after storing all of it.
            if self.head.len() == 64 && imaging::sniff(&self.head).is_none() {
                return Err(WriteError::NotAnImage);
            }
        }
        self.hasher.update(data);
        while !data.is_empty() {
            let n = (CHUNK - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == CHUNK {
                self.flush().await?;
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), WriteError> {
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.binaries
            .inner
            .store
            .apply(vec![Mutation::upsert(
                Row::new(&ORIGINALS_DATA)
                    .set("original_id", &self.original_id)
                    .set("part", self.parts)
                    .set("data", data),
            )])
            .await
            .map_err(|e| WriteError::Store(e.into()))?;
        self.parts += 1;
        Ok(())
    }

    async fn finish(mut self) -> Result<Received, WriteError> {
        if !self.buf.is_empty() {
            self.flush().await?;
        }
        Ok(Received {
            size: self.size,
            parts: self.parts,
            checksum: hex(&self.hasher.finalize()),
            head: self.head,
        })
    }
}

enum WriteError {
    TooLarge,
    NotAnImage,
    Store(ApiError),
}

const NOT_AN_IMAGE: &str = "not an image in a supported format (JPEG, PNG, WebP, GIF, TIFF)";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Binaries {
    pub fn new(store: DynStore, config: BinaryConfig, fetcher: Fetcher) -> Self {
        Self::with_clock(store, config, fetcher, Clock::system())
    }

    /// A service reading time from `clock` (tests of leases and grace periods).
    pub fn with_clock(
        store: DynStore,
        config: BinaryConfig,
        fetcher: Fetcher,
        clock: Clock,
    ) -> Self {
        Binaries {
            inner: Arc::new(Inner {
                store,
                config: config.clone(),
                fetcher,
                wake: Arc::new(Notify::new()),
                render_cache: super::iiif::RenderCache::new(config.iiif_cache_bytes),
                render_slots: tokio::sync::Semaphore::new(2),
                download_slots: Arc::new(tokio::sync::Semaphore::new(config.downloads.max(1))),
                scale_slots: Arc::new(tokio::sync::Semaphore::new(SCALE_SLOTS)),
                in_flight: Default::default(),
                decode_budget: imaging::DecodeBudget::new(config.max_decode_bytes),
                clock,
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
        after: Option<String>,
    ) -> ApiResult<Page> {
        Ok(self
            .store()
            .slice(
                &BINARY_REFS_CONTEXT,
                &Slice::partition(vec![context.into()])
                    .limit(first)
                    .after(after),
            )
            .await?)
    }

    /// Log lines of a reference, oldest first: (timestamp, message).
    pub async fn logs(&self, reference_id: &str) -> ApiResult<Vec<(String, String)>> {
        let page = self
            .store()
            .slice(
                &LOGS,
                &Slice::partition(vec![reference_id.into()]).limit(1_000),
            )
            .await?;
        Ok(page
            .rows
            .iter()
            .map(|r| (r.string("timestamp"), r.string("message")))
            .collect())
    }

    /// Log lines of every reference of a context: (reference, timestamp, message).
    pub async fn context_logs(&self, context: &str) -> ApiResult<Vec<(String, String, String)>> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self.context_page(context, PAGE, after).await?;
            let refs: Vec<String> = page.rows.iter().map(|r| r.string("reference_id")).collect();
            let logs = futures::future::try_join_all(refs.iter().map(|r| self.logs(r))).await?;
            for (r, lines) in refs.into_iter().zip(logs) {
                out.extend(lines.into_iter().map(|(t, m)| (r.clone(), t, m)));
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }

    async fn log(&self, reference_ids: &[String], message: &str) -> ApiResult<()> {
        if reference_ids.is_empty() {
            return Ok(());
        }
        let now = self.now();
        let batch = reference_ids
            .iter()
            .map(|r| {
                Mutation::upsert(
                    Row::new(&LOGS)
                        .set("reference_id", r)
                        .set("timestamp", format!("{now}#{}", random_id(4)))
                        .set("message", message),
                )
            })
            .collect();
        self.store().apply(batch).await?;
        Ok(())
    }

    async fn refs_of(&self, original_id: &str) -> ApiResult<Vec<String>> {
        let page = self
            .store()
            .slice(
                &BINARY_REFS_ORIGINAL,
                &Slice::partition(vec![original_id.into()]).limit(1_000),
            )
            .await?;
        Ok(page.rows.iter().map(|r| r.string("reference_id")).collect())
    }

    async fn log_original(&self, original_id: &str, message: &str) {
        let result = match self.refs_of(original_id).await {
            Ok(refs) => self.log(&refs, message).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(
                original_id,
                message,
                error = e.message(),
                "could not write a log line"
            );
        }
    }

    /// A IIIF image of an OK original: a stored derivative when it is exactly
    /// that, else computed (from the original) and cached.
    pub async fn iiif_image(
        &self,
        o: &Original,
        req: &super::iiif::ImageRequest,
        key: &str,
    ) -> Result<Arc<Vec<u8>>, IiifFailure> {
        use super::iiif::{Format, Quality, Region};
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
            let (ow, oh) =
                super::iiif::output_size(req.size, w, h).map_err(IiifFailure::Request)?;
            for (bw, bh, table) in DERIVATIVES {
                if imaging::fit(w, h, bw, bh) == (ow, oh)
                    && let Some(bytes) = self.derivative(&o.id, table).await?
                {
                    return Ok(Arc::new(bytes));
                }
            }
        }
        let key = format!("{}/{key}", o.id);
        if let Some(hit) = self.inner.render_cache.get(&key) {
            return Ok(hit);
        }
        // Check the request against the size before reading anything.
        let (_, _, rw, rh) =
            super::iiif::region_rect(req.region, w, h).map_err(IiifFailure::Request)?;
        super::iiif::scaled_size(req.size, req.rotation, rw, rh).map_err(IiifFailure::Request)?;
        let _slot = self
            .inner
            .render_slots
            .acquire()
            .await
            .map_err(|_| IiifFailure::Api(ApiError::Unavailable))?;
        let bytes = self.read_all(o).await?;
        let limits = self.inner.config.imaging;
        let req = *req;
        let (ow, oh) = super::iiif::scaled_size(req.size, req.rotation, rw, rh)
            .map_err(IiifFailure::Request)?;
        let (bw, bh) = super::iiif::rotated_box(ow, oh, req.rotation.degrees);
        let cost = imaging::decode_cost(&bytes, u64::from(bw) * u64::from(bh))
            .map_err(|e| IiifFailure::Api(ApiError::bad_input(e)))?;
        let memory = self
            .inner
            .decode_budget
            .reserve(cost)
            .await
            .map_err(|e| IiifFailure::Api(ApiError::PayloadTooLarge(e)))?;
        let out = tokio::task::spawn_blocking(move || {
            let decoded = imaging::decode(&bytes, &limits).map_err(|e| {
                tracing::error!(error = %e, "an OK original no longer decodes");
                IiifFailure::Api(ApiError::Internal)
            })?;
            let out = super::iiif::render(&decoded, &req).map_err(IiifFailure::Request);
            drop(memory);
            out
        })
        .await
        .map_err(|_| IiifFailure::Api(ApiError::Internal))??;
        let out = Arc::new(out);
        self.inner.render_cache.put(key, out.clone());
        Ok(out)
    }

    // ----- registering -----

    /// Registers a URL under a context: reuses the URL's original, or queues a
    /// download. Answers at once.
    pub async fn register_url(
        &self,
        url: &str,
        context: &str,
        mime: Option<String>,
    ) -> ApiResult<Registered> {
        check_id("context", context)?;
        let policy = self.inner.fetcher.policy();
        let parsed = check_url(policy, url.trim()).map_err(ApiError::BadUserInput)?;
        check_host_now(policy, &parsed)
            .await
            .map_err(ApiError::BadUserInput)?;
        let url = parsed.to_string();
        let mime = mime.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
        let reference = Reference {
            id: random_id(16),
            original_id: String::new(),
            context: context.to_owned(),
            created: self.now(),
        };
        for _ in 0..8 {
            let current = self
                .store()
                .get(&URLS, &[url.as_str().into()])
                .await?
                .map(|r| r.string("original_id"));
            let original_id = match current {
                Some(o) => o,
                None => {
                    let o = random_id(22);
                    let won = self
                        .store()
                        .cas(Cas {
                            row: Row::new(&URLS).set("url", &url).set("original_id", &o),
                            condition: Condition::NotExists,
                            ttl: None,
                        })
                        .await?
                        .applied;
                    if !won {
                        continue;
                    }
                    self.create_url_original(&o, &url, mime.clone()).await?;
                    o
                }
            };
            let r = Reference {
                original_id: original_id.clone(),
                ..reference.clone()
            };
            if let Some(o) = self.attach(&r).await? {
                self.log(
                    std::slice::from_ref(&r.id),
                    &format!("registered {url} in context {context}"),
                )
                .await?;
                if o.status == Some(BinaryStatus::Ok) {
                    self.log(
                        std::slice::from_ref(&r.id),
                        "the URL was fetched before; its original is reused",
                    )
                    .await?;
                }
                self.inner.wake.notify_one();
                return Ok(Registered {
                    reference_id: r.id,
                    original_id,
                    status: o.status.unwrap_or(BinaryStatus::Processing).as_str(),
                });
            }
            // The URL's original is gone or being collected: give the URL a new one.
            let fresh = random_id(22);
            let moved = self
                .store()
                .cas(Cas {
                    row: Row::new(&URLS).set("url", &url).set("original_id", &fresh),
                    condition: Condition::Equals(vec![(
                        "original_id",
                        Some(original_id.as_str().into()),
                    )]),
                    ttl: None,
                })
                .await?
                .applied;
            if moved {
                self.create_url_original(&fresh, &url, mime.clone()).await?;
            }
        }
        Err(ApiError::Unavailable)
    }

    async fn create_url_original(
        &self,
        id: &str,
        url: &str,
        mime: Option<String>,
    ) -> ApiResult<()> {
        let o = Original {
            id: id.to_owned(),
            status: Some(BinaryStatus::Processing),
            url: Some(url.to_owned()),
            mime,
            created: Some(self.now()),
            touched: Some(self.touch_token()),
            next_attempt: Some(self.now()),
            ..Default::default()
        };
        let created = self
            .store()
            .cas(Cas {
                row: o.to_row(),
                condition: Condition::NotExists,
                ttl: None,
            })
            .await?
            .applied;
        if created {
            self.store()
                .apply(vec![
                    Mutation::upsert(
                        Row::new(&URLS_ORIGINAL)
                            .set("original_id", id)
                            .set("url", url),
                    ),
                    Mutation::upsert(pending_row(id, &self.now())),
                ])
                .await?;
        }
        Ok(())
    }

    /// Writes the reference, then proves its original alive (see the module
    /// comment). `None` (and the reference removed again) when the original is
    /// gone or being collected.
    async fn attach(&self, r: &Reference) -> ApiResult<Option<Original>> {
        self.store()
            .apply(r.rows().into_iter().map(Mutation::upsert).collect())
            .await?;
        for _ in 0..8 {
            let o = self.original(&r.original_id).await?;
            let status = o.as_ref().and_then(|o| o.status);
            let Some(status) = status.filter(|s| *s != BinaryStatus::Deleting) else {
                self.remove_reference_rows(r).await?;
                return Ok(None);
            };
            let outcome = self
                .store()
                .cas(Cas {
                    row: original_update(&r.original_id).set("touched", self.touch_token()),
                    condition: Condition::Equals(vec![("status", Some(status.as_str().into()))]),
                    ttl: None,
                })
                .await?;
            if outcome.applied {
                return Ok(outcome.current.as_ref().map(Original::from_row).or(o));
            }
        }
        Err(ApiError::Unavailable)
    }

    async fn remove_reference_rows(&self, r: &Reference) -> ApiResult<()> {
        self.store()
            .apply(vec![
                Mutation::delete(&BINARY_REFS, vec![r.id.as_str().into()]),
                Mutation::delete(
                    &BINARY_REFS_CONTEXT,
                    vec![r.context.as_str().into(), r.id.as_str().into()],
                ),
                Mutation::delete(
                    &BINARY_REFS_ORIGINAL,
                    vec![r.original_id.as_str().into(), r.id.as_str().into()],
                ),
                Mutation::delete(&LOGS, vec![r.id.as_str().into()]),
            ])
            .await?;
        Ok(())
    }

    /// Stores an uploaded body under a context. The body streams into chunks;
    /// identical content already stored is reused (the new chunks are dropped).
    pub async fn upload<S, E>(&self, context: &str, body: S) -> ApiResult<Registered>
    where
        S: Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        check_id("context", context)?;
        let id = random_id(22);
        let o = Original {
            id: id.clone(),
            status: Some(BinaryStatus::Processing),
            created: Some(self.now()),
            touched: Some(self.touch_token()),
            // The upload's lease: the collector leaves it alone meanwhile.
            next_attempt: Some(self.later(UPLOAD_LEASE)),
            ..Default::default()
        };
        self.store()
            .cas(Cas {
                row: o.to_row(),
                condition: Condition::NotExists,
                ttl: None,
            })
            .await?;
        let mut writer = ChunkWriter::new(self, &id);
        let mut body = std::pin::pin!(body);
        let mut failure: Option<ApiError> = None;
        while let Some(piece) = body.next().await {
            let piece = match piece {
                Ok(p) => p,
                Err(e) => {
                    failure = Some(ApiError::bad_input(format!("the upload broke off: {e}")));
                    break;
                }
            };
            match writer.push(&piece).await {
                Ok(()) => {}
                Err(WriteError::TooLarge) => {
                    failure = Some(ApiError::PayloadTooLarge(format!(
                        "the file is larger than {} bytes",
                        self.inner.config.max_bytes
                    )));
                    break;
                }
                Err(WriteError::NotAnImage) => {
                    failure = Some(ApiError::bad_input(NOT_AN_IMAGE));
                    break;
                }
                Err(WriteError::Store(e)) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let written = writer.parts;
        let received = match failure {
            None => match writer.finish().await {
                Ok(r) => Some(r),
                Err(WriteError::Store(e)) => {
                    failure = Some(e);
                    None
                }
                Err(WriteError::TooLarge | WriteError::NotAnImage) => None,
            },
            Some(_) => None,
        };
        let received = match (received, failure) {
            (Some(r), None) if r.size > 0 => r,
            (Some(r), None) => {
                self.drop_original(&id, r.parts).await;
                return Err(ApiError::bad_input("the file is empty"));
            }
            (_, failure) => {
                self.drop_original(&id, written + 1).await;
                return Err(failure.unwrap_or(ApiError::Internal));
            }
        };
        let Some(mime) = imaging::sniff(&received.head) else {
            self.drop_original(&id, received.parts).await;
            return Err(ApiError::bad_input(NOT_AN_IMAGE));
        };
        let reference = Reference {
            id: random_id(16),
            original_id: id.clone(),
            context: context.to_owned(),
            created: self.now(),
        };
        // Identical bytes stored before: reference those instead.
        if let Some(existing) = self.by_checksum(&received.checksum).await?
            && existing != id
        {
            let r = Reference {
                original_id: existing.clone(),
                ..reference.clone()
            };
            if let Some(o) = self.attach(&r).await? {
                self.drop_original(&id, received.parts).await;
                self.log(std::slice::from_ref(&r.id), &format!(
                    "uploaded {} bytes into context {context}; identical content was stored before and is reused",
                    received.size
                ))
                .await?;
                return Ok(Registered {
                    reference_id: r.id,
                    original_id: existing,
                    status: o.status.unwrap_or(BinaryStatus::Processing).as_str(),
                });
            }
        }
        self.store()
            .apply(vec![Mutation::upsert(
                Row::new(&ORIGINALS_CHECKSUM)
                    .set("checksum", &received.checksum)
                    .set("original_id", &id),
            )])
            .await?;
        // The reference first, while the upload's lease still keeps the
        // collector away; then the lease ends and the worker may scale it.
        let Some(o) = self.attach(&reference).await? else {
            return Err(ApiError::Unavailable);
        };
        let now = self.now();
        let stored = self
            .store()
            .cas(Cas {
                row: original_update(&id)
                    .set("size", received.size as i64)
                    .set("parts", received.parts)
                    .set("checksum", &received.checksum)
                    .set("mime", mime)
                    .set("next_attempt", &now),
                condition: Condition::Equals(vec![(
                    "status",
                    Some(BinaryStatus::Processing.as_str().into()),
                )]),
                ttl: None,
            })
            .await?;
        if !stored.applied {
            return Err(ApiError::Unavailable);
        }
        self.store()
            .apply(vec![Mutation::upsert(pending_row(&id, &now))])
            .await?;
        self.log(
            std::slice::from_ref(&reference.id),
            &format!(
                "uploaded {} bytes ({mime}) into context {context}",
                received.size
            ),
        )
        .await?;
        self.inner.wake.notify_one();
        Ok(Registered {
            reference_id: reference.id,
            original_id: id,
            status: o.status.unwrap_or(BinaryStatus::Processing).as_str(),
        })
    }

    async fn by_checksum(&self, checksum: &str) -> ApiResult<Option<String>> {
        let Some(row) = self
            .store()
            .get(&ORIGINALS_CHECKSUM, &[checksum.into()])
            .await?
        else {
            return Ok(None);
        };
        let id = row.string("original_id");
        // Only content that is really there (or on its way) counts.
        match self.original(&id).await? {
            Some(o) if matches!(o.status, Some(BinaryStatus::Ok | BinaryStatus::Processing)) => {
                Ok(Some(id))
            }
            _ => Ok(None),
        }
    }

    /// Best-effort removal of an original nobody ever referenced (a failed
    /// upload); anything left over is the collector's.
    async fn drop_original(&self, id: &str, parts: i32) {
        let mut batch: Vec<Mutation> = (0..parts.max(0))
            .map(|p| Mutation::delete(&ORIGINALS_DATA, vec![id.into(), p.into()]))
            .collect();
        batch.push(Mutation::delete(&ORIGINALS, vec![id.into()]));
        for m in batch {
            if let Err(e) = self.store().apply(vec![m]).await {
                tracing::warn!(original_id = id, error = %e, "could not drop an unused original");
                return;
            }
        }
    }

    // ----- deleting -----

    pub async fn delete_reference(&self, id: &str) -> ApiResult<()> {
        let r = self
            .reference(id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("binary reference {id}")))?;
        self.remove_reference_rows(&r).await?;
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Deletes every reference of a context; returns how many.
    pub async fn delete_context(&self, context: &str) -> ApiResult<u64> {
        check_id("context", context)?;
        let mut n = 0;
        loop {
            let page = self.context_page(context, PAGE, None).await?;
            if page.rows.is_empty() {
                return Ok(n);
            }
            for row in &page.rows {
                let r = Reference {
                    id: row.string("reference_id"),
                    original_id: row.string("original_id"),
                    context: context.to_owned(),
                    created: String::new(),
                };
                self.remove_reference_rows(&r).await?;
                n += 1;
            }
        }
    }

    // ----- the worker -----

    /// Runs the background worker until the process ends: processes due
    /// originals whenever woken, and at least every `interval`; collects
    /// garbage every `gc_every`.
    pub fn spawn_worker(&self, interval: Duration, gc_every: Duration) {
        // The worker holds the service weakly: it ends when the service is dropped.
        let weak = Arc::downgrade(&self.inner);
        let wake = self.inner.wake.clone();
        tokio::spawn(async move {
            let mut last_gc = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(interval) => {}
                }
                let Some(inner) = weak.upgrade() else { break };
                let this = Binaries { inner };
                if let Err(e) = this.process_due().await {
                    tracing::warn!(error = e.message(), "binary worker: a pass failed");
                }
                if last_gc.elapsed() >= gc_every {
                    last_gc = tokio::time::Instant::now();
                    match this.collect_garbage().await {
                        Ok(r) if r.removed > 0 => {
                            tracing::info!(removed = r.removed, "collected unreferenced originals")
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = e.message(), "garbage collection failed"),
                    }
                }
            }
        });
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
            if self.inner.download_slots.available_permits() == 0
                && self.inner.scale_slots.available_permits() == 0
            {
                return Ok(started);
            }
            let page = merged_slice(
                self.store().as_ref(),
                &PENDING_ORIGINALS,
                &all_buckets(&[]),
                &Slice::partition(vec![]).limit(100).after(after),
            )
            .await?;
            for row in page.rows.iter().filter(|r| r.string("due") <= now) {
                let id = row.string("original_id");
                if self.in_flight(&id) {
                    continue;
                }
                let Some(o) = self.original(&id).await? else {
                    self.unqueue(&id).await?;
                    continue;
                };
                let slots = if o.parts.is_none() {
                    &self.inner.download_slots
                } else {
                    &self.inner.scale_slots
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
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

    /// Waits for one of the scaling slots.
    async fn scale_slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, FetchError> {
        self.inner
            .scale_slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| FetchError::Temporary("the worker is stopping".into()))
    }

    fn in_flight(&self, id: &str) -> bool {
        self.inner
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }

    /// Claims and processes one original, holding `slot` (a download slot when
    /// it must be fetched first, else a scaling slot); `false` if there was
    /// nothing to do.
    async fn process(
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
        // Claim: move next_attempt past the lease, if nobody else did.
        let claim = self
            .store()
            .cas(Cas {
                row: original_update(id).set("next_attempt", self.later(LEASE)),
                condition: Condition::Equals(vec![
                    ("status", Some(status.as_str().into())),
                    ("next_attempt", o.next_attempt.clone().map(Value::Text)),
                ]),
                ttl: None,
            })
            .await?;
        if !claim.applied {
            return Ok(false);
        }
        let outcome = self.work(&o, slot).await;
        self.settle(&o, status, outcome).await?;
        Ok(true)
    }

    async fn work(
        &self,
        o: &Original,
        mut slot: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Finished, FetchError> {
        let mut o = o.clone();
        let mut fetched: Option<Validators> = None;
        if o.parts.is_none() {
            let Some(url) = o.url.clone() else {
                return Err(FetchError::Permanent("the upload never finished".into()));
            };
            self.log_original(&o.id, &format!("downloading {url}"))
                .await;
            let (received, mime, validators) = self
                .download(&o.id, &url, &Validators::default())
                .await?
                .ok_or_else(|| FetchError::Temporary("unexpected 304".into()))?;
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
                self.move_references(&o.id, &other, &url)
                    .await
                    .map_err(|e| FetchError::Temporary(e.message()))?;
                return Err(FetchError::Permanent(format!(
                    "duplicate of original {other}"
                )));
            }
            o.size = Some(received.size as i64);
            o.parts = Some(received.parts);
            o.checksum = Some(received.checksum);
            o.mime = Some(sniffed.to_owned());
            fetched = Some(validators);
            self.log_original(
                &o.id,
                &format!("downloaded {} bytes ({sniffed})", received.size),
            )
            .await;
            // The download slot goes back before this waits to be scaled.
            drop(slot);
            slot = self.scale_slot().await?;
        }
        let bytes = self
            .read_all(&o)
            .await
            .map_err(|e| FetchError::Temporary(e.message()))?;
        let limits = self.inner.config.imaging;
        let cost = imaging::decode_cost(&bytes, 0).map_err(FetchError::Permanent)?;
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
                .map_err(|e| FetchError::Temporary(e.to_string()))?;
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
    async fn move_references(&self, from: &str, to: &str, url: &str) -> ApiResult<()> {
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

    /// Streams a URL into chunk rows of `id`. `None` when the server answered
    /// 304 to the validators.
    async fn download(
        &self,
        id: &str,
        url: &str,
        validators: &Validators,
    ) -> Result<Option<(Received, Option<String>, Validators)>, FetchError> {
        let (mut body, mime, validators) = match self.inner.fetcher.get(url, validators).await? {
            Fetched::Body {
                body,
                mime,
                validators,
            } => (body, mime, validators),
            Fetched::NotModified => return Ok(None),
        };
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
                        mime.as_deref().unwrap_or("nothing")
                    )));
                }
                Err(WriteError::Store(e)) => return Err(FetchError::Temporary(e.message())),
            }
        }
        match writer.finish().await {
            Ok(r) if r.size == 0 => Err(FetchError::Permanent("the server sent no bytes".into())),
            Ok(r) => Ok(Some((r, mime, validators))),
            Err(WriteError::TooLarge | WriteError::NotAnImage) => {
                Err(FetchError::Permanent("too large".into()))
            }
            Err(WriteError::Store(e)) => Err(FetchError::Temporary(e.message())),
        }
    }

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

    async fn recheck_one(&self, o: &Original) -> Result<bool, FetchError> {
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

    /// Records the outcome of a claimed piece of work.
    async fn settle(
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
                self.store()
                    .apply(vec![Mutation::upsert(pending_row(id, &due))])
                    .await?;
            }
        }
        Ok(())
    }

    async fn unqueue(&self, id: &str) -> ApiResult<()> {
        self.store()
            .apply(vec![Mutation::delete(
                &PENDING_ORIGINALS,
                vec![bucket_of(id).into(), id.into()],
            )])
            .await?;
        Ok(())
    }

    // ----- the collector -----

    /// Removes every original that no reference points to and that nobody
    /// touched within the grace period.
    pub async fn collect_garbage(&self) -> ApiResult<GcReport> {
        let mut report = GcReport::default();
        let mut after = None;
        loop {
            let page = self.store().scan(&ORIGINALS, after, 200).await?;
            for row in &page.rows {
                report.checked += 1;
                let o = Original::from_row(row);
                if self.collect(&o).await? {
                    report.removed += 1;
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(report),
            }
        }
    }

    async fn collect(&self, listed: &Original) -> ApiResult<bool> {
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
            .slice(
                &URLS_ORIGINAL,
                &Slice::partition(vec![id.into()]).limit(1_000),
            )
            .await?;
        let mut batch = Vec::new();
        for u in &urls.rows {
            let url = u.string("url");
            let mapped = self.store().get(&URLS, &[url.as_str().into()]).await?;
            if mapped.is_some_and(|m| m.text("original_id") == Some(id)) {
                batch.push(Mutation::delete(&URLS, vec![url.into()]));
            }
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

/// Why a IIIF image could not be made.
pub enum IiifFailure {
    Request(super::iiif::IiifError),
    Api(ApiError),
}

impl From<ApiError> for IiifFailure {
    fn from(e: ApiError) -> Self {
        IiifFailure::Api(e)
    }
}

struct Finished {
    original: Original,
    width: i32,
    height: i32,
    validators: Option<Validators>,
}

fn pending_row(id: &str, due: &str) -> Row {
    Row::new(&PENDING_ORIGINALS)
        .set("bucket", bucket_of(id))
        .set("original_id", id)
        .set("due", due)
}
