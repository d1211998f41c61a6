//! The tail: every instance reads the last moments of the feed while anyone listens and broadcasts what it has not sent yet; drains the outbox where someone listens.

use super::*;

/// The change feed's tail: one pass a unit of work.
pub(super) struct TailWorker {
    events: Events,
    every: Duration,
    drained: Drained,
    /// Drains run where someone may want their events: the first pass with
    /// a subscriber (after a restart, the reconnected ones) and every
    /// `DRAIN_EVERY` while there is one.
    last_drain: Option<Instant>,
    /// The ids sent that a later read of the window may find again.
    sent: BTreeSet<String>,
    upto: String,
}

impl Events {
    /// Starts the tail (`TailWorker`): while anyone listens, every `every`
    /// or at once after a local write, it reads the last `lag` of events and
    /// sends the ones not sent before, in id order, and drains the outbox on
    /// its first pass with a listener and every `DRAIN_EVERY` while anyone
    /// listens. It runs until `workers().stop()` (or the process ends).
    pub fn spawn_tail(&self, every: Duration) {
        self.workers.spawn(TailWorker {
            events: self.clone(),
            every,
            drained: Drained::default(),
            last_drain: None,
            sent: BTreeSet::new(),
            upto: String::new(),
        });
    }

    /// The tail, as the admin sees it.
    pub fn workers(&self) -> &Workers {
        &self.workers
    }
}

#[async_trait::async_trait]
impl Worker for TailWorker {
    fn name(&self) -> String {
        "assignment-feed-tail".into()
    }

    async fn work(&mut self) -> ApiResult<WorkerState> {
        let events = &self.events;
        if events.tx.receiver_count() == 0 {
            self.sent.clear();
            return Ok(WorkerState::Idle);
        }
        if self.last_drain.is_none_or(|at| at.elapsed() >= DRAIN_EVERY) {
            events.drain_or_log(&mut self.drained).await;
            self.last_drain = Some(Instant::now());
        }
        let now = events.now_ms();
        let lag = events.lag_ms();
        let fresh = events.read(now - lag, now + lag).await?;
        let fresh: Vec<Event> = fresh
            .into_iter()
            .filter(|e| !self.sent.contains(&e.id))
            .collect();
        if let Some(newest) = fresh.iter().map(|e| &e.id).max()
            && *newest > self.upto
        {
            self.upto = newest.clone();
        }
        let pass = Arc::new(Pass {
            read_at: Instant::now(),
            window_from: now - lag,
            upto: self.upto.clone(),
        });
        for event in fresh {
            self.sent.insert(event.id.clone());
            let _ = events.tx.send(Live {
                event: Arc::new(event),
                pass: pass.clone(),
            });
        }
        // What is older than the window is never read again.
        self.sent = self.sent.split_off(&floor_id(now - 2 * lag));
        Ok(WorkerState::Idle)
    }

    async fn wait_for_work(&mut self) {
        tokio::select! {
            _ = self.events.poke.notified() => {}
            _ = tokio::time::sleep(self.every) => {}
        }
    }
}
