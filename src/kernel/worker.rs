//! One lifecycle for every background loop (the scaling worker, the
//! collector, the crawler's dispatcher and announcer, the change feed's tail,
//! the suggestion metrics): a [`Worker`] does one unit of work at a time and
//! says whether more is waiting; [`Workers`] runs each in a task, waits for
//! work when it is idle, backs off after an error, records each worker's
//! state, runs and last error (for /metrics and the admin's
//! `backgroundWorkers` query), and stops them all when told to or when the
//! service that owns them is dropped. Modelled on Garage's background runner.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::kernel::error::ApiError;

/// What a worker's last unit of work found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerState {
    /// More work is waiting: run again at once.
    Busy,
    /// Nothing to do: wait for work.
    Idle,
    /// The worker is finished (its service is gone).
    Done,
}

/// A background loop, one unit of work at a time.
#[async_trait::async_trait]
pub trait Worker: Send + 'static {
    /// Its name in the statuses and the metrics.
    fn name(&self) -> String;
    /// One unit of work.
    async fn work(&mut self) -> Result<WorkerState, ApiError>;
    /// Waits until work may be there (a wake-up or the next pass); also the
    /// pause after an error.
    async fn wait_for_work(&mut self);
}

/// A worker whose unit of work is one pass over a service it holds weakly:
/// done once the service is gone; between passes it waits `every`, or less
/// when `wake` is notified.
pub struct Passes<S, F> {
    pub name: &'static str,
    pub service: std::sync::Weak<S>,
    pub wake: Option<Arc<tokio::sync::Notify>>,
    pub every: Duration,
    pub pass: F,
}

#[async_trait::async_trait]
impl<S, F> Worker for Passes<S, F>
where
    S: Send + Sync + 'static,
    F: FnMut(Arc<S>) -> futures::future::BoxFuture<'static, Result<(), ApiError>> + Send + 'static,
{
    fn name(&self) -> String {
        self.name.into()
    }

    async fn work(&mut self) -> Result<WorkerState, ApiError> {
        let Some(service) = self.service.upgrade() else {
            return Ok(WorkerState::Done);
        };
        (self.pass)(service).await?;
        Ok(WorkerState::Idle)
    }

    async fn wait_for_work(&mut self) {
        let woken = async {
            match &self.wake {
                Some(wake) => wake.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(self.every) => {}
        }
    }
}

/// What one worker is doing, as the admin sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerStatus {
    pub name: String,
    /// `busy`, `idle`, `failing` (its last unit failed) or `done`.
    pub state: &'static str,
    /// Units of work done.
    pub runs: u64,
    /// Units that failed.
    pub errors: u64,
    pub last_error: Option<String>,
    /// When the last unit failed (RFC 3339).
    pub last_error_at: Option<String>,
}

type Statuses = Arc<Mutex<BTreeMap<String, WorkerStatus>>>;

/// The workers of one service. They stop when it is dropped (the last
/// handle), or at [`Workers::stop`].
#[derive(Clone)]
pub struct Workers {
    statuses: Statuses,
    stop: Arc<tokio::sync::watch::Sender<bool>>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Default for Workers {
    fn default() -> Self {
        Workers {
            statuses: Statuses::default(),
            stop: Arc::new(tokio::sync::watch::channel(false).0),
            tasks: Arc::default(),
        }
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.statuses()).finish()
    }
}

impl Workers {
    /// Runs `worker` in a task of its own until it is done or told to stop.
    pub fn spawn(&self, mut worker: impl Worker) {
        let name = worker.name();
        let statuses = self.statuses.clone();
        let mut stop = self.stop.subscribe();
        record(&statuses, &name, |s| s.state = "idle");
        let task = tokio::spawn(async move {
            loop {
                if *stop.borrow() {
                    break;
                }
                let outcome = tokio::select! {
                    r = worker.work() => r,
                    _ = stop.changed() => break,
                };
                let wait = match outcome {
                    Ok(WorkerState::Busy) => {
                        record(&statuses, &name, |s| {
                            s.runs += 1;
                            s.state = "busy";
                        });
                        tokio::task::yield_now().await;
                        false
                    }
                    Ok(WorkerState::Idle) => {
                        record(&statuses, &name, |s| {
                            s.runs += 1;
                            s.state = "idle";
                        });
                        true
                    }
                    Ok(WorkerState::Done) => break,
                    Err(e) => {
                        tracing::warn!(worker = %name, error = e.message(), "a background worker's pass failed");
                        crate::kernel::metrics::worker_error(&name);
                        record(&statuses, &name, |s| {
                            s.runs += 1;
                            s.errors += 1;
                            s.state = "failing";
                            s.last_error = Some(e.message());
                            s.last_error_at = Some(crate::kernel::Clock::system().rfc3339());
                        });
                        true
                    }
                };
                if wait {
                    tokio::select! {
                        () = worker.wait_for_work() => {}
                        _ = stop.changed() => break,
                    }
                }
            }
            record(&statuses, &name, |s| s.state = "done");
        });
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
    }

    /// Every worker's status, by name.
    pub fn statuses(&self) -> Vec<WorkerStatus> {
        self.statuses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Tells every worker to stop after its current unit, and waits up to
    /// `within` for them (the rest are cut off).
    pub async fn stop(&self, within: Duration) {
        let _ = self.stop.send(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(within, all).await.is_err() {
            tracing::warn!("background workers still running at shutdown were cut off");
        }
    }
}

fn record(statuses: &Statuses, name: &str, change: impl FnOnce(&mut WorkerStatus)) {
    let mut all = statuses.lock().unwrap_or_else(|p| p.into_inner());
    let status = all.entry(name.to_owned()).or_insert_with(|| WorkerStatus {
        name: name.to_owned(),
        state: "idle",
        runs: 0,
        errors: 0,
        last_error: None,
        last_error_at: None,
    });
    change(status);
    crate::kernel::metrics::worker_state(name, status.state);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Fails its second unit, is busy for its first three, then idle.
    struct Counting {
        done: Arc<AtomicUsize>,
        woken: Arc<tokio::sync::Notify>,
    }

    #[async_trait::async_trait]
    impl Worker for Counting {
        fn name(&self) -> String {
            "counting".into()
        }
        async fn work(&mut self) -> Result<WorkerState, ApiError> {
            let n = self.done.fetch_add(1, Ordering::SeqCst) + 1;
            match n {
                2 => Err(ApiError::bad_input("the second unit fails")),
                1 | 3 => Ok(WorkerState::Busy),
                _ => Ok(WorkerState::Idle),
            }
        }
        async fn wait_for_work(&mut self) {
            self.woken.notified().await;
        }
    }

    #[tokio::test]
    async fn a_worker_runs_records_its_errors_waits_when_idle_and_stops() {
        let workers = Workers::default();
        let done = Arc::new(AtomicUsize::new(0));
        let woken = Arc::new(tokio::sync::Notify::new());
        workers.spawn(Counting {
            done: done.clone(),
            woken: woken.clone(),
        });
        // Unit 2 failed: the worker waits for work, as it does when idle.
        while done.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(done.load(Ordering::SeqCst), 2);
        let s = &workers.statuses()[0];
        assert_eq!((s.state, s.errors), ("failing", 1));
        assert_eq!(s.last_error.as_deref(), Some("the second unit fails"));
        woken.notify_one();
        while done.load(Ordering::SeqCst) < 4 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(workers.statuses()[0].state, "idle");
        workers.stop(Duration::from_secs(5)).await;
        assert_eq!(workers.statuses()[0].state, "done");
    }

    #[tokio::test]
    async fn workers_stop_when_their_owner_is_dropped() {
        let workers = Workers::default();
        let done = Arc::new(AtomicUsize::new(0));
        workers.spawn(Counting {
            done: done.clone(),
            woken: Arc::new(tokio::sync::Notify::new()),
        });
        let statuses = workers.statuses.clone();
        drop(workers);
        for _ in 0..100 {
            if statuses.lock().unwrap().values().all(|s| s.state == "done") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the worker ran on after its owner was dropped");
    }
}
