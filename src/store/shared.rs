//! A shared store (`DynStore`) is a store too: every call goes to the engine
//! behind the `Arc`, so one engine can sit under several wrappers.

use super::*;
use async_trait::async_trait;

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
    async fn slice_many(
        &self,
        table: &'static Table,
        slices: &[Slice],
    ) -> Result<Vec<Page>, StoreError> {
        self.as_ref().slice_many(table, slices).await
    }
    async fn merged_slice(
        &self,
        table: &'static Table,
        partitions: &[Vec<Value>],
        template: &Slice,
    ) -> Result<Page, StoreError> {
        self.as_ref()
            .merged_slice(table, partitions, template)
            .await
    }
    fn merges_natively(&self) -> bool {
        self.as_ref().merges_natively()
    }
    async fn write_bulk(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        self.as_ref().write_bulk(batch).await
    }
    async fn write_bulk_then_cas(
        &self,
        bulk: Vec<Mutation>,
        cas: Cas,
        then: Heal,
    ) -> Result<CasOutcome, BulkThenCasError> {
        self.as_ref().write_bulk_then_cas(bulk, cas, then).await
    }
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        self.as_ref().apply(batch).await
    }
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        self.as_ref().cas(cas).await
    }
    async fn cas_then(&self, cas: Cas, then: Heal) -> Result<CasOutcome, StoreError> {
        self.as_ref().cas_then(cas, then).await
    }
    async fn insert_new(
        &self,
        inserts: Vec<(Row, Vec<Mutation>)>,
        heal: Heal,
    ) -> Result<Vec<Option<Row>>, StoreError> {
        self.as_ref().insert_new(inserts, heal).await
    }
    async fn scan(&self, table: &'static Table, scan: Scan) -> Result<Page, StoreError> {
        self.as_ref().scan(table, scan).await
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
