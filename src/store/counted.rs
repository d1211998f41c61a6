//! Counting round trips: an engine wrapped so that every call of the store API
//! counts in the metrics and in the wrapper (tests measure their own).

use super::*;
use crate::kernel::metrics;
use async_trait::async_trait;

/// Wraps an engine and counts store round trips (one per call), both in the
/// process-wide metrics and per store (so tests running side by side can
/// measure their own).
///
/// The engine sits behind an `Arc`, so a wrapper can count its own calls on a
/// store that is shared already ([`Counted::over`]).
pub struct Counted<S: ?Sized> {
    pub engine: Arc<S>,
    calls: std::sync::atomic::AtomicU64,
    rows: std::sync::atomic::AtomicU64,
}

impl<S> Counted<S> {
    pub fn new(engine: S) -> Self {
        Counted::over(Arc::new(engine))
    }
}

impl<S: ?Sized> Counted<S> {
    /// Counts the calls made through this wrapper to a shared engine (which
    /// may be counted elsewhere too).
    pub fn over(engine: Arc<S>) -> Self {
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
impl<S: Store + ?Sized> Store for Counted<S> {
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
    async fn slice_many(
        &self,
        table: &'static Table,
        slices: &[Slice],
    ) -> Result<Vec<Page>, StoreError> {
        self.count("slice_many", table.name);
        let pages = self.engine.slice_many(table, slices).await?;
        Ok(self.read(pages.iter().map(|p| p.rows.len()).sum(), pages))
    }
    async fn merged_slice(
        &self,
        table: &'static Table,
        partitions: &[Vec<Value>],
        template: &Slice,
    ) -> Result<Page, StoreError> {
        if !self.engine.merges_natively() {
            // Its rounds of `slice_many`, each counted.
            return buckets::merged_slice(self, table, partitions, template).await;
        }
        self.count("merged_slice", table.name);
        let page = self
            .engine
            .merged_slice(table, partitions, template)
            .await?;
        Ok(self.read(page.rows.len(), page))
    }
    fn merges_natively(&self) -> bool {
        self.engine.merges_natively()
    }
    async fn write_bulk(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        self.count("write_bulk", "batch");
        self.engine.write_bulk(batch).await
    }
    async fn write_bulk_then_cas(
        &self,
        bulk: Vec<Mutation>,
        cas: Cas,
        then: Heal,
    ) -> Result<CasOutcome, BulkThenCasError> {
        // Two calls of the API (one commit on the embedded engine, which
        // its own commit counter shows).
        self.count("write_bulk", "batch");
        self.count("cas", cas.row.table.name);
        self.engine.write_bulk_then_cas(bulk, cas, then).await
    }
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        self.count("apply", "batch");
        self.engine.apply(batch).await
    }
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        self.count("cas", cas.row.table.name);
        self.engine.cas(cas).await
    }
    async fn cas_then(&self, cas: Cas, then: Heal) -> Result<CasOutcome, StoreError> {
        self.count("cas", cas.row.table.name);
        self.engine.cas_then(cas, then).await
    }
    async fn insert_new(
        &self,
        inserts: Vec<(Row, Vec<Mutation>)>,
        heal: Heal,
    ) -> Result<Vec<Option<Row>>, StoreError> {
        let table = inserts.first().map(|(r, _)| r.table.name).unwrap_or("none");
        self.count("insert_new", table);
        let found = self.engine.insert_new(inserts, heal).await?;
        Ok(self.read(found.iter().flatten().count(), found))
    }
    async fn scan(&self, table: &'static Table, scan: Scan) -> Result<Page, StoreError> {
        self.count("scan", table.name);
        let page = self.engine.scan(table, scan).await?;
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
