//! A domain's fetches recorded while its next request goes out. Politeness
//! is about the site: one request at a time, spaced by the delay. What a
//! fetch leaves behind (its binary stored and scaled, its history written)
//! is our own work and needs the site no more once the body is off the
//! connection, so at a short spacing a few of those records run beside the
//! next requests instead of before them.
//!
//! What that changes: when a process dies, the bodies it had read but not
//! yet recorded (at most [`RECORDS_IN_FLIGHT`] per domain) are fetched again
//! by whoever takes the domain over, besides the request that was in flight.
//! At a spacing of [`PIPELINE_BELOW`] or more each record is written before
//! the next request, as the records then have the time anyway.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::kernel::error::{ApiError, ApiResult};

/// At most this many of one domain's fetches are being recorded at once.
pub(super) const RECORDS_IN_FLIGHT: usize = 8;

/// The spacing of requests below which a fetch's record runs beside the
/// next request.
pub(super) const PIPELINE_BELOW: Duration = Duration::from_millis(50);

/// Whether a fetch at this spacing is recorded beside the next request.
pub(super) fn pipelined(spacing: Duration) -> bool {
    spacing < PIPELINE_BELOW
}

/// The records of one domain's fetches that are being written.
#[derive(Default)]
pub(super) struct Recording {
    tasks: VecDeque<JoinHandle<ApiResult<()>>>,
}

impl Recording {
    /// Waits for the oldest records while [`RECORDS_IN_FLIGHT`] are being
    /// written: called before a request goes out, so that its body is read
    /// on at once and never waits for a record's turn. A failed record's
    /// error comes back here (or from [`Recording::finish`]).
    pub(super) async fn ready(&mut self) -> ApiResult<()> {
        while self.tasks.len() >= RECORDS_IN_FLIGHT {
            if let Some(oldest) = self.tasks.pop_front() {
                joined(oldest.await)?;
            }
        }
        Ok(())
    }

    /// Starts a record (after [`Recording::ready`]) in a task of its own: it
    /// runs on while the fetcher waits for the site, and it is not dropped
    /// half-written when the fetcher stops.
    pub(super) fn start(&mut self, record: impl Future<Output = ApiResult<()>> + Send + 'static) {
        self.tasks.push_back(tokio::spawn(record));
    }

    /// Waits for every record; the first failure, after all have ended (the
    /// others are logged).
    pub(super) async fn finish(&mut self) -> ApiResult<()> {
        let mut first = Ok(());
        while let Some(task) = self.tasks.pop_front() {
            match joined(task.await) {
                Err(e) if first.is_ok() => first = Err(e),
                Err(e) => tracing::warn!(error = e.message(), "crawl: recording a fetch failed"),
                Ok(()) => {}
            }
        }
        first
    }
}

fn joined(r: Result<ApiResult<()>, tokio::task::JoinError>) -> ApiResult<()> {
    r.unwrap_or_else(|e| {
        tracing::error!(error = %e, "crawl: recording a fetch panicked");
        Err(ApiError::Internal)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn only_a_short_spacing_records_beside_the_next_request() {
        assert!(pipelined(Duration::ZERO));
        assert!(pipelined(Duration::from_millis(49)));
        assert!(!pipelined(PIPELINE_BELOW));
        assert!(!pipelined(Duration::from_secs(1)));
    }

    #[tokio::test]
    async fn at_most_so_many_records_run_at_once_and_each_ends_before_finish_returns() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let mut recording = Recording::default();
        for _ in 0..20 {
            let (running, most, done) = (running.clone(), most.clone(), done.clone());
            recording.ready().await.unwrap();
            recording.start(async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
            assert!(recording.tasks.len() <= RECORDS_IN_FLIGHT);
        }
        recording.finish().await.unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 20);
        assert!(most.load(Ordering::SeqCst) <= RECORDS_IN_FLIGHT);
    }

    #[tokio::test]
    async fn a_failed_record_is_reported_after_the_others_have_ended() {
        let done = Arc::new(AtomicUsize::new(0));
        let mut recording = Recording::default();
        recording.start(async { Err(ApiError::Unavailable) });
        let d = done.clone();
        recording.start(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            d.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        assert!(matches!(
            recording.finish().await,
            Err(ApiError::Unavailable)
        ));
        assert_eq!(done.load(Ordering::SeqCst), 1);
        assert!(recording.tasks.is_empty());
    }
}
