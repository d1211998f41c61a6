//! The storage seam: one small table API that every domain talks to, with two
//! engines behind it (an embedded ordered key-value store and Cassandra/ScyllaDB).
//!
//! Tables are declared once, as `static` [`Table`] values next to the domain that
//! owns them. The CQL engine derives its statements from a declaration; the
//! embedded engine derives an order-preserving key encoding from it. Neither
//! engine knows anything about the domain.

pub mod buckets;
mod counted;
pub mod cql;
mod cursor;
pub mod embedded;
mod key;
mod mutation;
mod paging;
mod record;
mod table;

pub use counted::Counted;
pub use cursor::{Cursor, fnv1a_hex, fnv1a_hex_bytes};
#[cfg(test)]
pub(crate) use cursor::{decode_cursor, encode_cursor};
pub(crate) use cursor::{fnv1a, slice_fingerprint};
pub use mutation::Mutation;
pub use paging::{Contention, pages, table_pages};

/// The id that begins the embedded engine's keys of `table` (see `key.rs`).
pub fn table_id(table: &Table) -> [u8; 4] {
    key::table_id(table.keyspace.prefix(), table.name)
}
pub use record::{Cell, Positions, Scalar};
pub(crate) use record::{record, text_cell};
pub(crate) use table::table;
pub use table::{Column, ColumnType, Keyspace, Order, Row, Table, Value, col};
pub(crate) use table::{check_key, check_types};

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Builder methods that set one field each and hand the value back.
macro_rules! setters {
    ($($field:ident: $ty:ty),* $(,)?) => {$(
        pub fn $field(mut self, $field: $ty) -> Self {
            self.$field = $field;
            self
        }
    )*};
}

/// A bound on the first clustering column after the slice's prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Bound {
    Inclusive(Value),
    Exclusive(Value),
}

/// A read of one partition: rows whose clustering key starts with `prefix`,
/// optionally bounded on the next clustering column, in clustering order
/// (or reversed), at most `limit` rows, continuing after `after`.
#[derive(Clone, Debug, Default)]
pub struct Slice {
    pub partition: Vec<Value>,
    pub prefix: Vec<Value>,
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
    pub reverse: bool,
    pub limit: usize,
    pub after: Option<Cursor>,
}

impl Slice {
    pub fn partition(partition: Vec<Value>) -> Self {
        Slice {
            partition,
            limit: 100,
            ..Default::default()
        }
    }
    setters!(prefix: Vec<Value>, limit: usize, after: Option<Cursor>, reverse: bool);
    pub fn lower(mut self, b: Bound) -> Self {
        self.lower = Some(b);
        self
    }
    pub fn upper(mut self, b: Bound) -> Self {
        self.upper = Some(b);
        self
    }
}

/// A read of a whole table: at most `limit` rows, continuing after `after`.
#[derive(Clone, Debug)]
pub struct Scan {
    pub after: Option<Cursor>,
    pub limit: usize,
}

/// A page of rows and, when more may follow, the cursor to continue from.
#[derive(Clone, Debug)]
pub struct Page {
    pub rows: Vec<Row>,
    /// The cursor to continue from if more rows may follow.
    pub next: Option<Cursor>,
    /// For slices, one cursor per row (continuing after that row); empty for scans.
    pub cursors: Vec<Cursor>,
}

impl Page {
    /// A slice page: one cursor per row (its clustering key under the query's
    /// fingerprint `fp`), and `next` when `more` rows follow.
    pub(crate) fn of_slice(fp: u64, rows: Vec<Row>, more: bool) -> Result<Page, StoreError> {
        let cursors = rows
            .iter()
            .map(|r| Ok(Cursor::after(fp, r.clustering_key()?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let next = if more { cursors.last().cloned() } else { None };
        Ok(Page {
            rows,
            next,
            cursors,
        })
    }
}

/// A page as a domain returns it: typed items, each with the cursor that
/// continues after it, and whether more follow.
#[derive(Clone, Debug)]
pub struct Listed<T> {
    pub items: Vec<(Cursor, T)>,
    pub has_next: bool,
}

impl<T> Listed<T> {
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> Listed<U> {
        self.filter_map(|t| Some(f(t)))
    }

    /// Keeps the items `f` turns into something (and their cursors).
    pub fn filter_map<U>(self, mut f: impl FnMut(T) -> Option<U>) -> Listed<U> {
        Listed {
            items: self
                .items
                .into_iter()
                .filter_map(|(c, t)| Some((c, f(t)?)))
                .collect(),
            has_next: self.has_next,
        }
    }
}

impl Page {
    /// The slice page typed: `item` reads each row (rows it cannot read are
    /// left out, their cursors with them).
    pub fn listed<T>(self, mut item: impl FnMut(Row) -> Option<T>) -> Listed<T> {
        let has_next = self.next.is_some();
        Listed {
            items: self
                .cursors
                .into_iter()
                .zip(self.rows)
                .filter_map(|(c, r)| Some((c, item(r)?)))
                .collect(),
            has_next,
        }
    }
}

/// What [`Store::insert_new`] writes for a row it finds (e.g. the query rows
/// that row should have).
pub type Heal = Arc<dyn Fn(&Row) -> Vec<Mutation> + Send + Sync>;

/// Why [`Store::write_bulk_then_cas`] failed: in the bulk (`bulk_stored`
/// false: none of it, or on Cassandra not all of it, is known stored; on the
/// embedded store nothing is), or in the compare-and-set after the bulk was
/// stored (on Cassandra a timed-out compare-and-set may still have applied).
#[derive(Debug)]
pub struct BulkThenCasError {
    pub error: StoreError,
    pub bulk_stored: bool,
}

/// The condition of a compare-and-set.
#[derive(Clone, Debug)]
pub enum Condition {
    /// The row must not exist; the write inserts the whole row.
    NotExists,
    /// The row's columns must have these values (as in CQL, a missing row has only
    /// nulls, so `(c, None)` conditions apply to it); the write updates the given columns.
    Equals(Vec<(&'static str, Option<Value>)>),
    /// As `Equals`, but the write replaces every non-key column, a `None` one
    /// with null: a conditional upsert of the whole row.
    Replaces(Vec<(&'static str, Option<Value>)>),
}

/// A compare-and-set (lightweight transaction) on one row.
#[derive(Clone, Debug)]
pub struct Cas {
    /// For `NotExists`: the row to insert. For `Equals`: the key plus the columns to set
    /// (every non-key column that is `Some` is written; `None` columns are left as they are).
    /// For `Replaces`: the row as it is to be.
    pub row: Row,
    pub condition: Condition,
    pub ttl: Option<u32>,
}

impl Cas {
    /// What both engines refuse alike: a TTL of 0, a row that does not type
    /// check, a conditional update that sets nothing or has a TTL, and a
    /// condition on a key column or on a column the table does not have.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.ttl == Some(0) {
            return Err(StoreError::Invalid("a TTL must be positive".into()));
        }
        self.row.validate()?;
        let table = self.row.table;
        if let Condition::Equals(expected) | Condition::Replaces(expected) = &self.condition {
            // Cassandra gives an update's TTL to the cells it sets, the
            // embedded engine to the row: refused rather than different.
            if self.ttl.is_some() {
                return Err(StoreError::Invalid(
                    "a conditional update cannot set a TTL".into(),
                ));
            }
            if matches!(self.condition, Condition::Equals(_))
                && self.row.values[table.key_len()..]
                    .iter()
                    .all(Option::is_none)
            {
                return Err(StoreError::Invalid(
                    "a conditional update must set a column".into(),
                ));
            }
            for (name, _) in expected {
                if table.index_of(name).is_none_or(|i| i < table.key_len()) {
                    return Err(StoreError::Invalid(format!(
                        "{}: cannot condition on {name}",
                        table.name
                    )));
                }
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct CasOutcome {
    pub applied: bool,
    /// The row as it is after the operation (when applied) or as it was found (when not).
    pub current: Option<Row>,
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the cursor is not valid for this query")]
    BadCursor,
    #[error("invalid store request: {0}")]
    Invalid(String),
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The disk under the store is full: writes fail until space is freed.
    #[error("{0}")]
    Full(String),
    #[error("store failure: {0}")]
    Internal(String),
    /// The embedded store's file is open in another process (one process
    /// at a time: a server hands batch jobs over instead, `app::control`).
    #[error("the store file {0} is open in another kartei process")]
    InUse(String),
}

/// The table API every domain talks to (ARCHITECTURE.md, "How a request flows").
#[async_trait]
pub trait Store: Send + Sync {
    /// Which engine this is ("embedded" or "cql").
    fn engine(&self) -> &'static str;
    /// One row by its full primary key.
    async fn get(&self, table: &'static Table, key: &[Value]) -> Result<Option<Row>, StoreError>;
    /// Many rows by full primary keys, in the order of `keys`, as concurrent single-partition reads.
    async fn get_many(
        &self,
        table: &'static Table,
        keys: &[Vec<Value>],
    ) -> Result<Vec<Option<Row>>, StoreError>;
    /// A slice of one partition.
    async fn slice(&self, table: &'static Table, slice: &Slice) -> Result<Page, StoreError>;
    /// The first `limit` rows of a partition with a one-column key, in one
    /// slice (for partitions that stay small: a registry, a lookup table).
    async fn partition_rows(
        &self,
        table: &'static Table,
        partition: Value,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        let slice = Slice::partition(vec![partition]).limit(limit);
        Ok(self.slice(table, &slice).await?.rows)
    }
    /// Slices of many partitions, in the order given, as concurrent
    /// single-partition reads (one round-trip wave; no `IN` over partition keys).
    async fn slice_many(
        &self,
        table: &'static Table,
        slices: &[Slice],
    ) -> Result<Vec<Page>, StoreError> {
        futures::future::try_join_all(slices.iter().map(|s| self.slice(table, s))).await
    }
    /// Reads `template` from every partition in `partitions` (the buckets of
    /// one logical partition, see [`buckets`]) and merges the rows in
    /// clustering order behind one merged cursor. By default the buckets are
    /// read in rounds through `slice_many` ([`buckets::merged_slice`]); an
    /// engine that can walk them all at once in key order overrides this and
    /// says so in [`Store::merges_natively`].
    async fn merged_slice(
        &self,
        table: &'static Table,
        partitions: &[Vec<Value>],
        template: &Slice,
    ) -> Result<Page, StoreError> {
        buckets::merged_slice(self, table, partitions, template).await
    }
    /// Whether [`Store::merged_slice`] is the engine's own (one call), not
    /// rounds of `slice_many` (so a wrapper counts it as what it is).
    fn merges_natively(&self) -> bool {
        false
    }
    /// Writes that need not be atomic together (rows of a dataset nobody reads
    /// yet, deletes of one nobody reads any more): on Cassandra unlogged
    /// batches of one partition each, many in flight; on the embedded store
    /// one transaction. Each partition's writes are atomic; the whole is not.
    async fn write_bulk(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        self.apply(batch).await
    }
    /// `write_bulk(bulk)`, then `cas_then(cas, then)`: rows a status needs,
    /// then the status (an original's derivatives before its OK). The bulk
    /// is written whether the compare-and-set applies or not, as when the
    /// two are called one after the other. On the embedded engine all of it
    /// is one transaction (one durable commit instead of two); on Cassandra
    /// it is the two calls, in that order. `bulk` may not write the
    /// compare-and-set's row. An error says which part failed.
    async fn write_bulk_then_cas(
        &self,
        bulk: Vec<Mutation>,
        cas: Cas,
        then: Heal,
    ) -> Result<CasOutcome, BulkThenCasError> {
        self.write_bulk(bulk)
            .await
            .map_err(|error| BulkThenCasError {
                error,
                bulk_stored: false,
            })?;
        self.cas_then(cas, then)
            .await
            .map_err(|error| BulkThenCasError {
                error,
                bulk_stored: true,
            })
    }
    /// An atomic batch of writes: all apply or none.
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError>;
    /// A serialisable compare-and-set on one row.
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError>;
    /// A compare-and-set and, when it applies, the writes `then` makes from
    /// the row as written (e.g. its query-table rows). On the embedded engine
    /// both are one transaction: a crash or a full disk leaves all or nothing.
    /// On Cassandra the writes follow the compare-and-set, so a process that
    /// dies between them leaves them out: callers heal them on the next touch
    /// of the row, and `repair-views` finds the rest.
    ///
    /// Once the compare-and-set has applied, its outcome is what the caller
    /// is told: the follow-up writes (idempotent upserts) are tried twice, and if they still fail (a cluster that times writes out) the
    /// row stands and they are left to that healing, with a warning.
    async fn cas_then(&self, cas: Cas, then: Heal) -> Result<CasOutcome, StoreError> {
        let written = matches!(cas.condition, Condition::NotExists).then(|| cas.row.clone());
        let outcome = self.cas(cas).await?;
        if outcome.applied
            && let Some(row) = outcome.current.as_ref().or(written.as_ref())
        {
            let writes = then(row);
            for attempt in 1..=2u64 {
                match self.apply(writes.clone()).await {
                    Ok(()) => break,
                    Err(StoreError::Unavailable(e)) if attempt < 2 => {
                        tracing::info!(
                            error = e,
                            "the writes after a compare-and-set failed; again"
                        );
                        tokio::time::sleep(std::time::Duration::from_millis(50 * attempt)).await;
                    }
                    Err(StoreError::Unavailable(e)) => {
                        tracing::warn!(
                            error = e,
                            table = row.table.name,
                            "a compare-and-set applied but the writes after it failed; they are healed on the row's next change (repair-views finds the rest)"
                        );
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(outcome)
    }
    /// Bulk insertion for importers: each row (all of one table) is written,
    /// with the mutations that go with it, unless its key holds a row already;
    /// for a row found, the mutations `heal` makes from it are written
    /// instead (as of the moment it was read: a later write to them wins).
    /// Returns, per row, `None` when it was inserted, else the row found.
    ///
    /// Never overwrites: on the embedded engine each row is a compare-and-set
    /// inside the writer's serialised transaction; on Cassandra the rows are
    /// read first and the absent ones written with the read's timestamp, so
    /// any write made after the read wins (cql/README.md, "Bulk writes").
    /// Per row, the row and its mutations are atomic on the embedded engine; on
    /// Cassandra the rows are written before their mutations, so a process
    /// that dies mid-call may leave rows without (some of) their mutations,
    /// never mutations without their row: callers treat a row found as
    /// "maybe without its mutations" and heal.
    async fn insert_new(
        &self,
        inserts: Vec<(Row, Vec<Mutation>)>,
        heal: Heal,
    ) -> Result<Vec<Option<Row>>, StoreError> {
        let mut out = Vec::with_capacity(inserts.len());
        for (row, with) in inserts {
            let outcome = self
                .cas(Cas {
                    row: row.clone(),
                    condition: Condition::NotExists,
                    ttl: None,
                })
                .await?;
            if outcome.applied {
                self.apply(with).await?;
                out.push(None);
            } else {
                let current = outcome.current.unwrap_or(row);
                self.apply(heal(&current)).await?;
                out.push(Some(current));
            }
        }
        Ok(out)
    }
    /// A whole table, page by page (maintenance jobs only).
    async fn scan(&self, table: &'static Table, scan: Scan) -> Result<Page, StoreError>;
    /// Does the store answer?
    async fn ping(&self) -> Result<(), StoreError>;
    /// Round trips made through this store so far (see [`Counted`]).
    fn round_trips(&self) -> u64 {
        0
    }
    /// Rows read through this store so far (see [`Counted`]).
    fn rows_read(&self) -> u64 {
        0
    }
}

pub type DynStore = Arc<dyn Store>;

pub(crate) fn check_slice(table: &'static Table, slice: &Slice) -> Result<(), StoreError> {
    let pk = table.partition_key.len();
    if slice.partition.len() != pk {
        return Err(StoreError::Invalid(format!(
            "{}: partition key needs {pk} values",
            table.name
        )));
    }
    if slice.prefix.len() > table.clustering.len()
        || ((slice.lower.is_some() || slice.upper.is_some())
            && slice.prefix.len() >= table.clustering.len())
    {
        return Err(StoreError::Invalid(format!(
            "{}: clustering prefix too long",
            table.name
        )));
    }
    check_types(table, 0, slice.partition.iter().map(Some))?;
    check_types(table, pk, slice.prefix.iter().map(Some))?;
    let bound_col = pk + slice.prefix.len();
    for b in [&slice.lower, &slice.upper].into_iter().flatten() {
        let (Bound::Inclusive(v) | Bound::Exclusive(v)) = b;
        check_types(table, bound_col, std::iter::once(Some(v)))?;
    }
    if slice.limit == 0 {
        return Err(StoreError::Invalid("a slice limit must be positive".into()));
    }
    Ok(())
}

/// Where the store lives: an embedded directory, or cluster contact points.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub data_dir: std::path::PathBuf,
    pub cache_bytes: usize,
    pub cassandra: Option<Vec<String>>,
    pub env: String,
    pub replication: String,
}

/// Opens the store the configuration asks for; a cluster's `ping` reads
/// `probe` (one of the application's tables).
pub async fn open(config: &StoreConfig, probe: &'static Table) -> anyhow::Result<DynStore> {
    match &config.cassandra {
        Some(nodes) => {
            let engine = cql::CqlStore::connect(nodes, &config.env, config.replication.clone())
                .await?
                .probing(probe);
            Ok(Arc::new(Counted::new(engine)))
        }
        None => {
            let engine =
                embedded::EmbeddedStore::open_with_cache(&config.data_dir, config.cache_bytes)?;
            Ok(Arc::new(Counted::new(engine)))
        }
    }
}

#[cfg(test)]
mod tests;

/// A store failure as the client sees it: its text is logged, never shown.
impl From<StoreError> for crate::kernel::error::ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::BadCursor => crate::kernel::error::ApiError::BadCursor,
            StoreError::Unavailable(msg) | StoreError::InUse(msg) => {
                tracing::error!(error = %msg, "store unavailable");
                crate::kernel::error::ApiError::Unavailable
            }
            StoreError::Full(msg) => {
                tracing::error!(error = %msg, "store full");
                crate::kernel::error::ApiError::StorageFull
            }
            StoreError::Invalid(msg) | StoreError::Internal(msg) => {
                tracing::error!(error = %msg, "store error");
                crate::kernel::error::ApiError::Internal
            }
        }
    }
}
