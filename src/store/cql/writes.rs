//! Writing to the cluster: grouped batches of one partition each (many in flight) for bulk writes, logged batches for atomic ones, and settling a compare-and-set whose outcome the cluster left unknown.

use super::*;

/// A compare-and-set whose proposal some replicas may have accepted: Paxos
/// timed out (a write timeout of type CAS, e.g. under contention with a
/// replica down) or the node says the outcome is unknown. It may yet be the
/// value that stands.
pub(super) fn cas_outcome_unknown(e: &scylla::errors::ExecutionError) -> bool {
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

/// How long a compare-and-set of unknown outcome may spend on serial reads
/// to settle it (see `CqlStore::settle_unknown_cas`).
pub(super) const SETTLE_BUDGET: Duration = Duration::from_millis(600);

/// Statements per unlogged batch of a bulk write (every such batch holds
/// rows of one partition: Cassandra applies it as one mutation).
pub(super) const BULK_BATCH_STATEMENTS: usize = 256;

/// About this many bytes per unlogged batch of a bulk write. Cassandra's
/// `batch_size_warn_threshold` (5 KiB) and `batch_size_fail_threshold`
/// (50 KiB) apply only to batches spanning partitions (CASSANDRA-8825,
/// -10876), so a one-partition batch may be larger; staying under 50 KiB
/// keeps it under the fail threshold of servers that count it anyway. Raised
/// from 32 statements / 4 KiB: import-vocabulary, whose search rows share
/// partitions, went from 2,317-2,367 to 2,496-2,711 keywords/s on the test
/// node (A/B in one session, 2026-12-04).
pub(super) const BULK_BATCH_BYTES: usize = 48 << 10;

/// Batches of a bulk write in flight at once.
pub(super) const BULK_IN_FLIGHT: usize = 64;

impl CqlStore {
    /// Decides a compare-and-set whose outcome the cluster left unknown: a
    /// read at LOCAL_SERIAL finishes any proposal in flight, so the row it
    /// returns is the decided one. The compare-and-set applied if that row
    /// holds every value it wrote. Callers make proposals tell apart (a
    /// transition writes its time to the nanosecond), so an identical
    /// concurrent proposal is not taken for this one. If it did not apply and
    /// its condition still holds, nothing was decided: UNAVAILABLE (try again),
    /// not a conflict.
    pub(super) async fn settle_unknown_cas(
        &self,
        cas: &Cas,
        key: &[Value],
    ) -> Result<CasOutcome, StoreError> {
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

    pub(super) async fn mutation_statement(
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
            Mutation::Add {
                table,
                key,
                column,
                by,
            } => {
                let cql = format!(
                    "UPDATE {} SET {column} = {column} + ? WHERE {}",
                    self.name(table),
                    key_where(table, key.len())
                );
                let mut values = vec![Some(CqlValue::Counter(scylla::value::Counter(*by)))];
                values.extend(key_values(key));
                Ok((self.prepare(cql).await?, values))
            }
        }
    }

    /// Sends the counter updates `adds` once, summed per counter, in counter
    /// batches of at most [`COUNTER_BATCH`], after the writes they go with
    /// have landed. Never retried (a counter update
    /// is not idempotent: a retry after a timeout may count twice), and a
    /// failure is not the caller's: its other writes stand, the counts may
    /// be short until `repair-views` recomputes them (cql/README.md,
    /// "Counters"), and `kartei_store_counter_updates_unsure` says so.
    pub(super) async fn count_once(&self, adds: &[Mutation]) {
        // An import chunk adds one to the same few counters a thousand
        // times: summed first, it is a handful of updates.
        let adds = coalesced(adds);
        for chunk in adds.chunks(COUNTER_BATCH) {
            let sent = if let [one] = chunk {
                match self.mutation_statement(one).await {
                    Ok((stmt, values)) => self.run(&stmt, values).await.map(|_| ()),
                    Err(e) => Err(e),
                }
            } else {
                self.batch(BatchType::Counter, None, chunk).await
            };
            if let Err(e) = sent {
                metrics::counter_updates_unsure(chunk.len());
                tracing::warn!(error = %e, updates = chunk.len(), "counter updates failed or timed out; repair-views recomputes the counts");
            }
        }
    }

    /// Writes `batch` as unlogged batches, one per partition (so the driver
    /// routes each to a replica of its partition) and at most
    /// [`BULK_BATCH_STATEMENTS`] statements or about [`BULK_BATCH_BYTES`] each,
    /// [`BULK_IN_FLIGHT`] at a time, all at write time `at` (microseconds).
    /// Each partition's batch is atomic; the whole is not.
    pub(super) async fn write_grouped(
        &self,
        batch: Vec<Mutation>,
        at: i64,
    ) -> Result<(), StoreError> {
        let (adds, batch) = split_counters(batch);
        let mut groups: std::collections::HashMap<(String, Vec<u8>), Vec<Mutation>> =
            std::collections::HashMap::new();
        for m in batch {
            let (table, key) = m.target()?;
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
        self.count_once(&adds).await;
        Ok(())
    }

    /// One batch of `ms` of `kind`, at write time `at` (else the server's).
    pub(super) async fn batch(
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
}

/// Counter updates one counter batch carries at most.
const COUNTER_BATCH: usize = 100;

/// `adds` with the updates of one counter summed into one (in the order of
/// each counter's first update), those that sum to nothing left out.
pub(super) fn coalesced(adds: &[Mutation]) -> Vec<Mutation> {
    let mut out: Vec<Mutation> = Vec::new();
    let mut at: std::collections::HashMap<(&'static str, &'static str, Vec<u8>), usize> =
        std::collections::HashMap::new();
    for m in adds {
        let Mutation::Add {
            table,
            key,
            column,
            by,
        } = m
        else {
            continue;
        };
        let id = (
            table.name,
            *column,
            serde_json::to_vec(key).unwrap_or_default(),
        );
        match at.get(&id) {
            Some(&i) => {
                if let Mutation::Add { by: sum, .. } = &mut out[i] {
                    *sum = sum.wrapping_add(*by);
                }
            }
            None => {
                at.insert(id, out.len());
                out.push(m.clone());
            }
        }
    }
    out.retain(|m| !matches!(m, Mutation::Add { by: 0, .. }));
    out
}

/// The counter updates of `batch` apart from its other writes (Cassandra
/// keeps counters out of other batches), each in its order.
pub(super) fn split_counters(batch: Vec<Mutation>) -> (Vec<Mutation>, Vec<Mutation>) {
    batch
        .into_iter()
        .partition(|m| matches!(m, Mutation::Add { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ColumnType::{Counter, Text};
    use crate::store::{Keyspace, Order, Table, col};

    static COUNTS: Table = Table {
        keyspace: Keyspace::Themes,
        name: "counts",
        partition_key: &[col("p", Text)],
        clustering: &[(col("c", Text), Order::Asc)],
        columns: &[col("n", Counter)],
    };

    fn add(c: &str, by: i64) -> Mutation {
        Mutation::Add {
            table: &COUNTS,
            key: vec!["p".into(), c.into()],
            column: "n",
            by,
        }
    }

    fn sums(ms: &[Mutation]) -> Vec<(String, i64)> {
        ms.iter()
            .map(|m| match m {
                Mutation::Add { key, by, .. } => (format!("{:?}", key[1]), *by),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn a_counters_updates_are_summed_and_nothing_is_dropped() {
        let adds: Vec<Mutation> = (0..1000)
            .map(|_| add("a", 1))
            .chain([add("b", -1), add("c", 2), add("b", 1)])
            .collect();
        let c = coalesced(&adds);
        assert_eq!(
            sums(&c),
            [("Text(\"a\")".into(), 1000), ("Text(\"c\")".into(), 2)]
        );
        assert!(coalesced(&[]).is_empty());
    }
}
