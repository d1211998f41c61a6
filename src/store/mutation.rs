//! One write of a batch: an upsert, a delete, or an add to a counter, and
//! what both engines refuse alike before writing it.

use super::table::check_key;
use super::{ColumnType, Row, StoreError, Table, Value};

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
    /// Add `by` (negative: subtract) to the counter `column` of the row at
    /// `key` (a whole primary key; a missing row counts from 0). Not
    /// idempotent: on Cassandra it is a `counter` update sent once, after
    /// the batch's other writes and never retried (cql/README.md,
    /// "Counters"); on the embedded engine it is in the batch's transaction.
    Add {
        table: &'static Table,
        key: Vec<Value>,
        column: &'static str,
        by: i64,
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
                if row.table.is_counter() {
                    return Err(StoreError::Invalid(format!(
                        "{}: counters change by adding only",
                        row.table.name
                    )));
                }
                row.validate()
            }
            Mutation::Delete { table, key } => check_key(table, key, false),
            Mutation::Add {
                table, key, column, ..
            } => {
                check_key(table, key, true)?;
                match table.index_of(column).map(|i| table.column(i).ty) {
                    Some(ColumnType::Counter) => Ok(()),
                    _ => Err(StoreError::Invalid(format!(
                        "{}.{column} is not a counter",
                        table.name
                    ))),
                }
            }
        }
    }
    /// The table it writes to and the key it names.
    pub fn target(&self) -> Result<(&'static Table, Vec<Value>), StoreError> {
        Ok(match self {
            Mutation::Upsert { row, .. } => (row.table, row.key()?),
            Mutation::Delete { table, key } | Mutation::Add { table, key, .. } => {
                (*table, key.clone())
            }
        })
    }
}
