//! Claims and heartbeats: a fetcher announces itself with a TTL row, claims
//! READY domains by compare-and-set while it has slots, and a claim (or a
//! dispatcher's look) whose holder stopped is freed for another instance.

use std::collections::HashMap;
use std::sync::MutexGuard;
use std::time::Duration;

use time::OffsetDateTime;

use super::model::*;
use super::service::Crawl;
use super::state::{domain_set, transition};
use crate::kernel::error::ApiResult;
use crate::kernel::parse_time;
use crate::store::{Cursor, Mutation, Page, Row, Value};

/// READY domains a claim pass reads at a time, and pages at most per
/// priority and pass.
const CLAIM_PAGE: usize = 100;
const CLAIM_PAGES: usize = 5;

/// How often a fetcher re-writes its `active_fetchers` row: four times per
/// TTL, so a slow store or a busy runtime never lets a live one expire.
pub(super) fn heartbeat_every(claim_ttl: Duration) -> Duration {
    claim_ttl / 4
}

/// The TTL of the `active_fetchers` row, in whole seconds (at least one).
fn announcement_ttl(claim_ttl: Duration) -> u32 {
    claim_ttl.as_secs().max(1) as u32
}

/// Whether a domain left DISPATCHING by a dispatcher that stopped may be
/// taken over: its look started a claim TTL ago (or at no known time).
pub(super) fn dispatch_abandoned(
    info: &DomainInfo,
    claim_ttl: Duration,
    now: OffsetDateTime,
) -> bool {
    info.dispatch_time
        .as_deref()
        .and_then(parse_time)
        .is_none_or(|t| t + claim_ttl <= now)
}

/// Whether this fetcher may try to claim a READY domain: dispatched, held
/// by nobody, and not one this process crawls already.
fn claimable(info: &DomainInfo, crawling_here: bool) -> bool {
    !crawling_here && info.dispatched && info.claim_token == ZERO
}

/// The domains to claim, of `candidates` with their next request's time
/// (ms since the epoch; none: any time): those whose next request may go
/// out at `now_ms`, the one waiting longest first, by name within a time.
fn claim_order(candidates: Vec<(Option<i64>, DomainInfo)>, now_ms: i64) -> Vec<DomainInfo> {
    let mut due: Vec<(i64, DomainInfo)> = candidates
        .into_iter()
        .map(|(at, i)| (at.unwrap_or(0), i))
        .filter(|(at, _)| *at <= now_ms)
        .collect();
    due.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.domain.cmp(&b.1.domain)));
    due.into_iter().map(|(_, i)| i).collect()
}

fn hostname() -> String {
    std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown".into())
}

impl Crawl {
    /// Writes this fetcher's `active_fetchers` row with the claim TTL.
    pub async fn announce(&self) -> ApiResult<()> {
        let ttl = announcement_ttl(self.inner.config.claim_ttl);
        self.store()
            .apply(vec![Mutation::Upsert {
                row: Row::new(&ACTIVE_FETCHERS)
                    .set("tok", self.token())
                    .set("started", self.now())
                    .set("host", hostname()),
                ttl: Some(ttl),
            }])
            .await?;
        *self
            .inner
            .announced
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
        Ok(())
    }

    /// Frees the claims whose fetcher's `active_fetchers` row has expired:
    /// the domain is READY again with what is left of its segment.
    pub(super) async fn free_dead_claims(&self, claimed: Vec<DomainInfo>) -> ApiResult<()> {
        let mut alive: HashMap<String, bool> = Default::default();
        for info in claimed {
            let token = info.claim_token.clone();
            let live = match alive.get(&token) {
                Some(l) => *l,
                None => {
                    let l = self
                        .store()
                        .get(&ACTIVE_FETCHERS, &[token.as_str().into()])
                        .await?
                        .is_some();
                    alive.insert(token.clone(), l);
                    l
                }
            };
            if live {
                continue;
            }
            let freed = transition(
                self.store(),
                &info,
                DomainState::Ready,
                domain_set().set("claim_tok", ZERO),
                vec![("claim_tok", Some(token.as_str().into()))],
            )
            .await?;
            if freed.is_ok() {
                crate::kernel::metrics::crawl_freed_claim();
                tracing::info!(domain = %info.domain, fetcher = %token, "crawl: freed the claim of a fetcher that stopped");
            }
        }
        Ok(())
    }

    /// Claims READY domains whose next request may go out now, highest
    /// priority first and, within a priority, the one waiting longest first;
    /// each is crawled in a task of its own while this process has slots.
    /// Each priority's READY domains are read on from where the last pass
    /// stopped, a few pages a pass, so none waits behind the first ones.
    pub async fn claim_pass(&self) -> ApiResult<usize> {
        let mut started = 0;
        if self.inner.slots.available_permits() == 0 {
            return Ok(0);
        }
        let now_ms = to_ms(self.inner.clock.now());
        // Every priority's next page in one call; further pages one by one.
        let cursors = self.claim_from().clone();
        let mut first: HashMap<i32, Page> = self
            .state_pages(DomainState::Ready, CLAIM_PAGE, &cursors)
            .await?
            .into_iter()
            .collect();
        for p in PRIORITIES.rev() {
            let mut pages = 0;
            while self.inner.slots.available_permits() > 0 && pages < CLAIM_PAGES {
                pages += 1;
                let from = self.claim_from().remove(&p);
                let wrapped = from.is_none();
                let (infos, next) = match first.remove(&p) {
                    Some(page) => (
                        self.valid(DomainState::Ready, p, &page.rows).await?,
                        page.next,
                    ),
                    None => {
                        self.in_state_from(DomainState::Ready, p, CLAIM_PAGE, from)
                            .await?
                    }
                };
                if let Some(n) = next.clone() {
                    self.claim_from().insert(p, n);
                }
                let infos: Vec<DomainInfo> = infos
                    .into_iter()
                    .filter(|i| claimable(i, self.crawling(&i.domain)))
                    .collect();
                let keys: Vec<Vec<Value>> = infos
                    .iter()
                    .map(|i| vec![i.domain.as_str().into()])
                    .collect();
                if keys.is_empty() {
                    if next.is_none() && wrapped {
                        break;
                    }
                    continue;
                }
                let counters = self.store().get_many(&DOMAIN_COUNTERS, &keys).await?;
                let candidates = counters
                    .into_iter()
                    .map(|c| c.and_then(|r| r.bigint("next_crawl")))
                    .zip(infos)
                    .collect();
                for info in claim_order(candidates, now_ms) {
                    let Ok(slot) = self.inner.slots.clone().try_acquire_owned() else {
                        break;
                    };
                    if self.claim(info, slot).await? {
                        started += 1;
                    }
                }
                if next.is_none() && wrapped {
                    // The whole partition was read in this page.
                    break;
                }
            }
        }
        Ok(started)
    }

    fn claim_from(&self) -> MutexGuard<'_, HashMap<i32, Cursor>> {
        self.inner
            .claim_from
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Claims one READY domain (a compare-and-set) and crawls it in a task
    /// of its own holding `slot`; false when another fetcher was first.
    async fn claim(
        &self,
        info: DomainInfo,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> ApiResult<bool> {
        let claimed = transition(
            self.store(),
            &info,
            DomainState::Claimed,
            domain_set()
                .set("claim_tok", self.token())
                .set("claim_time", self.now()),
            vec![
                ("dispatched", Some(Value::Boolean(true))),
                ("claim_tok", Some(ZERO.into())),
            ],
        )
        .await?;
        let Ok(info) = claimed else { return Ok(false) };
        tracing::debug!(domain = %info.domain, "crawl: claimed");
        crate::kernel::metrics::crawl_claim();
        self.inner
            .crawling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(info.domain.clone());
        let this = self.clone();
        tokio::spawn(async move {
            let domain = info.domain.clone();
            if let Err(e) = this.crawl_domain(info).await {
                tracing::warn!(%domain, error = e.message(), "crawl: crawling a domain failed");
            }
            this.inner
                .crawling
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&domain);
            drop(slot);
            this.inner.links.wake.notify_waiters();
        });
        Ok(true)
    }

    fn crawling(&self, domain: &str) -> bool {
        self.inner
            .crawling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(domain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(name: &str) -> DomainInfo {
        DomainInfo {
            dispatched: true,
            ..DomainInfo::from_row(&Row::new(&DOMAIN_INFO).set("dom", name))
        }
    }

    #[test]
    fn a_fetcher_beats_four_times_per_ttl_and_its_row_lives_a_second_at_least() {
        assert_eq!(
            heartbeat_every(Duration::from_secs(900)),
            Duration::from_secs(225)
        );
        assert_eq!(announcement_ttl(Duration::from_secs(900)), 900);
        assert_eq!(announcement_ttl(Duration::from_millis(300)), 1);
    }

    #[test]
    fn a_dispatch_is_taken_over_once_a_claim_ttl_has_passed() {
        let ttl = Duration::from_secs(900);
        let start = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let looking = DomainInfo {
            dispatch_time: Some(fixed_time(start)),
            ..domain("example.org")
        };
        assert!(!dispatch_abandoned(
            &looking,
            ttl,
            start + Duration::from_secs(899)
        ));
        assert!(dispatch_abandoned(&looking, ttl, start + ttl));
        let unknown = DomainInfo {
            dispatch_time: None,
            ..domain("example.org")
        };
        assert!(
            dispatch_abandoned(&unknown, ttl, start),
            "no time: abandoned"
        );
    }

    #[test]
    fn only_a_dispatched_domain_held_by_nobody_is_claimed() {
        let ready = domain("example.org");
        assert!(claimable(&ready, false));
        assert!(!claimable(&ready, true), "crawled here already");
        let held = DomainInfo {
            claim_token: "another fetcher".into(),
            ..ready.clone()
        };
        assert!(!claimable(&held, false));
        let undispatched = DomainInfo {
            dispatched: false,
            ..ready
        };
        assert!(!claimable(&undispatched, false));
    }

    #[test]
    fn domains_are_claimed_longest_waiting_first_and_only_when_due() {
        let order = claim_order(
            vec![
                (Some(500), domain("c.org")),
                (None, domain("b.org")),
                (Some(2000), domain("later.org")),
                (Some(0), domain("a.org")),
                (Some(1000), domain("d.org")),
            ],
            1000,
        );
        let names: Vec<&str> = order.iter().map(|i| i.domain.as_str()).collect();
        assert_eq!(names, ["a.org", "b.org", "c.org", "d.org"]);
    }
}
