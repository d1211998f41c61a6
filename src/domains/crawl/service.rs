//! The crawl service's handle: its settings, what one instance holds (its
//! fetcher token, its slots, the domains it crawls now, the robots cache)
//! and the loops [`Crawl::spawn`] starts. The work the loops do lives beside
//! it: `dispatch`, `claims`, `fetcher`, `outcomes`; the operators' reads and
//! levers in `admin`.
//!
//! Shared nothing but the store: any number of instances run a dispatcher and
//! fetchers; `state` says how they take turns with a domain.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;

use super::claims::heartbeat_every;
pub use super::links::{CrawlFetch, Links};
use super::model::fixed_time;
use super::robots::RobotsCache;
use crate::domains::binaries::service::Binaries;
use crate::domains::web::Fetcher;
use crate::kernel::Clock;
use crate::kernel::error::ApiResult;
use crate::kernel::worker::{Passes, Worker, WorkerState};
use crate::store::{Cursor, DynStore};

#[derive(Clone, Debug)]
pub struct CrawlConfig {
    /// Least time between two requests to one domain.
    pub delay: Duration,
    /// A fetched link is due again this long after its last fetch.
    pub recrawl_after: Duration,
    /// The TTL of a fetcher's `active_fetchers` row (refreshed at 3/4 of it).
    pub claim_ttl: Duration,
    /// Domains one instance crawls at once.
    pub domains: usize,
    /// How often the dispatcher and the fetchers look for work.
    pub pass: Duration,
    /// How often the dispatcher re-examines idle domains and re-writes the state table.
    pub sweep: Duration,
    /// The longest Crawl-delay or Retry-After honoured; more stops the segment.
    pub max_wait: Duration,
    /// How long a fetcher keeps one domain: when the turn is over, or the
    /// next request to the domain could not go out within it (a long
    /// Crawl-delay), the domain goes back to READY with the rest of its
    /// segment and the slot goes to a domain that is due.
    pub turn: Duration,
}

impl Default for CrawlConfig {
    fn default() -> Self {
        CrawlConfig {
            delay: Duration::from_millis(1000),
            recrawl_after: Duration::from_secs(30 * 86_400),
            claim_ttl: Duration::from_secs(15 * 60),
            domains: 8,
            pass: Duration::from_secs(2),
            sweep: Duration::from_secs(600),
            max_wait: Duration::from_secs(600),
            turn: Duration::from_secs(300),
        }
    }
}

#[derive(Clone)]
pub struct Crawl {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) store: DynStore,
    pub(super) links: Links,
    pub(super) binaries: Binaries,
    pub(super) fetcher: Fetcher,
    pub(super) config: CrawlConfig,
    /// This process's fetcher token (its `active_fetchers` row).
    pub(super) token: String,
    pub(super) robots: RobotsCache,
    pub(super) slots: Arc<tokio::sync::Semaphore>,
    /// Domains this process crawls now.
    pub(super) crawling: Mutex<HashSet<String>>,
    /// Where the last claim pass stopped reading each priority's READY
    /// domains: the next pass goes on from there, so every READY domain is
    /// looked at in turn however many there are.
    pub(super) claim_from: Mutex<HashMap<i32, Cursor>>,
    /// Requests for links this service sent (robots.txt not counted).
    pub(super) fetched: AtomicU64,
    pub(super) clock: Clock,
    /// The announcer and the dispatcher, once started.
    pub(super) workers: crate::kernel::worker::Workers,
    /// When this fetcher's announcement was last written (none yet).
    pub(super) announced: Mutex<Option<std::time::Instant>>,
}

impl Crawl {
    pub fn new(
        store: DynStore,
        links: Links,
        binaries: Binaries,
        fetcher: Fetcher,
        config: CrawlConfig,
    ) -> Self {
        Crawl {
            inner: Arc::new(Inner {
                store,
                links,
                binaries,
                fetcher,
                slots: Arc::new(tokio::sync::Semaphore::new(config.domains.max(1))),
                config,
                token: uuid_v4(),
                robots: RobotsCache::default(),
                crawling: Mutex::default(),
                claim_from: Mutex::default(),
                fetched: Default::default(),
                clock: Clock::system(),
                workers: Default::default(),
                announced: Mutex::default(),
            }),
        }
    }

    pub(super) fn store(&self) -> &DynStore {
        &self.inner.store
    }

    pub fn token(&self) -> &str {
        &self.inner.token
    }

    /// Requests for links this service has sent.
    pub fn fetched(&self) -> u64 {
        self.inner.fetched.load(Ordering::Relaxed)
    }

    pub(super) fn now(&self) -> String {
        fixed_time(self.inner.clock.now())
    }

    /// Runs the dispatcher and the fetchers until the service is dropped:
    /// announces this fetcher (TTL row, refreshed at 3/4 of it), and every
    /// pass (or when a link is wanted) dispatches PENDING domains, frees dead
    /// claims and claims READY domains while slots are free.
    pub fn spawn(&self) {
        // The announcement has a worker of its own: a slow pass must never
        // let it expire (another instance would take this one's domains).
        let workers = &self.inner.workers;
        workers.spawn(Passes {
            name: "crawl-announcer",
            service: Arc::downgrade(&self.inner),
            wake: None,
            every: heartbeat_every(self.inner.config.claim_ttl),
            pass: |inner| async move { Crawl { inner }.announce().await }.boxed(),
        });
        workers.spawn(Dispatcher {
            service: Arc::downgrade(&self.inner),
            wake: self.inner.links.wake.clone(),
            pass: self.inner.config.pass,
            swept: None,
        });
    }

    /// The announcer and the dispatcher, as the admin sees them.
    pub fn workers(&self) -> &crate::kernel::worker::Workers {
        &self.inner.workers
    }
}

/// Every pass (or when a link is wanted): dispatches PENDING domains (all of
/// them every `sweep`), frees dead claims and claims READY domains while
/// slots are free.
struct Dispatcher {
    service: std::sync::Weak<Inner>,
    wake: Arc<tokio::sync::Notify>,
    pass: std::time::Duration,
    swept: Option<tokio::time::Instant>,
}

#[async_trait::async_trait]
impl Worker for Dispatcher {
    fn name(&self) -> String {
        "crawl-dispatcher".into()
    }

    async fn work(&mut self) -> ApiResult<WorkerState> {
        let Some(inner) = self.service.upgrade() else {
            return Ok(WorkerState::Done);
        };
        let this = Crawl { inner };
        let sweep = self
            .swept
            .is_none_or(|s| s.elapsed() >= this.inner.config.sweep);
        // A failed dispatch still lets the claims run; the first failure is
        // the pass's error.
        let dispatched = this.dispatch_pass(sweep).await;
        if dispatched.is_ok() && sweep {
            self.swept = Some(tokio::time::Instant::now());
        }
        let claimed = this.claim_pass().await;
        dispatched?;
        claimed?;
        Ok(WorkerState::Idle)
    }

    async fn wait_for_work(&mut self) {
        tokio::select! {
            _ = self.wake.notified() => {}
            _ = tokio::time::sleep(self.pass) => {}
        }
    }
}

/// A random (version 4) UUID as text: a fetcher's or a dispatch's token.
pub fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the system's random source");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_a_version_4_uuid_and_never_the_zero_one() {
        let a = uuid_v4();
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(matches!(a.as_bytes()[19], b'8' | b'9' | b'a' | b'b'), "{a}");
        assert_ne!(a, super::super::model::ZERO);
        assert_ne!(a, uuid_v4());
    }
}
