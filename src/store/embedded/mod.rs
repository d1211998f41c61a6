//! The embedded engine: every table lives in one redb B-tree under an
//! order-preserving key encoding (see `key.rs`). redb gives crash-safe,
//! serialisable write transactions; one writer thread groups concurrent
//! writes into one durable transaction (`writer.rs`), each batch and each
//! compare-and-set staying atomic and serialised inside it.
//!
//! A row's value is its expiry and its non-key columns (`codec.rs`); its key
//! columns are read back from its key.
//! Expired rows are invisible to reads; a sweeper deletes them using a second
//! tree ordered by expiry time.

use std::ops::Bound as RBound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

mod codec;
mod compact;
mod file;
mod merge;
mod range;
mod upgrade;

pub use compact::compact;
mod writer;

use super::key;
use super::{
    Cas, CasOutcome, Cursor, Mutation, Page, Row, Scan, Slice, Store, StoreError, Table, Value,
    check_key, check_slice, slice_fingerprint,
};
use writer::{Job, PreparedCas, PreparedInsert, Reply, Write, Writer};

pub use file::check_data_dir;
use file::*;
use range::*;

pub(super) const ROWS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rows");
/// The rows tree as a read transaction opens it.
type RowsTree = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;
/// Entries of the rows table in key order, from one read transaction.
type RowsRange<'t> = redb::Range<'t, &'static [u8], &'static [u8]>;
/// expires_at_ms (u64 BE) ++ row key -> nothing.
pub(super) const EXPIRY: TableDefinition<&[u8], ()> = TableDefinition::new("expiry");

/// The embedded store. Short reads (a page's worth of keys or rows) run on
/// the calling task's thread, longer ones on Tokio's blocking pool, each in
/// its own read transaction; every write goes through the group-commit
/// writer thread (`writer.rs`).
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: Arc<Db>,
    writer: Option<Writer>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Inner {
    /// Closes the writer and waits for its last commit, so the file is closed
    /// (and may be opened again) once the last handle is gone.
    fn drop(&mut self) {
        self.writer.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(super) fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

/// A redb error as the store reports it: a full disk is `Full`, an I/O error
/// (now or latched from before) `Unavailable`, anything else `Internal`.
pub(super) fn db_err(e: impl Into<redb::Error>) -> StoreError {
    let e: redb::Error = e.into();
    match &e {
        redb::Error::Io(io) if is_full(io) => StoreError::Full(format!(
            "the embedded store's disk is full ({io}); free space and retry"
        )),
        redb::Error::Io(io) => StoreError::Unavailable(format!("embedded store I/O error: {io}")),
        redb::Error::PreviousIo | redb::Error::DatabaseClosed => StoreError::Unavailable(
            "the embedded store is recovering from an I/O error, try again".into(),
        ),
        _ => StoreError::Internal(e.to_string()),
    }
}

/// ENOSPC, EDQUOT or EFBIG: the file cannot grow.
pub(super) fn is_full(io: &std::io::Error) -> bool {
    io.kind() == std::io::ErrorKind::StorageFull
        || io.kind() == std::io::ErrorKind::QuotaExceeded
        || io.kind() == std::io::ErrorKind::FileTooLarge
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The most keys or rows a read may ask for to run on the calling thread
/// (see `EmbeddedStore::short`); larger reads, and every read of a table
/// with a blob column (a row may be a MiB chunk), go to the blocking pool.
const SHORT_READ: usize = 2_000;

/// The embedded store's default page cache (`--cache-bytes`).
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

impl EmbeddedStore {
    /// Opens (or creates) the store in `dir`, and starts the expiry sweeper
    /// when called inside a Tokio runtime.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        Self::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// Opens the store with a page cache of `cache_bytes`.
    pub fn open_with_cache(dir: &Path, cache_bytes: usize) -> anyhow::Result<Self> {
        Self::open_with(dir, cache_bytes, true)
    }

    /// Opens the store; `group_commit` false makes every write its own durable
    /// transaction, as before group commit (the benchmarks' reference).
    pub fn open_with(dir: &Path, cache_bytes: usize, group_commit: bool) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let db = Arc::new(Db::open(dir.join("kartei.redb"), cache_bytes)?);
        let (writer, thread) = Writer::start(db.clone(), group_commit)?;
        let store = EmbeddedStore {
            inner: Arc::new(Inner {
                db,
                writer: Some(writer),
                thread: Some(thread),
            }),
        };
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&store.inner);
            handle.spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    let Some(inner) = weak.upgrade() else { break };
                    let s = EmbeddedStore { inner };
                    if let Err(e) = s.write(Job::Sweep).await {
                        tracing::warn!(error = %e, "expiry sweep failed");
                    }
                }
            });
        }
        Ok(store)
    }

    /// Runs a read on the blocking pool. A read that meets a latched I/O
    /// error (see [`Db`]) reopens the store and runs once more.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl Fn(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let slot = self.inner.db.clone();
        tokio::task::spawn_blocking(move || {
            let db = slot.get()?;
            match f(&db) {
                Err(StoreError::Unavailable(_)) => {
                    let failed = Db::id(&db);
                    drop(db);
                    f(&*slot.recover(Some(failed))?)
                }
                other => other,
            }
        })
        .await
        .map_err(internal)?
    }

    /// Runs a short read on the calling thread: a read of at most
    /// [`SHORT_READ`] keys or rows from redb's page cache (or the OS's) takes
    /// microseconds, less than the hop to the blocking pool and back, which
    /// cost the curator page a fifth of its CPU in the scheduler. A read that
    /// meets an I/O error, or a store being reopened, goes the long way
    /// ([`Self::blocking`]), which waits for the reopen off the runtime.
    async fn short<T: Send + 'static>(
        &self,
        f: impl Fn(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        if let Some(db) = self.inner.db.current() {
            match f(&db) {
                Err(StoreError::Unavailable(_)) => {}
                done => return done,
            }
        }
        self.blocking(f).await
    }

    /// Runs `f` over the rows tree in one read transaction: on this thread
    /// ([`Self::short`]) when it reads at most [`SHORT_READ`] keys or rows
    /// (`size`) of a table without blobs, else on the blocking pool.
    async fn read<T: Send + 'static>(
        &self,
        table: &'static Table,
        size: usize,
        f: impl Fn(&RowsTree, u64) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let run = move |db: &Database| {
            let txn = db.begin_read().map_err(db_err)?;
            let rows = txn.open_table(ROWS).map_err(db_err)?;
            f(&rows, now_ms())
        };
        if size <= SHORT_READ && !table.has_blobs() {
            self.short(run).await
        } else {
            self.blocking(run).await
        }
    }

    async fn write(&self, job: Job) -> Result<Reply, StoreError> {
        match &self.inner.writer {
            Some(w) => w.send(job).await,
            None => Err(StoreError::Unavailable(
                "the embedded store is closed".into(),
            )),
        }
    }

    /// A compare-and-set, with the writes that go with it when it applies.
    async fn cas_job(&self, cas: Cas, then: Option<super::Heal>) -> Result<CasOutcome, StoreError> {
        self.cas_job_after(Vec::new(), cas, then).await
    }

    /// A compare-and-set after `before` (written whatever it decides), with
    /// the writes that go with it when it applies, in one transaction.
    async fn cas_job_after(
        &self,
        before: Vec<Write>,
        cas: Cas,
        then: Option<super::Heal>,
    ) -> Result<CasOutcome, StoreError> {
        cas.validate()?;
        let key = key::encode(cas.row.table, &cas.row.key()?)?;
        if before.iter().any(|w| w.touches(&key)) {
            return Err(StoreError::Internal(
                "a bulk written before a compare-and-set writes its row".into(),
            ));
        }
        match self
            .write(Job::Cas(PreparedCas {
                before,
                key,
                row: cas.row,
                condition: cas.condition,
                ttl: cas.ttl,
                then,
            }))
            .await?
        {
            Reply::Cas(outcome) => Ok(outcome),
            _ => Err(StoreError::Internal("unexpected writer reply".into())),
        }
    }

    /// Deletes rows whose TTL has passed (at most 50,000 per call). Returns
    /// how many were removed. Blocks: call it outside async code.
    pub fn sweep_expired(&self) -> Result<usize, StoreError> {
        let Some(w) = &self.inner.writer else {
            return Err(StoreError::Unavailable(
                "the embedded store is closed".into(),
            ));
        };
        match w.send_blocking(Job::Sweep)? {
            Reply::Swept(n) => Ok(n),
            _ => Err(StoreError::Internal("unexpected writer reply".into())),
        }
    }
}

/// A mutation as the writer thread applies it: keys and value encoded here, in
/// the caller's task.
fn prepare(m: &Mutation, now: u64) -> Result<Write, StoreError> {
    m.validate()?;
    Ok(match m {
        Mutation::Upsert { row, ttl } => {
            let expires = ttl.map(|t| now + u64::from(t) * 1000).unwrap_or(0);
            Write::Put {
                key: key::encode(row.table, &row.key()?)?,
                value: codec::encode(row, expires),
                expires,
            }
        }
        Mutation::Delete { table, key: k } => {
            let prefix = key::encode(table, k)?;
            if k.len() == table.key_len() {
                Write::Remove { key: prefix }
            } else {
                Write::RemovePrefix { prefix }
            }
        }
        Mutation::Add {
            table,
            key: k,
            column,
            by,
        } => Write::Add {
            table,
            values: k.clone(),
            key: key::encode(table, k)?,
            column,
            by: *by,
        },
    })
}

/// Every mutation of `batch` prepared, or the first that does not validate.
fn prepare_all(batch: &[Mutation], now: u64) -> Result<Vec<Write>, StoreError> {
    batch.iter().map(|m| prepare(m, now)).collect()
}

pub(super) fn expired(value: &[u8], now: u64) -> bool {
    let at = codec::expires_at(value);
    at != 0 && at <= now
}

fn decode_row(table: &'static Table, key: &[u8], value: &[u8]) -> Result<Row, StoreError> {
    codec::decode(table, key, value)
}

pub(super) fn read_live<T: ReadableTable<&'static [u8], &'static [u8]>>(
    rows: &T,
    table: &'static Table,
    k: &[u8],
    now: u64,
) -> Result<Option<Row>, StoreError> {
    match rows.get(k).map_err(db_err)? {
        Some(v) if !expired(v.value(), now) => Ok(Some(decode_row(table, k, v.value())?)),
        _ => Ok(None),
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    fn engine(&self) -> &'static str {
        "embedded"
    }

    async fn get(&self, table: &'static Table, k: &[Value]) -> Result<Option<Row>, StoreError> {
        check_key(table, k, true)?;
        let k = key::encode(table, k)?;
        self.read(table, 1, move |rows, now| read_live(rows, table, &k, now))
            .await
    }

    async fn get_many(
        &self,
        table: &'static Table,
        keys: &[Vec<Value>],
    ) -> Result<Vec<Option<Row>>, StoreError> {
        let encoded = keys
            .iter()
            .map(|k| {
                check_key(table, k, true)?;
                key::encode(table, k)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.read(table, encoded.len(), move |rows, now| {
            encoded
                .iter()
                .map(|k| read_live(rows, table, k, now))
                .collect()
        })
        .await
    }

    async fn slice(&self, table: &'static Table, s: &Slice) -> Result<Page, StoreError> {
        let mut pages = self.slice_many(table, std::slice::from_ref(s)).await?;
        pages
            .pop()
            .ok_or_else(|| StoreError::Internal("a slice read no page".into()))
    }

    /// All slices in one read transaction: a merged read of 32 buckets is one
    /// read, on this thread when the slices' limits add up to a short read,
    /// else one hop to the blocking pool, not 32.
    async fn slice_many(
        &self,
        table: &'static Table,
        slices: &[Slice],
    ) -> Result<Vec<Page>, StoreError> {
        let ranges = slices
            .iter()
            .map(|s| SliceRange::of(table, s))
            .collect::<Result<Vec<_>, _>>()?;
        let fingerprints: Vec<u64> = ranges.iter().map(|r| r.fp).collect();
        let rows = slices
            .iter()
            .fold(0usize, |n, s| n.saturating_add(s.limit.saturating_add(1)));
        let read = self
            .read(table, rows, move |tree, now| {
                ranges
                    .iter()
                    .map(|r| r.read(tree, table, now))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await?;
        slices
            .iter()
            .zip(fingerprints)
            .zip(read)
            .map(|((s, fp), rows)| page(fp, rows, s.limit))
            .collect()
    }

    async fn merged_slice(
        &self,
        table: &'static Table,
        partitions: &[Vec<Value>],
        template: &Slice,
    ) -> Result<Page, StoreError> {
        self.merged(table, partitions, template).await
    }

    fn merges_natively(&self) -> bool {
        true
    }

    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        let now = now_ms();
        let writes = prepare_all(&batch, now)?;
        self.write(Job::Apply(writes)).await.map(|_| ())
    }

    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        self.cas_job(cas, None).await
    }

    async fn cas_then(&self, cas: Cas, then: super::Heal) -> Result<CasOutcome, StoreError> {
        self.cas_job(cas, Some(then)).await
    }

    async fn write_bulk_then_cas(
        &self,
        bulk: Vec<Mutation>,
        cas: Cas,
        then: super::Heal,
    ) -> Result<CasOutcome, super::BulkThenCasError> {
        // One transaction: when it fails, nothing of it is stored.
        let nothing_stored = |error| super::BulkThenCasError {
            error,
            bulk_stored: false,
        };
        let before = prepare_all(&bulk, now_ms()).map_err(nothing_stored)?;
        self.cas_job_after(before, cas, Some(then))
            .await
            .map_err(nothing_stored)
    }

    async fn insert_new(
        &self,
        inserts: Vec<(Row, Vec<Mutation>)>,
        heal: super::Heal,
    ) -> Result<Vec<Option<Row>>, StoreError> {
        let now = now_ms();
        let prepared = inserts
            .iter()
            .map(|(row, with)| {
                row.validate()?;
                let put = prepare(&Mutation::upsert(row.clone()), now)?;
                let Write::Put { key, .. } = &put else {
                    unreachable!("an upsert prepares a put")
                };
                let key = key.clone();
                let mut writes = vec![put];
                for m in with {
                    writes.push(prepare(m, now)?);
                }
                Ok(PreparedInsert {
                    key,
                    row: row.clone(),
                    writes,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        match self.write(Job::InsertNew(prepared, heal)).await? {
            Reply::Inserted(found) => Ok(found),
            _ => Err(StoreError::Internal("unexpected writer reply".into())),
        }
    }

    async fn scan(&self, table: &'static Table, scan: Scan) -> Result<Page, StoreError> {
        let Scan { after, limit } = scan;
        let fp = super::fnv1a(table.qualified().as_bytes());
        let start = match &after {
            Some(c) => Some(key::encode(table, &c.key(table, fp, 0, table.key_len())?)?),
            None => None,
        };
        let prefix = key::table_prefix(table);
        let rows = self
            .blocking(move |db| {
                let txn = db.begin_read().map_err(db_err)?;
                let rows = txn.open_table(ROWS).map_err(db_err)?;
                let now = now_ms();
                let end = key::successor(&prefix);
                let lo = match &start {
                    Some(s) => RBound::Excluded(s.as_slice()),
                    None => RBound::Included(prefix.as_slice()),
                };
                let hi = match &end {
                    Some(e) => RBound::Excluded(e.as_slice()),
                    None => RBound::Unbounded,
                };
                let mut out = Vec::new();
                for e in rows.range::<&[u8]>((lo, hi)).map_err(db_err)? {
                    let (k, v) = e.map_err(db_err)?;
                    if !expired(v.value(), now) {
                        out.push(decode_row(table, k.value(), v.value())?);
                        if out.len() > limit {
                            break;
                        }
                    }
                }
                Ok(out)
            })
            .await?;
        let mut rows = rows;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            let last = rows.last().map(Row::key).transpose()?.unwrap_or_default();
            Some(Cursor::after(fp, last))
        } else {
            None
        };
        Ok(Page {
            rows,
            next,
            cursors: Vec::new(),
        })
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.blocking(|db| db.begin_read().map(|_| ()).map_err(db_err))
            .await
    }
}

/// One item of a range over the rows table.
type RangeEntry<'a> = Result<
    (
        redb::AccessGuard<'a, &'static [u8]>,
        redb::AccessGuard<'a, &'static [u8]>,
    ),
    redb::StorageError,
>;

/// Cuts `limit + 1` fetched rows to a page with a cursor when a row was left over.
pub(crate) fn page(fp: u64, mut rows: Vec<Row>, limit: usize) -> Result<Page, StoreError> {
    let more = rows.len() > limit;
    rows.truncate(limit);
    Page::of_slice(fp, rows, more)
}
