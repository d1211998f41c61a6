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
    Bound, Cas, CasOutcome, ColumnType, Condition, Cursor, Heal, Mutation, Order, Page, Row, Scan,
    Slice, Store, StoreError, Table, Value, check_key, check_slice, slice_fingerprint,
};
use crate::kernel::metrics;

mod schema;
mod values;
mod writes;

pub use schema::statements;
use values::*;
use writes::*;

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

/// A health check gives up after this long, whatever the cluster's own
/// timeouts: `/healthz` answers 503 within it when a quorum is missing.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// Prepared statements kept: the statements derived from every table's
/// declaration (a few per table and operation) fit many times over.
const STATEMENT_CACHE: usize = 4096;

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
            .await
            .map_err(|e| {
                // The driver's own words go to the log, never to the operator.
                tracing::debug!(error = %e, "connecting to the cluster failed");
                anyhow::anyhow!(
                    "cannot reach the Cassandra cluster at {}: no node answered; is it running, and are the --cassandra addresses right? (KARTEI_LOG=debug shows the driver's reason)",
                    nodes.join(",")
                )
            })?;
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
        super::embedded::page(fp, rows, s.limit)
    }

    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        for m in &batch {
            m.validate()?;
        }
        let (adds, batch) = writes::split_counters(batch);
        if let [one] = batch.as_slice() {
            let (stmt, values) = self.mutation_statement(one).await?;
            self.run(&stmt, values).await?;
        } else if !batch.is_empty() {
            // One partition: an unlogged batch is atomic and isolated
            // already, and skips the batch log.
            let partition = |m: &Mutation| -> Option<(&'static str, Vec<Value>)> {
                let (table, key) = m.target().ok()?;
                Some((table.name, key.get(..table.partition_key.len())?.to_vec()))
            };
            let first = partition(&batch[0]);
            let single = first.is_some() && batch.iter().all(|m| partition(m) == first);
            let kind = if single {
                BatchType::Unlogged
            } else {
                BatchType::Logged
            };
            self.batch(kind, None, &batch).await?;
        }
        self.count_once(&adds).await;
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
        // The new rows first, then what goes with them: a process that dies
        // between the two leaves rows that a rerun finds and heals from
        // (their own writes made again from them), never writes that went
        // with a row that is not there, which a rerun would write anew
        // beside them (a query row keyed by a time the rerun sets again).
        let mut rows = Vec::new();
        let mut writes = Vec::new();
        for ((row, with), f) in inserts.into_iter().zip(&found) {
            match f {
                None => {
                    rows.push(Mutation::upsert(row));
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
        self.write_grouped(rows, read_at).await?;
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

    async fn scan(&self, table: &'static Table, scan: Scan) -> Result<Page, StoreError> {
        let Scan { after, limit } = scan;
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
