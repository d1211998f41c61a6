//! Recording jobs: [`Jobs::begin`] writes a job's row and keeps it fresh
//! while it runs ([`Tracked`]); reads list the recent ones; a starting
//! server sweeps the rows of jobs whose process died to `INTERRUPTED`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::model::{JOBS, JobRecord, JobState, MAX_KEPT_LINES, kept, month, new_id};
use crate::kernel::{Clock, parse_time};
use crate::store::{DynStore, Mutation, Slice, StoreError};

/// How often a running job's row is written (its progress and sign of life).
pub const BEAT: Duration = Duration::from_secs(2);
/// A running job whose row has not been written for this long has lost its
/// process: readers see it as `INTERRUPTED`.
pub const STALE: Duration = Duration::from_secs(60);
/// How long a job's record is kept (its row's TTL).
pub const KEPT_FOR: Duration = Duration::from_secs(90 * 24 * 3600);
/// Jobs one read lists at most.
pub const MAX_LISTED: usize = 100;

#[derive(Clone)]
pub struct Jobs {
    store: DynStore,
    clock: Clock,
}

impl Jobs {
    pub fn new(store: DynStore) -> Self {
        Jobs {
            store,
            clock: Clock::system(),
        }
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Records a job as started (by `started_by`, reading `input` of
    /// `bytes_total` bytes when known) and keeps its row fresh until it ends.
    pub async fn begin(
        &self,
        kind: &str,
        started_by: &str,
        input: Option<String>,
        bytes_total: Option<u64>,
    ) -> Result<Tracked, StoreError> {
        let now = self.clock.now();
        let id = new_id(now);
        let record = JobRecord {
            month: super::model::month_of(&id),
            id,
            kind: kind.to_owned(),
            state: JobState::Running,
            started_by: started_by.to_owned(),
            input,
            started_at: self.clock.rfc3339(),
            ended_at: None,
            touched: self.clock.precise(),
            host: crate::kernel::host_name(),
            pid: i32::try_from(std::process::id()).unwrap_or(0),
            bytes_read: 0,
            bytes_total: bytes_total.and_then(|b| i64::try_from(b).ok()),
            error_count: 0,
            errors: Vec::new(),
            result: Vec::new(),
            exit_code: None,
        };
        save(&self.store, &record).await?;
        let shared = Arc::new(Shared {
            record: Mutex::new(record),
            bytes: Arc::new(AtomicU64::new(0)),
            ended: AtomicBool::new(false),
            store: self.store.clone(),
            clock: self.clock.clone(),
        });
        let beating = shared.clone();
        let beat = tokio::spawn(async move {
            loop {
                tokio::time::sleep(BEAT).await;
                let row = beating.fresh();
                if let Err(e) = save(&beating.store, &row).await {
                    tracing::warn!(job = %row.id, error = %e, "a job's progress was not written");
                }
            }
        });
        Ok(Tracked {
            shared,
            beat: beat.abort_handle(),
        })
    }

    /// The most recent jobs, newest first (`first` of them, at most
    /// [`MAX_LISTED`]): this month's and the last.
    pub async fn list(&self, first: usize) -> Result<Vec<JobRecord>, StoreError> {
        let first = first.min(MAX_LISTED);
        let now = self.clock.now();
        let mut out = Vec::new();
        for m in this_and_last_month(now) {
            if out.len() >= first {
                break;
            }
            let page = self
                .store
                .slice(&JOBS, &Slice::partition(vec![m.into()]).limit(first - out.len()))
                .await?;
            out.extend(page.rows.iter().filter_map(JobRecord::from_row));
        }
        Ok(out.into_iter().map(|j| self.as_seen(j)).collect())
    }

    /// One job by its id.
    pub async fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let key = [super::model::month_of(id).into(), id.into()];
        Ok(self
            .store
            .get(&JOBS, &key)
            .await?
            .as_ref()
            .and_then(JobRecord::from_row)
            .map(|j| self.as_seen(j)))
    }

    /// A running job whose process stopped writing is interrupted.
    fn as_seen(&self, mut job: JobRecord) -> JobRecord {
        if job.state == JobState::Running && self.stale(&job) {
            job.state = JobState::Interrupted;
        }
        job
    }

    fn stale(&self, job: &JobRecord) -> bool {
        parse_time(&job.touched).is_none_or(|t| self.clock.now() - t > STALE)
    }

    /// Marks every job still `RUNNING` whose process is gone (on this
    /// machine: no process with its id; anywhere: no sign of life for
    /// [`STALE`]) as `INTERRUPTED`; how many. A starting server runs it.
    pub async fn sweep_interrupted(&self) -> Result<usize, StoreError> {
        let here = crate::kernel::host_name();
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        let now = self.clock.now();
        let mut swept = 0;
        for m in this_and_last_month(now) {
            let slice = Slice::partition(vec![m.into()]).limit(1000);
            let mut pages = std::pin::pin!(crate::store::pages(self.store.as_ref(), &JOBS, slice));
            while let Some(page) = futures::StreamExt::next(&mut pages).await {
                for mut job in page?.rows.iter().filter_map(JobRecord::from_row) {
                    let gone = job.host == here
                        && job.pid != me
                        && !crate::kernel::process_alive(u32::try_from(job.pid).unwrap_or(0));
                    if job.state == JobState::Running && (gone || self.stale(&job)) {
                        job.state = JobState::Interrupted;
                        job.ended_at = Some(self.clock.rfc3339());
                        save(&self.store, &job).await?;
                        swept += 1;
                    }
                }
            }
        }
        Ok(swept)
    }
}

/// The partitions a read looks in.
fn this_and_last_month(now: time::OffsetDateTime) -> [String; 2] {
    let first = now.replace_day(1).unwrap_or(now);
    [month(now), month(first - time::Duration::days(1))]
}

async fn save(store: &DynStore, job: &JobRecord) -> Result<(), StoreError> {
    store
        .apply(vec![Mutation::Upsert {
            row: job.to_row(),
            ttl: u32::try_from(KEPT_FOR.as_secs()).ok(),
        }])
        .await
}

struct Shared {
    record: Mutex<JobRecord>,
    bytes: Arc<AtomicU64>,
    ended: AtomicBool,
    store: DynStore,
    clock: Clock,
}

impl Shared {
    /// The record with its progress and sign of life as of now.
    fn fresh(&self) -> JobRecord {
        let mut r = self.record.lock().unwrap_or_else(|p| p.into_inner());
        r.bytes_read = i64::try_from(self.bytes.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        r.touched = self.clock.precise();
        r.clone()
    }

    fn ended(&self, state: JobState, exit_code: Option<i32>) -> JobRecord {
        self.ended.store(true, Ordering::SeqCst);
        let mut r = self.fresh();
        r.state = state;
        r.exit_code = exit_code;
        r.ended_at = Some(self.clock.rfc3339());
        r
    }
}

/// A running job's record. Ends with [`Tracked::end`]; dropped before that
/// (its task was stopped: the command went away), it is recorded as
/// `CANCELLED`.
pub struct Tracked {
    shared: Arc<Shared>,
    beat: tokio::task::AbortHandle,
}

impl Tracked {
    pub fn id(&self) -> String {
        self.shared.record.lock().unwrap_or_else(|p| p.into_inner()).id.clone()
    }

    /// The counter the job's input reader adds the bytes it read to.
    pub fn bytes(&self) -> Arc<AtomicU64> {
        self.shared.bytes.clone()
    }

    /// The job begins to read its input, of `size` bytes when known
    /// (a handed-over input counted as it arrived; now it counts anew).
    pub fn reading(&self, size: Option<u64>) {
        self.shared.bytes.store(0, Ordering::Relaxed);
        let mut r = self.shared.record.lock().unwrap_or_else(|p| p.into_inner());
        r.bytes_total = size.and_then(|b| i64::try_from(b).ok());
    }

    /// A bad line of the input (the first `MAX_KEPT_LINES` are kept).
    pub fn bad_line(&self, line: &str) {
        let mut r = self.shared.record.lock().unwrap_or_else(|p| p.into_inner());
        r.error_count = r.error_count.saturating_add(1);
        if r.errors.len() < MAX_KEPT_LINES {
            r.errors.push(kept(line));
        }
    }

    /// Bad lines that were counted but not said one by one.
    pub fn more_bad_lines(&self, n: u64) {
        let mut r = self.shared.record.lock().unwrap_or_else(|p| p.into_inner());
        r.error_count = r.error_count.saturating_add(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Another line of what the job says (the last `MAX_KEPT_LINES` are kept).
    pub fn said(&self, line: &str) {
        let mut r = self.shared.record.lock().unwrap_or_else(|p| p.into_inner());
        if r.result.len() >= MAX_KEPT_LINES {
            r.result.remove(0);
        }
        r.result.push(kept(line));
    }

    /// Records how the job ended.
    pub async fn end(&self, state: JobState, exit_code: Option<i32>) -> Result<(), StoreError> {
        self.beat.abort();
        let record = self.shared.ended(state, exit_code);
        save(&self.shared.store, &record).await
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.beat.abort();
        if self.shared.ended.load(Ordering::SeqCst) {
            return;
        }
        let record = self.shared.ended(JobState::Cancelled, None);
        let store = self.shared.store.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = save(&store, &record).await {
                    tracing::warn!(job = %record.id, error = %e, "a cancelled job was not recorded as such");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_look_in_this_month_and_the_one_before() {
        let t = time::macros::datetime!(2027-03-01 10:00 UTC);
        assert_eq!(this_and_last_month(t), ["2027-03", "2027-02"]);
        let t = time::macros::datetime!(2027-01-31 23:59 UTC);
        assert_eq!(this_and_last_month(t), ["2027-01", "2026-12"]);
    }
}
