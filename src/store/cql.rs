//! The cluster engine over the `scylla` driver (Apache Cassandra and ScyllaDB).
//!
//! Statements are generated from the table declarations and prepared once
//! (then cached by their text in the driver's `CachingSession`). Every partition-key value is bound, so the
//! driver routes each request to a replica. Reads and writes use LOCAL_QUORUM,
//! compare-and-set uses LOCAL_SERIAL. Slices continue after the last clustering
//! key (the cursor), never with `ALLOW FILTERING`.

use std::time::Duration;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use scylla::client::caching_session::CachingSession;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::Statement;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::CqlValue;

use super::{
    Bound, Cas, CasOutcome, ColumnType, Condition, Cursor, Heal, Mutation, Order, Page, Row, Slice,
    Store, StoreError, Table, Value, check_key, check_slice, slice_fingerprint,
};
use crate::kernel::metrics;

pub struct CqlStore {
    /// The driver's session with its prepared-statement cache (keyed by text).
    session: CachingSession,
    env: String,
    replication: String,
    /// The table `ping` reads (`probing`): one of the application's.
    probe: Option<&'static Table>,
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// A compare-and-set whose proposal some replicas may have accepted: Paxos
/// timed out (a write timeout of type CAS, e.g. under contention with a
/// replica down) or the node says the outcome is unknown. It may yet be the
/// value that stands.
fn cas_outcome_unknown(e: &scylla::errors::ExecutionError) -> bool {
    use scylla::errors::{DbError, ExecutionError, RequestAttemptError, WriteType};
    matches!(
        e,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::WriteTimeout {
                write_type: WriteType::Cas,
                ..
            },
            _
        ))
    )
}

/// A health check gives up after this long, whatever the cluster's own
/// timeouts: `/healthz` answers 503 within it when a quorum is missing.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a compare-and-set of unknown outcome may spend on serial reads
/// to settle it (see `CqlStore::settle_unknown_cas`).
const SETTLE_BUDGET: Duration = Duration::from_millis(600);

/// How long one schema statement may take before it is sent again (a
/// `CREATE TABLE` on a node busy with compaction took over 15 s in CI).
const DDL_TIMEOUT: Duration = Duration::from_secs(60);
/// How many times an idempotent schema statement is sent before `migrate` fails.
const DDL_ATTEMPTS: u32 = 3;

/// Statements per unlogged batch of a bulk write (every such batch holds
/// rows of one partition: Cassandra applies it as one mutation).
const BULK_BATCH_STATEMENTS: usize = 256;
/// About this many bytes per unlogged batch of a bulk write. Cassandra's
/// `batch_size_warn_threshold` (5 KiB) and `batch_size_fail_threshold`
/// (50 KiB) apply only to batches spanning partitions (CASSANDRA-8825,
/// -10876), so a one-partition batch may be larger; staying under 50 KiB
/// keeps it under the fail threshold of servers that count it anyway. Raised
/// from 32 statements / 4 KiB: import-vocabulary, whose search rows share
/// partitions, went from 2,317-2,367 to 2,496-2,711 keywords/s on the test
/// node (A/B in one session, 2026-12-04).
const BULK_BATCH_BYTES: usize = 48 << 10;
/// Batches of a bulk write in flight at once.
const BULK_IN_FLIGHT: usize = 64;

/// Microseconds since the epoch, as CQL write timestamps count.
fn write_time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn mutation_bytes(m: &Mutation) -> usize {
    let values: &[Option<Value>] = match m {
        Mutation::Upsert { row, .. } => &row.values,
        Mutation::Delete { .. } => return 64,
    };
    values
        .iter()
        .map(|v| match v {
            Some(Value::Text(s)) => s.len() + 4,
            Some(Value::Blob(b)) => b.len() + 4,
            Some(Value::TextList(l)) => l.iter().map(|s| s.len() + 4).sum::<usize>() + 4,
            _ => 8,
        })
        .sum::<usize>()
        + 16
}

fn to_cql(v: &Option<Value>) -> Option<CqlValue> {
    v.as_ref().map(|v| match v {
        Value::Text(s) => CqlValue::Text(s.clone()),
        Value::Int(i) => CqlValue::Int(*i),
        Value::BigInt(i) => CqlValue::BigInt(*i),
        Value::Double(f) => CqlValue::Double(*f),
        Value::Boolean(b) => CqlValue::Boolean(*b),
        Value::Blob(b) => CqlValue::Blob(b.clone()),
        Value::TextList(l) => CqlValue::List(l.iter().cloned().map(CqlValue::Text).collect()),
    })
}

fn from_cql(v: Option<CqlValue>) -> Result<Option<Value>, StoreError> {
    Ok(match v {
        None | Some(CqlValue::Empty) => None,
        Some(CqlValue::Text(s)) | Some(CqlValue::Ascii(s)) => Some(Value::Text(s)),
        Some(CqlValue::Int(i)) => Some(Value::Int(i)),
        Some(CqlValue::BigInt(i)) => Some(Value::BigInt(i)),
        Some(CqlValue::Double(f)) => Some(Value::Double(f)),
        Some(CqlValue::Boolean(b)) => Some(Value::Boolean(b)),
        Some(CqlValue::Blob(b)) => Some(Value::Blob(b)),
        Some(CqlValue::List(l)) => Some(Value::TextList(
            l.into_iter()
                .map(|v| match v {
                    CqlValue::Text(s) => Ok(s),
                    other => Err(StoreError::Internal(format!(
                        "unexpected list item {other:?}"
                    ))),
                })
                .collect::<Result<_, _>>()?,
        )),
        Some(other) => {
            return Err(StoreError::Internal(format!(
                "unexpected CQL value {other:?}"
            )));
        }
    })
}

fn key_values(key: &[Value]) -> Vec<Option<CqlValue>> {
    key.iter().map(|v| to_cql(&Some(v.clone()))).collect()
}

/// `a = ? AND b = ?` for the first `n` key columns.
fn key_where(table: &Table, n: usize) -> String {
    (0..n)
        .map(|i| format!("{} = ?", table.column(i).name))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// `a ASC, b DESC` as declared, or every direction flipped.
fn clustering_order(table: &Table, reversed: bool) -> String {
    table
        .clustering
        .iter()
        .map(|(c, o)| {
            let asc = (*o == Order::Asc) != reversed;
            format!("{} {}", c.name, if asc { "ASC" } else { "DESC" })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prepared statements kept: the statements derived from every table's
/// declaration (a few per table and operation) fit many times over.
const STATEMENT_CACHE: usize = 4096;

fn select_list(table: &Table) -> String {
    table
        .all_columns()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl CqlStore {
    /// Connects to the cluster. `replication` is the CQL replication map used by `migrate`.
    pub async fn connect(nodes: &[String], env: &str, replication: String) -> anyhow::Result<Self> {
        let profile = ExecutionProfile::builder()
            .consistency(Consistency::LocalQuorum)
            .serial_consistency(Some(SerialConsistency::LocalSerial))
            .request_timeout(Some(Duration::from_secs(15)))
            .build()
            .into_handle();
        let session = SessionBuilder::new()
            .known_nodes(nodes)
            .connection_timeout(Duration::from_secs(10))
            .default_execution_profile_handle(profile)
            .build()
            .await?;
        Ok(CqlStore {
            session: CachingSession::from(session, STATEMENT_CACHE),
            env: env.to_owned(),
            replication,
            probe: None,
        })
    }

    /// `ping` reads a partition of `table` (one of the application's, which
    /// the store does not know of itself).
    pub fn probing(mut self, table: &'static Table) -> Self {
        self.probe = Some(table);
        self
    }

    /// The environment name (keyspaces are `<family>_<env>`).
    pub fn env(&self) -> &str {
        &self.env
    }

    fn name(&self, table: &Table) -> String {
        format!("{}_{}.{}", table.keyspace.prefix(), self.env, table.name)
    }

    async fn prepare(&self, cql: String) -> Result<PreparedStatement, StoreError> {
        // A read whose connection breaks (its node died) is retried on the
        // next replica; a write may have been applied already, so it is not.
        let mut statement = Statement::new(cql);
        statement.set_is_idempotent(statement.contents.starts_with("SELECT "));
        self.session
            .add_prepared_statement(&statement)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "prepare failed");
                unavailable(e)
            })
    }

    /// One request, counted; the driver's error as it is (see `run`).
    async fn execute(
        &self,
        stmt: &PreparedStatement,
        values: Vec<Option<CqlValue>>,
    ) -> Result<scylla::response::query_result::QueryResult, scylla::errors::ExecutionError> {
        metrics::store_request();
        self.session
            .get_session()
            .execute_unpaged(stmt, values)
            .await
    }

    /// A failed request: logged with its statement, UNAVAILABLE to the caller.
    fn failed(stmt: &PreparedStatement, e: scylla::errors::ExecutionError) -> StoreError {
        tracing::warn!(error = %e, cql = stmt.get_statement(), "CQL request failed");
        unavailable(e)
    }

    async fn run(
        &self,
        stmt: &PreparedStatement,
        values: Vec<Option<CqlValue>>,
    ) -> Result<scylla::response::query_result::QueryResult, StoreError> {
        self.execute(stmt, values)
            .await
            .map_err(|e| Self::failed(stmt, e))
    }

    fn rows(
        table: &'static Table,
        result: scylla::response::query_result::QueryResult,
    ) -> Result<Vec<Row>, StoreError> {
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        let mut out = Vec::new();
        for r in rows
            .rows::<scylla::value::Row>()
            .map_err(|e| StoreError::Internal(e.to_string()))?
        {
            let r = r.map_err(|e| StoreError::Internal(e.to_string()))?;
            let values = r
                .columns
                .into_iter()
                .map(from_cql)
                .collect::<Result<Vec<_>, _>>()?;
            out.push(Row { table, values });
        }
        Ok(out)
    }

    /// Decides a compare-and-set whose outcome the cluster left unknown: a
    /// read at LOCAL_SERIAL finishes any proposal in flight, so the row it
    /// returns is the decided one. The compare-and-set applied if that row
    /// holds every value it wrote. Callers make proposals tell apart (a
    /// transition writes its time to the nanosecond), so an identical
    /// concurrent proposal is not taken for this one. If it did not apply and
    /// its condition still holds, nothing was decided: UNAVAILABLE (try again),
    /// not a conflict.
    async fn settle_unknown_cas(&self, cas: &Cas, key: &[Value]) -> Result<CasOutcome, StoreError> {
        let table = cas.row.table;
        // The serial read takes part in the same contention: tries within a
        // short budget, so that a cluster without a quorum still fails fast
        // (the compare-and-set has already waited out its timeout).
        let deadline = tokio::time::Instant::now() + SETTLE_BUDGET;
        let mut tries = 0u64;
        let current = loop {
            let failed =
                match tokio::time::timeout_at(deadline, self.get_one(table, key, true)).await {
                    Ok(Ok(c)) => break c,
                    Ok(Err(StoreError::Unavailable(e))) => e,
                    Ok(Err(e)) => return Err(e),
                    Err(_) => "the serial read ran out of time".to_owned(),
                };
            tries += 1;
            let pause = Duration::from_millis(10 * tries);
            if tokio::time::Instant::now() + pause >= deadline {
                tracing::warn!(
                    error = failed,
                    table = table.name,
                    "a compare-and-set's outcome stays unknown"
                );
                return Err(StoreError::Unavailable(failed));
            }
            tokio::time::sleep(pause).await;
        };
        let applied = current.as_ref().is_some_and(|cur| {
            (table.key_len()..table.width()).all(|i| match &cas.row.values[i] {
                // An empty list is written as null and reads back as one.
                Some(Value::TextList(l)) if l.is_empty() => cur.values[i].is_none(),
                Some(v) => cur.values[i].as_ref() == Some(v),
                // An insert or a replacement writes its nulls too; an update leaves them.
                None => matches!(cas.condition, Condition::Equals(_)) || cur.values[i].is_none(),
            })
        });
        // Not applied, and the condition still holds: the proposal was never
        // accepted (Paxos contention) and nobody else's was either. That is
        // no conflict to report: the caller should simply try again.
        let condition_holds = match &cas.condition {
            Condition::NotExists => current.is_none(),
            Condition::Equals(expected) | Condition::Replaces(expected) => {
                expected.iter().all(|(name, want)| {
                    let have = table
                        .index_of(name)
                        .and_then(|i| current.as_ref().and_then(|c| c.values[i].as_ref()));
                    have == want.as_ref()
                })
            }
        };
        if !applied && condition_holds {
            tracing::warn!(
                table = table.name,
                "a compare-and-set timed out under contention without taking effect"
            );
            return Err(StoreError::Unavailable(
                "the compare-and-set timed out under contention".into(),
            ));
        }
        metrics::cas_settled(applied);
        Ok(CasOutcome { applied, current })
    }

    async fn get_one(
        &self,
        table: &'static Table,
        key: &[Value],
        serial: bool,
    ) -> Result<Option<Row>, StoreError> {
        let cql = format!(
            "SELECT {} FROM {} WHERE {}",
            select_list(table),
            self.name(table),
            key_where(table, table.key_len())
        );
        let mut stmt = self.prepare(cql).await?;
        if serial {
            stmt.set_consistency(Consistency::LocalSerial);
        }
        let result = self.run(&stmt, key_values(key)).await?;
        Ok(Self::rows(table, result)?.into_iter().next())
    }

    async fn mutation_statement(
        &self,
        m: &Mutation,
    ) -> Result<(PreparedStatement, Vec<Option<CqlValue>>), StoreError> {
        match m {
            Mutation::Upsert { row, ttl } => {
                let t = row.table;
                let cols = select_list(t);
                let marks = vec!["?"; t.width()].join(", ");
                let cql = format!(
                    "INSERT INTO {} ({cols}) VALUES ({marks}) USING TTL ?",
                    self.name(t)
                );
                let mut values: Vec<_> = row.values.iter().map(to_cql).collect();
                values.push(Some(CqlValue::Int(ttl.unwrap_or(0) as i32)));
                Ok((self.prepare(cql).await?, values))
            }
            Mutation::Delete { table, key } => {
                let cql = format!(
                    "DELETE FROM {} WHERE {}",
                    self.name(table),
                    key_where(table, key.len())
                );
                Ok((self.prepare(cql).await?, key_values(key)))
            }
        }
    }

    /// Writes `batch` as unlogged batches, one per partition (so the driver
    /// routes each to a replica of its partition) and at most
    /// [`BULK_BATCH_STATEMENTS`] statements or about [`BULK_BATCH_BYTES`] each,
    /// [`BULK_IN_FLIGHT`] at a time, all at write time `at` (microseconds).
    /// Each partition's batch is atomic; the whole is not.
    async fn write_grouped(&self, batch: Vec<Mutation>, at: i64) -> Result<(), StoreError> {
        let mut groups: std::collections::HashMap<(String, Vec<u8>), Vec<Mutation>> =
            std::collections::HashMap::new();
        for m in batch {
            let (table, key) = match &m {
                Mutation::Upsert { row, .. } => (row.table, row.key()?),
                Mutation::Delete { table, key } => (*table, key.clone()),
            };
            let pk = &key[..table.partition_key.len().min(key.len())];
            let id = serde_json::to_vec(pk).map_err(|e| StoreError::Internal(e.to_string()))?;
            groups
                .entry((table.name.to_owned(), id))
                .or_default()
                .push(m);
        }
        let mut chunks = Vec::new();
        for (_, ms) in groups {
            let mut chunk = Vec::new();
            let mut bytes = 0;
            for m in ms {
                let size = mutation_bytes(&m);
                if !chunk.is_empty()
                    && (chunk.len() >= BULK_BATCH_STATEMENTS || bytes + size > BULK_BATCH_BYTES)
                {
                    chunks.push(std::mem::take(&mut chunk));
                    bytes = 0;
                }
                bytes += size;
                chunk.push(m);
            }
            if !chunk.is_empty() {
                chunks.push(chunk);
            }
        }
        let sends: Vec<_> = chunks
            .iter()
            .map(|c| self.batch(BatchType::Unlogged, Some(at), c))
            .collect();
        futures::stream::iter(sends)
            .buffer_unordered(BULK_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// One batch of `ms` of `kind`, at write time `at` (else the server's).
    async fn batch(
        &self,
        kind: BatchType,
        at: Option<i64>,
        ms: &[Mutation],
    ) -> Result<(), StoreError> {
        let mut b = Batch::new(kind);
        b.set_timestamp(at);
        let mut all_values = Vec::with_capacity(ms.len());
        for m in ms {
            let (stmt, values) = self.mutation_statement(m).await?;
            b.append_statement(stmt);
            all_values.push(values);
        }
        metrics::store_request();
        self.session
            .get_session()
            .batch(&b, all_values)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "CQL batch failed");
                unavailable(e)
            })?;
        Ok(())
    }

    /// Applies `cql/*.cql` (the keyspace files) for this store's env, idempotently.
    pub async fn migrate(&self, files: &[(&str, &str)]) -> anyhow::Result<()> {
        for (file, text) in files {
            for stmt in statements(text) {
                let stmt = stmt
                    .replace("${env}", &self.env)
                    .replace("${replication}", &self.replication);
                tracing::info!(file, "applying {}", stmt.lines().next().unwrap_or_default());
                self.apply_ddl(&stmt)
                    .await
                    .map_err(|e| anyhow::anyhow!("{file}: {e}\n{stmt}"))?;
            }
        }
        self.session.get_session().await_schema_agreement().await?;
        Ok(())
    }

    /// One idempotent schema statement (`CREATE ... IF NOT EXISTS`). A node
    /// busy with other schema changes or compaction can take longer than the
    /// request timeout to answer one, although the change goes through: the
    /// statement gets [`DDL_TIMEOUT`], and after a timeout the schema is let
    /// settle and the statement sent again, up to [`DDL_ATTEMPTS`] times.
    async fn apply_ddl(&self, stmt: &str) -> Result<(), scylla::errors::ExecutionError> {
        use scylla::errors::{ExecutionError, RequestAttemptError};
        let mut statement = scylla::statement::unprepared::Statement::new(stmt);
        statement.set_request_timeout(Some(DDL_TIMEOUT));
        let session = self.session.get_session();
        let mut attempt = 1;
        loop {
            match session.query_unpaged(statement.clone(), ()).await {
                Ok(_) => return Ok(()),
                Err(
                    e @ (ExecutionError::RequestTimeout(_)
                    | ExecutionError::LastAttemptError(RequestAttemptError::DbError(
                        scylla::errors::DbError::Overloaded
                        | scylla::errors::DbError::IsBootstrapping
                        | scylla::errors::DbError::ReadTimeout { .. }
                        | scylla::errors::DbError::WriteTimeout { .. },
                        _,
                    ))),
                ) if attempt < DDL_ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "schema statement timed out; retrying");
                    let _ = session.await_schema_agreement().await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `CREATE TABLE IF NOT EXISTS` for a declaration (tests create their probe tables with it).
    pub fn create_table_cql(&self, table: &Table) -> String {
        let cols: Vec<String> = table
            .all_columns()
            .map(|c| format!("{} {}", c.name, c.ty.cql()))
            .collect();
        let pk: Vec<&str> = table.partition_key.iter().map(|c| c.name).collect();
        let mut key = format!("({})", pk.join(", "));
        for (c, _) in table.clustering {
            key.push_str(", ");
            key.push_str(c.name);
        }
        let order = if table.clustering.is_empty() {
            String::new()
        } else {
            format!(
                " WITH CLUSTERING ORDER BY ({})",
                clustering_order(table, false)
            )
        };
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY ({key})){order}",
            self.name(table),
            cols.join(", ")
        )
    }

    /// Runs one schema statement and waits for schema agreement.
    pub async fn ddl(&self, cql: &str) -> anyhow::Result<()> {
        self.apply_ddl(cql).await?;
        self.session.get_session().await_schema_agreement().await?;
        Ok(())
    }

    /// The column names and CQL types of a table as the cluster has them (for the schema test).
    pub async fn describe(&self, table: &Table) -> anyhow::Result<Vec<(String, String)>> {
        let ks = format!("{}_{}", table.keyspace.prefix(), self.env);
        let result = self
            .session
            .get_session()
            .query_unpaged(
                "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
                (ks, table.name),
            )
            .await?
            .into_rows_result()?;
        let mut out = Vec::new();
        for r in result.rows::<(String, String)>()? {
            out.push(r?);
        }
        out.sort();
        Ok(out)
    }
}

#[async_trait]
impl Store for CqlStore {
    fn engine(&self) -> &'static str {
        "cql"
    }

    async fn get(&self, table: &'static Table, key: &[Value]) -> Result<Option<Row>, StoreError> {
        check_key(table, key, true)?;
        self.get_one(table, key, false).await
    }

    async fn get_many(
        &self,
        table: &'static Table,
        keys: &[Vec<Value>],
    ) -> Result<Vec<Option<Row>>, StoreError> {
        for k in keys {
            check_key(table, k, true)?;
        }
        let reads: Vec<_> = keys.iter().map(|k| self.get_one(table, k, false)).collect();
        futures::stream::iter(reads)
            .buffered(64)
            .try_collect()
            .await
    }

    async fn slice(&self, table: &'static Table, s: &Slice) -> Result<Page, StoreError> {
        check_slice(table, s)?;
        let fp = slice_fingerprint(table, s);
        let pk = table.partition_key.len();
        let p = s.prefix.len();
        let rest: Vec<_> = table.clustering[p..].iter().collect();
        if rest.windows(2).any(|w| w[0].1 != w[1].1) {
            return Err(StoreError::Invalid(format!(
                "{}: mixed clustering orders are not sliceable",
                table.name
            )));
        }
        let mut clauses = vec![key_where(table, pk + p)];
        let mut values = key_values(&s.partition);
        values.extend(key_values(&s.prefix));
        // Reading "forward" means ascending values when the columns are ASC.
        let ascending = (rest.first().map(|c| c.1) == Some(Order::Asc)) != s.reverse;
        let after = match &s.after {
            Some(c) => {
                let ck = c.key(table, fp, pk, table.clustering.len())?;
                let (start, end) = super::key::slice_range(table, s)?;
                super::key::cursor_key(table, s, &ck, (&start, end.as_deref()))?;
                Some(ck)
            }
            None => None,
        };
        let tuple = |cols: &[&(super::Column, Order)]| {
            format!(
                "({})",
                cols.iter().map(|c| c.0.name).collect::<Vec<_>>().join(", ")
            )
        };
        let bound_col = rest.first().map(|c| c.0.name).unwrap_or_default();
        let multi = after.is_some() && rest.len() > 1;
        let bound_clause = |b: &Bound, lower: bool| {
            let (op, v) = match (b, lower) {
                (Bound::Inclusive(v), true) => (">=", v),
                (Bound::Exclusive(v), true) => (">", v),
                (Bound::Inclusive(v), false) => ("<=", v),
                (Bound::Exclusive(v), false) => ("<", v),
            };
            // Cassandra refuses a single-column slice beside a tuple slice on the same column.
            let lhs = if multi {
                format!("({bound_col})")
            } else {
                bound_col.to_owned()
            };
            let rhs = if multi { "(?)" } else { "?" };
            (format!("{lhs} {op} {rhs}"), v.clone())
        };
        let (start_bound, end_bound) = if ascending {
            (&s.lower, &s.upper)
        } else {
            (&s.upper, &s.lower)
        };
        if let Some(a) = &after {
            let rest_vals = &a[p..];
            let op = if ascending { ">" } else { "<" };
            let marks = vec!["?"; rest_vals.len()].join(", ");
            clauses.push(format!("{} {op} ({marks})", tuple(&rest)));
            values.extend(key_values(rest_vals));
        } else if let Some(b) = start_bound {
            let (c, v) = bound_clause(b, ascending);
            clauses.push(c);
            values.push(to_cql(&Some(v)));
        }
        if let Some(b) = end_bound {
            let (c, v) = bound_clause(b, !ascending);
            clauses.push(c);
            values.push(to_cql(&Some(v)));
        }
        let order = if s.reverse {
            format!(" ORDER BY {}", clustering_order(table, true))
        } else {
            String::new()
        };
        let cql = format!(
            "SELECT {} FROM {} WHERE {}{order} LIMIT ?",
            select_list(table),
            self.name(table),
            clauses.join(" AND ")
        );
        values.push(Some(CqlValue::Int(
            (s.limit + 1).min(i32::MAX as usize) as i32
        )));
        let stmt = self.prepare(cql).await?;
        let rows = Self::rows(table, self.run(&stmt, values).await?)?;
        super::embedded::page(table, fp, rows, s.limit)
    }

    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        for m in &batch {
            m.validate()?;
        }
        if batch.len() == 1 {
            let (stmt, values) = self.mutation_statement(&batch[0]).await?;
            self.run(&stmt, values).await?;
            return Ok(());
        }
        if batch.is_empty() {
            return Ok(());
        }
        // One partition: an unlogged batch is atomic and isolated already, and
        // skips the batch log.
        let partition = |m: &Mutation| -> Option<(&'static str, Vec<Value>)> {
            match m {
                Mutation::Upsert { row, .. } => {
                    let pk = row.table.partition_key.len();
                    Some((row.table.name, row.key().ok()?[..pk].to_vec()))
                }
                Mutation::Delete { table, key } => {
                    Some((table.name, key.get(..table.partition_key.len())?.to_vec()))
                }
            }
        };
        let first = partition(&batch[0]);
        let single = first.is_some() && batch.iter().all(|m| partition(m) == first);
        let kind = if single {
            BatchType::Unlogged
        } else {
            BatchType::Logged
        };
        self.batch(kind, None, &batch).await?;
        Ok(())
    }

    async fn write_bulk(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        for m in &batch {
            m.validate()?;
        }
        self.write_grouped(batch, write_time_now()).await
    }

    async fn insert_new(
        &self,
        inserts: Vec<(Row, Vec<Mutation>)>,
        heal: Heal,
    ) -> Result<Vec<Option<Row>>, StoreError> {
        let Some(table) = inserts.first().map(|(r, _)| r.table) else {
            return Ok(Vec::new());
        };
        for (row, with) in &inserts {
            if row.table.name != table.name {
                return Err(StoreError::Invalid(
                    "insert_new takes rows of one table".into(),
                ));
            }
            row.validate()?;
            for m in with {
                m.validate()?;
            }
        }
        // Every write below carries the time of this read: a write made after
        // the read (a compare-and-set, a transition, another importer) has a
        // later timestamp and wins every cell it touches, so nothing written
        // here can overwrite it.
        let read_at = write_time_now();
        let keys = inserts
            .iter()
            .map(|(r, _)| r.key())
            .collect::<Result<Vec<_>, _>>()?;
        let found = self.get_many(table, &keys).await?;
        let mut writes = Vec::new();
        for ((row, with), f) in inserts.into_iter().zip(&found) {
            match f {
                None => {
                    writes.push(Mutation::upsert(row));
                    writes.extend(with);
                }
                Some(current) => {
                    let h = heal(current);
                    for m in &h {
                        m.validate()?;
                    }
                    writes.extend(h);
                }
            }
        }
        self.write_grouped(writes, read_at).await?;
        Ok(found)
    }

    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        cas.validate()?;
        let table = cas.row.table;
        let key = cas.row.key()?;
        let ttl = Some(CqlValue::Int(cas.ttl.unwrap_or(0) as i32));
        let (cql, values) = match &cas.condition {
            Condition::NotExists => {
                let marks = vec!["?"; table.width()].join(", ");
                let cql = format!(
                    "INSERT INTO {} ({}) VALUES ({marks}) IF NOT EXISTS USING TTL ?",
                    self.name(table),
                    select_list(table)
                );
                let mut values: Vec<_> = cas.row.values.iter().map(to_cql).collect();
                values.push(ttl);
                (cql, values)
            }
            Condition::Equals(expected) | Condition::Replaces(expected) => {
                let replace = matches!(cas.condition, Condition::Replaces(_));
                let mut sets = Vec::new();
                let mut values = vec![ttl];
                for i in table.key_len()..table.width() {
                    if replace || cas.row.values[i].is_some() {
                        sets.push(format!("{} = ?", table.column(i).name));
                        values.push(to_cql(&cas.row.values[i]));
                    }
                }
                values.extend(key_values(&key));
                let mut conds = Vec::new();
                for (name, v) in expected {
                    conds.push(format!("{name} = ?"));
                    values.push(to_cql(v));
                }
                let cql = format!(
                    "UPDATE {} USING TTL ? SET {} WHERE {} IF {}",
                    self.name(table),
                    sets.join(", "),
                    key_where(table, table.key_len()),
                    conds.join(" AND ")
                );
                (cql, values)
            }
        };
        let stmt = self.prepare(cql).await?;
        let result = match self.execute(&stmt, values).await {
            Ok(r) => r,
            Err(e) if cas_outcome_unknown(&e) => {
                tracing::info!(error = %e, table = table.name, "compare-and-set outcome unknown; settling it with a serial read");
                return self.settle_unknown_cas(&cas, &key).await;
            }
            Err(e) => return Err(Self::failed(&stmt, e)),
        };
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        let (applied,): (bool,) = {
            let mut it = rows
                .rows::<scylla::value::Row>()
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            let first = it
                .next()
                .ok_or_else(|| StoreError::Internal("LWT returned no row".into()))?
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            match first.columns.first() {
                Some(Some(CqlValue::Boolean(b))) => (*b,),
                _ => return Err(StoreError::Internal("LWT returned no [applied]".into())),
            }
        };
        let current = if applied && matches!(cas.condition, Condition::NotExists) {
            Some(cas.row.clone())
        } else if applied {
            // Committed at LOCAL_QUORUM: a quorum read sees it, and takes no
            // part in the Paxos contention a serial read would (and could
            // time out in, leaving the winner told UNAVAILABLE).
            self.get_one(table, &key, false).await?
        } else {
            // The row that beat the condition; under contention the serial
            // read can time out, then a quorum read tells what is committed.
            match self.get_one(table, &key, true).await {
                Err(StoreError::Unavailable(_)) => self.get_one(table, &key, false).await?,
                other => other?,
            }
        };
        Ok(CasOutcome { applied, current })
    }

    async fn scan(
        &self,
        table: &'static Table,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page, StoreError> {
        let fp = super::fnv1a(self.name(table).as_bytes());
        let state = match &after {
            Some(c) => PagingState::new_from_raw_bytes(c.paging_state(fp)?),
            None => PagingState::start(),
        };
        let cql = format!("SELECT {} FROM {}", select_list(table), self.name(table));
        let mut stmt = self.prepare(cql).await?;
        stmt.set_page_size(limit.clamp(1, 5000) as i32);
        metrics::store_request();
        let (result, next) = self
            .session
            .get_session()
            .execute_single_page(&stmt, (), state)
            .await
            .map_err(|e| {
                if after.is_some() {
                    StoreError::BadCursor
                } else {
                    unavailable(e)
                }
            })?;
        let rows = Self::rows(table, result)?;
        let next = match next {
            PagingStateResponse::HasMorePages { state } => {
                state.as_bytes_slice().map(|b| Cursor::paging(fp, b))
            }
            PagingStateResponse::NoMorePages => None,
        };
        Ok(Page {
            rows,
            next,
            cursors: Vec::new(),
        })
    }

    /// Reads one partition of the probe table (`probing`) at LOCAL_QUORUM,
    /// so it answers only when a request of the application could (a system
    /// table is local to the node and answers with every other replica down);
    /// every keyspace has the same replication, so one table stands for all.
    /// A single-partition read, as most of the application's are: a range
    /// read has no speculative retry and waits for a replica that just died.
    /// Without a probe table it asks the node alone (`system.local`).
    async fn ping(&self) -> Result<(), StoreError> {
        let Some(table) = self.probe else {
            let mut stmt = self.prepare("SELECT key FROM system.local".into()).await?;
            stmt.set_request_timeout(Some(PING_TIMEOUT));
            return self.run(&stmt, Vec::new()).await.map(|_| ());
        };
        let pk = table.partition_key.len();
        let cql = format!(
            "SELECT {} FROM {} WHERE {} LIMIT 1",
            table.partition_key[0].name,
            self.name(table),
            key_where(table, pk)
        );
        let mut stmt = self.prepare(cql).await?;
        stmt.set_request_timeout(Some(PING_TIMEOUT));
        let key: Vec<_> = table
            .partition_key
            .iter()
            .map(|c| Some(probe_value(c.ty)))
            .collect();
        self.run(&stmt, key).await.map(|_| ())
    }
}

/// A value of a key column of type `ty` for the health check's read
/// (whether a row has it does not matter).
fn probe_value(ty: ColumnType) -> CqlValue {
    match ty {
        ColumnType::Text => CqlValue::Text("kartei-health-check".into()),
        ColumnType::TextList => CqlValue::List(Vec::new()),
        ColumnType::Int => CqlValue::Int(0),
        ColumnType::BigInt => CqlValue::BigInt(0),
        ColumnType::Double => CqlValue::Double(0.0),
        ColumnType::Boolean => CqlValue::Boolean(false),
        // Cassandra refuses an empty partition key.
        ColumnType::Blob => CqlValue::Blob(vec![0]),
    }
}

/// Splits a .cql file into statements (dropping `--` comments).
pub fn statements(text: &str) -> Vec<String> {
    let without_comments: String = text
        .lines()
        .map(|l| match l.find("--") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    without_comments
        .split(';')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}
