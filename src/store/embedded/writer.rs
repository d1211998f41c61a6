//! Group commit: one writer thread owns every write transaction of the
//! embedded store.
//!
//! Callers (requests, importers, the expiry sweeper) send their write as a
//! [`Job`]. The thread takes the first waiting job, then every job that has
//! arrived meanwhile (up to [`MAX_GROUP_OPS`] row writes), runs them in order
//! inside one redb write transaction and commits it durably (fsync). Only then
//! does each caller get its answer. So the commit interval is the time the
//! previous commit took: under one writer a commit holds one job, under fifty
//! concurrent writers it holds what they sent while the disk was busy, and the
//! fsync cost is shared.
//!
//! Guarantees, each as before:
//! - a job is atomic: its writes are all in the committed transaction or none
//!   are; keys and values are encoded by the caller before the job is sent, so
//!   inside the transaction only the storage itself can fail, and a storage
//!   failure aborts the whole group (every caller in it gets the error, nothing
//!   of it is stored);
//! - jobs are serialised: each sees the writes of the jobs before it, so a
//!   compare-and-set decides on the latest state and two concurrent writers
//!   of one row still get one winner;
//! - an answer means durable: it is sent after the commit returned.

use std::ops::Bound as RBound;
use std::sync::Arc;

use redb::{Database, ReadableTable};
use tokio::sync::{mpsc, oneshot};

use super::{Db, EXPIRY, ROWS, codec, db_err, read_live};
use crate::store::{CasOutcome, Condition, Row, StoreError, Table, Value};

/// Row writes one transaction takes before it commits; the rest wait for the next.
pub(super) const MAX_GROUP_OPS: usize = 200_000;
/// Jobs that may wait for the writer before senders wait too.
pub(super) const QUEUE: usize = 1_024;

/// One row write, encoded by the caller.
pub(super) enum Write {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        expires: u64,
    },
    /// Remove the row with exactly this key.
    Remove { key: Vec<u8> },
    /// Remove every row whose key starts with this prefix.
    RemovePrefix { prefix: Vec<u8> },
    /// Add `by` to a counter column of the row at `key` (whose key
    /// values are `values`): a read and a write in the transaction.
    Add {
        table: &'static Table,
        values: Vec<Value>,
        key: Vec<u8>,
        column: &'static str,
        by: i64,
    },
}

impl Write {
    /// Whether this write changes the row stored under `key`.
    pub(super) fn touches(&self, key: &[u8]) -> bool {
        match self {
            Write::Put { key: k, .. } | Write::Remove { key: k } | Write::Add { key: k, .. } => {
                k == key
            }
            Write::RemovePrefix { prefix } => key.starts_with(prefix),
        }
    }
}

pub(super) struct PreparedCas {
    /// Writes made first, whatever the compare-and-set decides (they never
    /// touch its row, so it decides the same before or after them).
    pub before: Vec<Write>,
    pub key: Vec<u8>,
    pub row: Row,
    pub condition: Condition,
    pub ttl: Option<u32>,
    /// Writes made from the row as written, in the same transaction.
    pub then: Option<crate::store::Heal>,
}

/// A row to insert unless its key holds a live row, with the writes that go
/// with it when it is inserted.
pub(super) struct PreparedInsert {
    pub key: Vec<u8>,
    pub row: Row,
    pub writes: Vec<Write>,
}

pub(super) enum Job {
    Apply(Vec<Write>),
    Cas(PreparedCas),
    /// Rows to insert if absent; for a row found, the writes its heal makes.
    InsertNew(Vec<PreparedInsert>, crate::store::Heal),
    Sweep,
}

impl Job {
    fn weight(&self) -> usize {
        match self {
            Job::Apply(w) => w.len(),
            Job::Cas(c) => 1 + c.before.len(),
            Job::InsertNew(i, _) => i.iter().map(|i| 1 + i.writes.len()).sum(),
            Job::Sweep => 1_000,
        }
    }
}

pub(super) enum Reply {
    Applied,
    Cas(CasOutcome),
    Inserted(Vec<Option<Row>>),
    Swept(usize),
}

struct Pending {
    job: Job,
    reply: oneshot::Sender<Result<Reply, StoreError>>,
}

/// The sending side; dropping the last one ends the thread.
#[derive(Clone)]
pub(super) struct Writer {
    tx: mpsc::Sender<Pending>,
}

impl Writer {
    /// Starts the writer thread over `db`. It ends when every `Writer` is dropped.
    /// `group` false commits each job alone (the benchmarks' reference).
    pub fn start(
        db: Arc<Db>,
        group: bool,
    ) -> std::io::Result<(Writer, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let max_ops = if group { MAX_GROUP_OPS } else { 0 };
        let handle = std::thread::Builder::new()
            .name("kartei-writer".into())
            .spawn(move || run(&db, rx, max_ops))?;
        Ok((Writer { tx }, handle))
    }

    pub async fn send(&self, job: Job) -> Result<Reply, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Pending { job, reply })
            .await
            .map_err(|_| StoreError::Unavailable("the embedded store is closed".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Internal("the embedded writer stopped".into()))?
    }

    /// For callers outside a runtime (the expiry sweep in tests).
    pub fn send_blocking(&self, job: Job) -> Result<Reply, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .blocking_send(Pending { job, reply })
            .map_err(|_| StoreError::Unavailable("the embedded store is closed".into()))?;
        answer
            .blocking_recv()
            .map_err(|_| StoreError::Internal("the embedded writer stopped".into()))?
    }
}

fn run(slot: &Db, mut rx: mpsc::Receiver<Pending>, max_ops: usize) {
    while let Some(first) = rx.blocking_recv() {
        let mut ops = first.job.weight();
        let mut group = vec![first];
        while ops < max_ops {
            match rx.try_recv() {
                Ok(p) => {
                    ops += p.job.weight();
                    group.push(p);
                }
                Err(_) => break,
            }
        }
        crate::kernel::metrics::embedded_commit(group.len());
        let jobs: Vec<&Job> = group.iter().map(|p| &p.job).collect();
        let done = slot.get().and_then(|db| {
            // A panic in a job (a bug) fails its group, not the writer
            // thread: every later write would find the writer gone.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit(&db, &jobs)))
                .unwrap_or_else(|_| {
                    Err(StoreError::Internal(
                        "a write panicked; nothing of its group is stored".into(),
                    ))
                })
                .inspect_err(|e| {
                    // An I/O error is latched by redb: reopen now, so that reads
                    // go on and the next group can commit once the disk has room.
                    if matches!(e, StoreError::Full(_) | StoreError::Unavailable(_)) {
                        let failed = Db::id(&db);
                        drop(db);
                        let _ = slot.recover(Some(failed));
                    }
                })
        });
        match done {
            Ok(replies) => {
                for (p, r) in group.into_iter().zip(replies) {
                    let _ = p.reply.send(r);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, jobs = group.len(), "embedded commit failed; nothing of it is stored");
                for p in group {
                    let _ = p.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Runs `jobs` in one transaction. The outer error aborts them all; an inner
/// error belongs to one job that wrote nothing.
fn commit(db: &Database, jobs: &[&Job]) -> Result<Vec<Result<Reply, StoreError>>, StoreError> {
    let txn = db.begin_write().map_err(db_err)?;
    let mut replies = Vec::with_capacity(jobs.len());
    let mut wrote = false;
    {
        let mut rows = txn.open_table(ROWS).map_err(db_err)?;
        let mut expiry = txn.open_table(EXPIRY).map_err(db_err)?;
        let now = super::now_ms();
        // Puts and removes of consecutive batches wait here and go to the
        // tree in key order (stable: the later of two writes to one key still
        // lands last), which keeps B-tree inserts on the same pages. Anything
        // that reads, or removes a range, writes them out first.
        let mut buffered: Vec<&Write> = Vec::new();
        for job in jobs {
            if !matches!(job, Job::Apply(_)) {
                flush(&mut rows, &mut expiry, &mut buffered)?;
            }
            let reply = match job {
                Job::Apply(writes) => {
                    for w in writes {
                        if let Write::RemovePrefix { .. } | Write::Add { .. } = w {
                            flush(&mut rows, &mut expiry, &mut buffered)?;
                            write(&mut rows, &mut expiry, w)?;
                        } else {
                            buffered.push(w);
                        }
                    }
                    wrote |= !writes.is_empty();
                    Ok(Reply::Applied)
                }
                Job::Cas(cas) => {
                    let (reply, cas_wrote) = run_cas(&mut rows, &mut expiry, cas, now)?;
                    wrote |= cas_wrote;
                    reply
                }
                Job::InsertNew(inserts, heal) => {
                    let mut out = Vec::with_capacity(inserts.len());
                    let mut failed = None;
                    // Whether this job has written: a failure after that
                    // fails the group (its rows must not commit alone); one
                    // before fails this job only.
                    let mut job_wrote = false;
                    for i in inserts {
                        let found = read_live(&rows, i.row.table, &i.key, now);
                        // A heal is prepared before it is written (one that
                        // does not validate is a bug).
                        let healed = match &found {
                            Ok(Some(current)) => super::prepare_all(&heal(current), now),
                            _ => Ok(Vec::new()),
                        };
                        match (found, healed) {
                            (Err(e), _) | (_, Err(e)) => {
                                failed = Some(e);
                                break;
                            }
                            (Ok(Some(current)), Ok(healed)) => {
                                for w in &healed {
                                    write(&mut rows, &mut expiry, w)?;
                                }
                                job_wrote |= !healed.is_empty();
                                out.push(Some(current));
                            }
                            (Ok(None), _) => {
                                for w in &i.writes {
                                    write(&mut rows, &mut expiry, w)?;
                                }
                                job_wrote = true;
                                out.push(None);
                            }
                        }
                    }
                    wrote |= job_wrote;
                    match failed {
                        Some(e) if job_wrote => return Err(e),
                        Some(e) => Err(e),
                        None => Ok(Reply::Inserted(out)),
                    }
                }
                Job::Sweep => {
                    let (removed, entries) = sweep(&mut rows, &mut expiry, now)?;
                    // Entries of rows written again since are removed too:
                    // else the sweep meets the same stale entries forever.
                    wrote |= entries > 0;
                    Ok(Reply::Swept(removed))
                }
            };
            replies.push(reply);
        }
        flush(&mut rows, &mut expiry, &mut buffered)?;
    }
    if wrote {
        txn.commit().map_err(db_err)?;
    } else {
        txn.abort().map_err(db_err)?;
    }
    Ok(replies)
}

/// Runs one compare-and-set job inside the transaction: its bulk first
/// (whatever it decides), then, when it applies, its row and the writes that
/// go with it. The outer error aborts the group; the inner one belongs to
/// this job, which then wrote nothing. Also says whether it wrote.
fn run_cas(
    rows: &mut redb::Table<&[u8], &[u8]>,
    expiry: &mut redb::Table<&[u8], ()>,
    cas: &PreparedCas,
    now: u64,
) -> Result<(Result<Reply, StoreError>, bool), StoreError> {
    let (next, current) = match decide(rows, cas, now) {
        Ok(decided) => decided,
        Err(e) => return Ok((Err(e), false)),
    };
    // The writes that go with it, prepared before anything is written: one
    // that does not validate (a bug) fails this compare-and-set only, not
    // the group.
    let then = match (&next, &cas.then) {
        (Some(next), Some(then)) => match super::prepare_all(&then(next), now) {
            Ok(then) => then,
            Err(e) => return Ok((Err(e), false)),
        },
        _ => Vec::new(),
    };
    // A bulk that goes first, whatever was decided.
    for w in &cas.before {
        write(rows, expiry, w)?;
    }
    let Some(next) = next else {
        let reply = Reply::Cas(CasOutcome {
            applied: false,
            current,
        });
        return Ok((Ok(reply), !cas.before.is_empty()));
    };
    let expires = cas.ttl.map(|t| now + u64::from(t) * 1000).unwrap_or(0);
    let put = Write::Put {
        key: cas.key.clone(),
        value: codec::encode(&next, expires),
        expires,
    };
    write(rows, expiry, &put)?;
    for w in &then {
        write(rows, expiry, w)?;
    }
    let reply = Reply::Cas(CasOutcome {
        applied: true,
        current: Some(next),
    });
    Ok((Ok(reply), true))
}

fn flush(
    rows: &mut redb::Table<&[u8], &[u8]>,
    expiry: &mut redb::Table<&[u8], ()>,
    buffered: &mut Vec<&Write>,
) -> Result<(), StoreError> {
    buffered.sort_by(|a, b| a.key().cmp(b.key()));
    for w in buffered.drain(..) {
        write(rows, expiry, w)?;
    }
    Ok(())
}

impl Write {
    fn key(&self) -> &[u8] {
        match self {
            Write::Put { key, .. } | Write::Remove { key } | Write::Add { key, .. } => key,
            Write::RemovePrefix { prefix } => prefix,
        }
    }
}

fn write(
    rows: &mut redb::Table<&[u8], &[u8]>,
    expiry: &mut redb::Table<&[u8], ()>,
    w: &Write,
) -> Result<(), StoreError> {
    match w {
        Write::Put {
            key,
            value,
            expires,
        } => {
            rows.insert(key.as_slice(), value.as_slice())
                .map_err(db_err)?;
            if *expires != 0 {
                let mut e = expires.to_be_bytes().to_vec();
                e.extend_from_slice(key);
                expiry.insert(e.as_slice(), ()).map_err(db_err)?;
            }
        }
        Write::Remove { key } => {
            rows.remove(key.as_slice()).map_err(db_err)?;
        }
        Write::RemovePrefix { prefix } => {
            let end = crate::store::key::successor(prefix);
            let hi = match &end {
                Some(e) => RBound::Excluded(e.as_slice()),
                None => RBound::Unbounded,
            };
            rows.retain_in::<&[u8], _>((RBound::Included(prefix.as_slice()), hi), |_, _| false)
                .map_err(db_err)?;
        }
        Write::Add {
            table,
            values,
            key,
            column,
            by,
        } => {
            let mut row = match rows.get(key.as_slice()).map_err(db_err)? {
                Some(v) => codec::decode(table, key, v.value())?,
                None => {
                    let mut row = Row::new(table);
                    for (slot, v) in row.values.iter_mut().zip(values) {
                        *slot = Some(v.clone());
                    }
                    row
                }
            };
            let i = table.index_of(column).ok_or_else(|| {
                StoreError::Invalid(format!("{}: no column {column}", table.name))
            })?;
            let n = match &row.values[i] {
                Some(Value::BigInt(n)) => *n,
                _ => 0,
            };
            row.values[i] = Some(Value::BigInt(n.wrapping_add(*by)));
            let value = codec::encode(&row, 0);
            rows.insert(key.as_slice(), value.as_slice())
                .map_err(db_err)?;
        }
    }
    Ok(())
}

/// The row a compare-and-set writes (if it applies) and the row as found.
fn decide(
    rows: &redb::Table<&[u8], &[u8]>,
    cas: &PreparedCas,
    now: u64,
) -> Result<(Option<Row>, Option<Row>), StoreError> {
    let table = cas.row.table;
    let current = read_live(rows, table, &cas.key, now)?;
    Ok(match (&cas.condition, current) {
        (Condition::NotExists, None) => (Some(cas.row.clone()), None),
        (Condition::NotExists, Some(cur)) => (None, Some(cur)),
        // As in CQL, a missing row has only nulls: `IF c = null` applies to it.
        (Condition::Equals(expected) | Condition::Replaces(expected), None)
            if expected.iter().any(|(_, v)| v.is_some()) =>
        {
            (None, None)
        }
        (Condition::Equals(expected) | Condition::Replaces(expected), current) => {
            let replace = matches!(cas.condition, Condition::Replaces(_));
            let cur = current.clone().unwrap_or_else(|| {
                let mut r = Row::new(table);
                r.values[..table.key_len()].clone_from_slice(&cas.row.values[..table.key_len()]);
                r
            });
            if expected.iter().all(|(name, v)| cur.get(name) == v.as_ref()) {
                let mut next = cur;
                for i in table.key_len()..table.width() {
                    if replace || cas.row.values[i].is_some() {
                        next.values[i].clone_from(&cas.row.values[i]);
                    }
                }
                (Some(next), current)
            } else {
                (None, current)
            }
        }
    })
}

/// Removes the due expiry entries (at most 50,000) and the rows still
/// expired among theirs: (rows removed, entries removed).
fn sweep(
    rows: &mut redb::Table<&[u8], &[u8]>,
    expiry: &mut redb::Table<&[u8], ()>,
    now: u64,
) -> Result<(usize, usize), StoreError> {
    let end = now.to_be_bytes();
    let due: Vec<Vec<u8>> = expiry
        .range::<&[u8]>(..&end[..])
        .map_err(db_err)?
        .take(50_000)
        .map(|e| e.map(|(k, _)| k.value().to_vec()))
        .collect::<Result<_, _>>()
        .map_err(db_err)?;
    let mut removed = 0;
    let entries = due.len();
    for entry in due {
        expiry.remove(entry.as_slice()).map_err(db_err)?;
        let row_key = &entry[8..];
        let still_expired = match rows.get(row_key).map_err(db_err)? {
            Some(v) => super::expired(v.value(), now),
            None => false,
        };
        if still_expired {
            rows.remove(row_key).map_err(db_err)?;
            removed += 1;
        }
    }
    Ok((removed, entries))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Cas, Condition, Mutation, Row, Store, StoreError, Value};

    crate::store::table! {
        T: Themes.writer_test
            partition(id: Text)
            columns(v: Text)
    }

    /// A compare-and-set whose follow-up writes do not validate (a bug)
    /// fails alone: the writes grouped with it in one commit are stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bad_follow_up_write_fails_only_its_own_job() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let mut tasks = Vec::new();
        for i in 0..60 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                let row = Row::new(&T).set("id", format!("r{i}")).set("v", "x");
                if i % 10 == 0 {
                    let cas = Cas {
                        row,
                        condition: Condition::NotExists,
                        ttl: None,
                    };
                    // A row without its key does not validate.
                    let then: crate::store::Heal =
                        Arc::new(|_: &Row| vec![Mutation::upsert(Row::new(&T).set("v", "y"))]);
                    s.cas_then(cas, then).await.map(|_| ())
                } else {
                    s.apply(vec![Mutation::upsert(row)]).await
                }
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            let r = t.await.unwrap();
            let stored = store
                .get(&T, &[Value::from(format!("r{i}"))])
                .await
                .unwrap();
            if i % 10 == 0 {
                assert!(matches!(r, Err(StoreError::Invalid(_))), "{i}: {r:?}");
                assert!(stored.is_none(), "{i}: a refused compare-and-set wrote");
            } else {
                assert!(r.is_ok(), "{i}: {r:?}");
                assert!(stored.is_some(), "{i}");
            }
        }
    }
}
