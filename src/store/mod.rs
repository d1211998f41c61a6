//! The storage seam: one small table API that every domain talks to, with two
//! engines behind it (an embedded ordered key-value store and Cassandra/ScyllaDB).
//!
//! Tables are declared once, as `static` [`Table`] values next to the domain that
//! owns them. The CQL engine derives its statements from a declaration; the
//! embedded engine derives an order-preserving key encoding from it. Neither
//! engine knows anything about the domain.

pub mod buckets;
pub mod cql;
pub mod embedded;
mod key;

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::metrics;

/// The keyspace families of DESIGN.md; the cluster name is `<family>_<env>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keyspace {
    Themes,
    Target,
    Binaries,
    Suggestions,
    Crawl,
}

impl Keyspace {
    pub fn prefix(self) -> &'static str {
        match self {
            Keyspace::Themes => "themes",
            Keyspace::Target => "target",
            Keyspace::Binaries => "binaries",
            Keyspace::Suggestions => "suggestions",
            Keyspace::Crawl => "crawl",
        }
    }
}

/// Column types the seam supports (a deliberately small subset of CQL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    Int,
    BigInt,
    Double,
    Boolean,
    Blob,
    TextList,
}

impl ColumnType {
    pub fn cql(self) -> &'static str {
        match self {
            ColumnType::Text => "text",
            ColumnType::Int => "int",
            ColumnType::BigInt => "bigint",
            ColumnType::Double => "double",
            ColumnType::Boolean => "boolean",
            ColumnType::Blob => "blob",
            ColumnType::TextList => "list<text>",
        }
    }
}

#[derive(Debug)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
}

pub const fn col(name: &'static str, ty: ColumnType) -> Column {
    Column { name, ty }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// One table, declared once. Row values are always laid out in this order:
/// partition key columns, clustering columns, then the other columns.
#[derive(Debug)]
pub struct Table {
    pub keyspace: Keyspace,
    pub name: &'static str,
    pub partition_key: &'static [Column],
    pub clustering: &'static [(Column, Order)],
    pub columns: &'static [Column],
}

impl Table {
    pub fn key_len(&self) -> usize {
        self.partition_key.len() + self.clustering.len()
    }

    pub fn width(&self) -> usize {
        self.key_len() + self.columns.len()
    }

    /// Every column in row order.
    pub fn all_columns(&self) -> impl Iterator<Item = &'static Column> + use<> {
        let t: &'static [Column] = self.partition_key;
        let c: &'static [(Column, Order)] = self.clustering;
        let r: &'static [Column] = self.columns;
        t.iter().chain(c.iter().map(|(c, _)| c)).chain(r.iter())
    }

    pub fn column(&self, i: usize) -> &'static Column {
        let pk: &'static [Column] = self.partition_key;
        let ck: &'static [(Column, Order)] = self.clustering;
        let rc: &'static [Column] = self.columns;
        if i < pk.len() {
            &pk[i]
        } else if i < pk.len() + ck.len() {
            &ck[i - pk.len()].0
        } else {
            &rc[i - pk.len() - ck.len()]
        }
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.all_columns().position(|c| c.name == name)
    }

    pub fn qualified(&self) -> String {
        format!("{}.{}", self.keyspace.prefix(), self.name)
    }
}

/// One cell value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Text(String),
    Int(i32),
    BigInt(i64),
    Double(f64),
    Boolean(bool),
    Blob(#[serde(with = "blob_text")] Vec<u8>),
    TextList(Vec<String>),
}

/// Blobs serialise as base64 text (the embedded engine stores rows as JSON;
/// a list of numbers would quadruple every chunk).
mod blob_text {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

impl Value {
    pub fn column_type(&self) -> ColumnType {
        match self {
            Value::Text(_) => ColumnType::Text,
            Value::Int(_) => ColumnType::Int,
            Value::BigInt(_) => ColumnType::BigInt,
            Value::Double(_) => ColumnType::Double,
            Value::Boolean(_) => ColumnType::Boolean,
            Value::Blob(_) => ColumnType::Blob,
            Value::TextList(_) => ColumnType::TextList,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}
impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Text(s.clone())
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::BigInt(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Boolean(v)
    }
}
impl From<Vec<String>> for Value {
    fn from(v: Vec<String>) -> Self {
        Value::TextList(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}

/// A row of one table: values in [`Table`] row order, `None` for null.
#[derive(Clone, Debug)]
pub struct Row {
    pub table: &'static Table,
    pub values: Vec<Option<Value>>,
}

impl PartialEq for Row {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.table, other.table) && self.values == other.values
    }
}

impl Row {
    pub fn new(table: &'static Table) -> Self {
        Row {
            table,
            values: vec![None; table.width()],
        }
    }

    /// Sets a column by name. Panics on a name the table does not declare:
    /// that is a programming error, caught by the first test that writes the row.
    pub fn set(mut self, name: &str, value: impl Into<Value>) -> Self {
        let i = self.idx(name);
        self.values[i] = Some(value.into());
        self
    }

    pub fn set_opt(mut self, name: &str, value: Option<impl Into<Value>>) -> Self {
        let i = self.idx(name);
        self.values[i] = value.map(Into::into);
        self
    }

    fn idx(&self, name: &str) -> usize {
        self.table
            .index_of(name)
            .unwrap_or_else(|| panic!("table {} has no column {name}", self.table.name))
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values[self.idx(name)].as_ref()
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(Value::Text(s)) => Some(s),
            _ => None,
        }
    }

    pub fn string(&self, name: &str) -> String {
        self.text(name).unwrap_or_default().to_owned()
    }

    pub fn text_list(&self, name: &str) -> Vec<String> {
        match self.get(name) {
            Some(Value::TextList(v)) => v.clone(),
            _ => Vec::new(),
        }
    }

    pub fn int(&self, name: &str) -> Option<i32> {
        match self.get(name) {
            Some(Value::Int(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn bigint(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(Value::BigInt(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn double(&self, name: &str) -> Option<f64> {
        match self.get(name) {
            Some(Value::Double(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn boolean(&self, name: &str) -> Option<bool> {
        match self.get(name) {
            Some(Value::Boolean(v)) => Some(*v),
            _ => None,
        }
    }

    /// The primary key values (partition key then clustering).
    pub fn key(&self) -> Result<Vec<Value>, StoreError> {
        self.values[..self.table.key_len()]
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.clone().ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "{}: key column {} is null",
                        self.table.name,
                        self.table.column(i).name
                    ))
                })
            })
            .collect()
    }

    /// Checks that every key column is set and every value has its column's type.
    pub fn validate(&self) -> Result<(), StoreError> {
        self.key()?;
        check_types(self.table, 0, self.values.iter().map(Option::as_ref))
    }
}

fn check_types<'a>(
    table: &'static Table,
    start: usize,
    values: impl Iterator<Item = Option<&'a Value>>,
) -> Result<(), StoreError> {
    for (i, v) in values.enumerate() {
        let c = table.column(start + i);
        if let Some(v) = v
            && v.column_type() != c.ty
        {
            return Err(StoreError::Invalid(format!(
                "{}.{}: expected {:?}, got {:?}",
                table.name,
                c.name,
                c.ty,
                v.column_type()
            )));
        }
    }
    Ok(())
}

/// Checks that `key` is a typed prefix of the table's primary key that contains
/// at least the whole partition key.
pub(crate) fn check_key(
    table: &'static Table,
    key: &[Value],
    full: bool,
) -> Result<(), StoreError> {
    if key.len() < table.partition_key.len() || key.len() > table.key_len() {
        return Err(StoreError::Invalid(format!(
            "{}: a key needs {}..={} values, got {}",
            table.name,
            table.partition_key.len(),
            table.key_len(),
            key.len()
        )));
    }
    if full && key.len() != table.key_len() {
        return Err(StoreError::Invalid(format!(
            "{}: full primary key required",
            table.name
        )));
    }
    check_types(table, 0, key.iter().map(Some))
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
    pub after: Option<String>,
}

impl Slice {
    pub fn partition(partition: Vec<Value>) -> Self {
        Slice {
            partition,
            limit: 100,
            ..Default::default()
        }
    }
    pub fn prefix(mut self, prefix: Vec<Value>) -> Self {
        self.prefix = prefix;
        self
    }
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
    pub fn after(mut self, cursor: Option<String>) -> Self {
        self.after = cursor;
        self
    }
    pub fn reverse(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }
    pub fn lower(mut self, b: Bound) -> Self {
        self.lower = Some(b);
        self
    }
    pub fn upper(mut self, b: Bound) -> Self {
        self.upper = Some(b);
        self
    }
}

/// A page of rows and, when more may follow, the cursor to continue from.
#[derive(Clone, Debug)]
pub struct Page {
    pub rows: Vec<Row>,
    /// The cursor to continue from if more rows may follow.
    pub next: Option<String>,
    /// For slices, one cursor per row (continuing after that row); empty for scans.
    pub cursors: Vec<String>,
}

impl Page {
    /// A slice page: one cursor per row (its clustering key under the query's
    /// fingerprint `fp`), and `next` when `more` rows follow.
    pub(crate) fn of_slice(
        table: &'static Table,
        fp: u64,
        rows: Vec<Row>,
        more: bool,
    ) -> Result<Page, StoreError> {
        let pk = table.partition_key.len();
        let cursors = rows
            .iter()
            .map(|r| Ok(encode_cursor(fp, r.key()?[pk..].to_vec())))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let next = if more { cursors.last().cloned() } else { None };
        Ok(Page {
            rows,
            next,
            cursors,
        })
    }
}

/// One write inside an atomic batch.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Replace the whole row (every column not set becomes null), with an optional TTL in seconds.
    Upsert { row: Row, ttl: Option<u32> },
    /// Delete the rows whose key starts with `key` (at least the whole partition key).
    Delete {
        table: &'static Table,
        key: Vec<Value>,
    },
}

impl Mutation {
    pub fn upsert(row: Row) -> Self {
        Mutation::Upsert { row, ttl: None }
    }
    pub fn delete(table: &'static Table, key: Vec<Value>) -> Self {
        Mutation::Delete { table, key }
    }
    pub fn validate(&self) -> Result<(), StoreError> {
        match self {
            Mutation::Upsert { row, ttl } => {
                if *ttl == Some(0) {
                    return Err(StoreError::Invalid("a TTL must be positive".into()));
                }
                row.validate()
            }
            Mutation::Delete { table, key } => check_key(table, key, false),
        }
    }
}

/// The condition of a compare-and-set.
#[derive(Clone, Debug)]
pub enum Condition {
    /// The row must not exist; the write inserts the whole row.
    NotExists,
    /// The row's columns must have these values (as in CQL, a missing row has only
    /// nulls, so `(c, None)` conditions apply to it); the write updates the given columns.
    Equals(Vec<(&'static str, Option<Value>)>),
}

/// A compare-and-set (lightweight transaction) on one row.
#[derive(Clone, Debug)]
pub struct Cas {
    /// For `NotExists`: the row to insert. For `Equals`: the key plus the columns to set
    /// (every non-key column that is `Some` is written; `None` columns are left as they are).
    pub row: Row,
    pub condition: Condition,
    pub ttl: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct CasOutcome {
    pub applied: bool,
    /// The row as it is after the operation (when applied) or as it was found (when not).
    pub current: Option<Row>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the cursor is not valid for this query")]
    BadCursor,
    #[error("invalid store request: {0}")]
    Invalid(String),
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("store failure: {0}")]
    Internal(String),
}

/// The table API of DESIGN.md.
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
    /// An atomic batch of writes: all apply or none.
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError>;
    /// A serialisable compare-and-set on one row.
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError>;
    /// A whole table, page by page (maintenance jobs only).
    async fn scan(
        &self,
        table: &'static Table,
        after: Option<String>,
        limit: usize,
    ) -> Result<Page, StoreError>;
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

/// A shared store is a store too, so one engine can sit under several
/// [`Counted`] wrappers (each with its own count).
#[async_trait]
impl Store for DynStore {
    fn engine(&self) -> &'static str {
        self.as_ref().engine()
    }
    async fn get(&self, table: &'static Table, key: &[Value]) -> Result<Option<Row>, StoreError> {
        self.as_ref().get(table, key).await
    }
    async fn get_many(
        &self,
        table: &'static Table,
        keys: &[Vec<Value>],
    ) -> Result<Vec<Option<Row>>, StoreError> {
        self.as_ref().get_many(table, keys).await
    }
    async fn slice(&self, table: &'static Table, slice: &Slice) -> Result<Page, StoreError> {
        self.as_ref().slice(table, slice).await
    }
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        self.as_ref().apply(batch).await
    }
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        self.as_ref().cas(cas).await
    }
    async fn scan(
        &self,
        table: &'static Table,
        after: Option<String>,
        limit: usize,
    ) -> Result<Page, StoreError> {
        self.as_ref().scan(table, after, limit).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.as_ref().ping().await
    }
    fn round_trips(&self) -> u64 {
        self.as_ref().round_trips()
    }
    fn rows_read(&self) -> u64 {
        self.as_ref().rows_read()
    }
}

/// Wraps an engine and counts store round trips (one per call), both in the
/// process-wide metrics and per store (so tests running side by side can
/// measure their own).
pub struct Counted<S> {
    pub engine: S,
    calls: std::sync::atomic::AtomicU64,
    rows: std::sync::atomic::AtomicU64,
}

impl<S> Counted<S> {
    pub fn new(engine: S) -> Self {
        Counted {
            engine,
            calls: std::sync::atomic::AtomicU64::new(0),
            rows: std::sync::atomic::AtomicU64::new(0),
        }
    }
    fn count(&self, op: &'static str, table: &'static str) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        metrics::store_call(op, table);
    }
    fn read<T>(&self, n: usize, out: T) -> T {
        self.rows
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        metrics::rows_read(n);
        out
    }
}

#[async_trait]
impl<S: Store> Store for Counted<S> {
    fn engine(&self) -> &'static str {
        self.engine.engine()
    }
    async fn get(&self, table: &'static Table, key: &[Value]) -> Result<Option<Row>, StoreError> {
        self.count("get", table.name);
        let row = self.engine.get(table, key).await?;
        Ok(self.read(usize::from(row.is_some()), row))
    }
    async fn get_many(
        &self,
        table: &'static Table,
        keys: &[Vec<Value>],
    ) -> Result<Vec<Option<Row>>, StoreError> {
        self.count("get_many", table.name);
        let rows = self.engine.get_many(table, keys).await?;
        Ok(self.read(rows.iter().flatten().count(), rows))
    }
    async fn slice(&self, table: &'static Table, slice: &Slice) -> Result<Page, StoreError> {
        self.count("slice", table.name);
        let page = self.engine.slice(table, slice).await?;
        Ok(self.read(page.rows.len(), page))
    }
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        self.count("apply", "batch");
        self.engine.apply(batch).await
    }
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        self.count("cas", cas.row.table.name);
        self.engine.cas(cas).await
    }
    async fn scan(
        &self,
        table: &'static Table,
        after: Option<String>,
        limit: usize,
    ) -> Result<Page, StoreError> {
        self.count("scan", table.name);
        let page = self.engine.scan(table, after, limit).await?;
        Ok(self.read(page.rows.len(), page))
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.engine.ping().await
    }
    fn round_trips(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn rows_read(&self) -> u64 {
        self.rows.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Cursors: base64url of a JSON document that names the query it belongs to
/// (a hash of table, partition, prefix, bounds and direction) and the last
/// clustering key returned. A cursor from another query, or a forged one, is
/// rejected with [`StoreError::BadCursor`].
#[derive(Serialize, Deserialize)]
struct CursorDoc {
    q: u64,
    k: Vec<Value>,
}

pub(crate) fn slice_fingerprint(table: &Table, slice: &Slice) -> u64 {
    let shape = serde_json::to_vec(&(
        table.keyspace.prefix(),
        table.name,
        &slice.partition,
        &slice.prefix,
        &slice.lower,
        &slice.upper,
        slice.reverse,
    ))
    .unwrap_or_default();
    fnv1a(&shape)
}

/// A short stable hash of a text, hex (for ETags and cache keys).
pub fn fnv1a_hex(text: &str) -> String {
    format!("{:016x}", fnv1a(text.as_bytes()))
}

pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub(crate) fn encode_cursor(fingerprint: u64, key: Vec<Value>) -> String {
    let doc = CursorDoc {
        q: fingerprint,
        k: key,
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&doc).expect("values serialise"))
}

/// Decodes a cursor and checks it belongs to this query and has the right shape:
/// `key_len` values typed like the table's key columns from `start`.
pub(crate) fn decode_cursor(
    table: &'static Table,
    fingerprint: u64,
    cursor: &str,
    start: usize,
    key_len: usize,
) -> Result<Vec<Value>, StoreError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| StoreError::BadCursor)?;
    let doc: CursorDoc = serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)?;
    if doc.q != fingerprint || doc.k.len() != key_len {
        return Err(StoreError::BadCursor);
    }
    check_types(table, start, doc.k.iter().map(Some)).map_err(|_| StoreError::BadCursor)?;
    Ok(doc.k)
}

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

/// Opens the store the configuration asks for.
pub async fn open(config: &StoreConfig) -> anyhow::Result<DynStore> {
    match &config.cassandra {
        Some(nodes) => {
            let engine =
                cql::CqlStore::connect(nodes, &config.env, config.replication.clone()).await?;
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
