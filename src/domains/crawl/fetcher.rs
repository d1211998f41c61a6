//! The fetch loop of a claimed domain and its politeness: one request at a
//! time, spaced by the delay (or the site's Crawl-delay, or its Retry-After),
//! the next slot booked in the store before each request goes out (by the
//! previous fetch's record, or right before it), and the domain handed back
//! when its turn is over.

use std::time::{Duration, Instant};

use time::OffsetDateTime;

use super::model::*;
use super::claims::heartbeat_every;
use super::outcomes::{BOOKING_SLACK, Outcome, Pace, segment_key, spaced};
use super::pipeline::{Recording, pipelined};
use super::robots::Rules;
use super::service::Crawl;
use super::state::{domain_set, read_domain, transition};
use crate::domains::web::{FetchError, Validators};
use crate::kernel::error::{ApiError, ApiResult};
use crate::store::{Mutation, Row, Slice};

/// Bookings `wait_turn` writes before it gives up on a store that takes
/// longer than each booking's slack.
const BOOKING_TRIES: usize = 4;

/// The longest a site's Retry-After keeps its domain waiting.
const LONGEST_BACK_OFF: Duration = Duration::from_secs(24 * 3600);

/// The spacing of requests to a site: `delay`, or the site's larger
/// Crawl-delay (at most `max_wait`).
fn spacing(delay: Duration, max_wait: Duration, crawl_delay: Option<Duration>) -> Duration {
    crawl_delay.map_or(delay, |d| d.min(max_wait).max(delay))
}

/// What a site's Retry-After does to the next request to its domain.
#[derive(Debug, PartialEq, Eq)]
enum BackOff {
    /// Within the longest wait: the fetcher waits for it, holding its slot.
    Wait(OffsetDateTime),
    /// Longer than a slot is held: the segment stops and the domain goes
    /// back with its next time moved on (at most a day), so the site is not
    /// asked again on the next pass.
    Stop(OffsetDateTime),
}

/// When the next request may go out after a site asked to `wait` at `now`
/// (`next_at` being the earliest it could anyway).
fn back_off(
    next_at: OffsetDateTime,
    now: OffsetDateTime,
    wait: Duration,
    max_wait: Duration,
) -> BackOff {
    if wait > max_wait {
        BackOff::Stop(next_at.max(now + wait.min(LONGEST_BACK_OFF)))
    } else {
        BackOff::Wait(next_at.max(now + wait))
    }
}

/// Whether a fetcher's turn at a domain is over: its time is up, or the
/// next request could not go out within it.
fn turn_over(now: OffsetDateTime, next_at: OffsetDateTime, turn_ends: OffsetDateTime) -> bool {
    now >= turn_ends || next_at > turn_ends
}

/// How long a fetcher goes by what it last read of its claim before the next
/// request: an admin's exclusion stops the segment within this, at most a
/// second and at most one heartbeat, instead of one store read per request.
fn claim_recheck(claim_ttl: Duration) -> Duration {
    heartbeat_every(claim_ttl).min(Duration::from_secs(1))
}

/// Whether the claim is read again before the next request: its last read
/// (at `read`) is `every` old, or this fetcher's announcement (last written
/// at `announced`) is older than half a claim TTL. Another instance frees a
/// claim only once the announcement has been gone a whole TTL, so while the
/// heartbeats keep up, no claim is freed under a fetcher between two reads;
/// once they lag, the claim is read before every request, as it always was.
fn recheck_due(
    read: Option<Instant>,
    announced: Option<Instant>,
    now: Instant,
    every: Duration,
    claim_ttl: Duration,
) -> bool {
    let age = |t: Option<Instant>| t.map(|t| now.saturating_duration_since(t));
    age(read).is_none_or(|a| a >= every) || age(announced).is_none_or(|a| a > claim_ttl / 2)
}

/// Whether the slot booked in the store (ms since the epoch) already keeps a
/// fetcher that takes over from sending before `next`: then a request may go
/// out without booking again.
fn booked_covers(booked_ms: i64, next: OffsetDateTime) -> bool {
    booked_ms >= to_ms(next)
}

/// How a walk through a segment ended.
enum Walked {
    /// The claim is no longer this fetcher's (freed, excluded).
    Lost,
    /// Done, or `handed_back` with the rest of the segment.
    Over { handed_back: bool },
}

/// A fetcher's turn at one claimed domain: when its next request may go
/// out, the slot the store has booked (ms since the epoch; see
/// [`Crawl::wait_turn`]), and the records of its fetches being written.
struct Turn {
    domain: String,
    next_at: OffsetDateTime,
    booked: i64,
    recording: Recording,
}

impl Crawl {
    /// Crawls a claimed domain's segment, one request at a time, spaced by
    /// the delay (or the site's Crawl-delay, or its Retry-After), then
    /// unclaims it (PENDING, for the dispatcher). Stops when the claim is no
    /// longer this fetcher's (freed, excluded). When the turn is over, or the
    /// next request could not go out within it, hands the domain back
    /// (READY, with the rest of its segment) so that a slow site holds a
    /// slot no longer than a turn.
    pub(super) async fn crawl_domain(&self, claimed: DomainInfo) -> ApiResult<()> {
        let domain = claimed.domain.clone();
        let turn_ends = self.inner.clock.now() + self.inner.config.turn;
        let segment = self
            .store()
            .slice(
                &SEGMENTS,
                &Slice::partition(vec![domain.as_str().into()]).limit(SEGMENT * 2),
            )
            .await?;
        let booked = self.next_crawl(&domain).await?;
        let mut turn = Turn {
            domain,
            next_at: from_ms(booked),
            booked,
            recording: Recording::default(),
        };
        let walked = self.walk(&mut turn, &segment.rows, turn_ends).await;
        // Every record is written before the domain goes back: the
        // dispatcher must not find a recorded link's segment row.
        let recorded = turn.recording.finish().await;
        let links = segment.rows.len();
        match (walked, recorded) {
            (Ok(Walked::Lost), recorded) => recorded,
            (Ok(Walked::Over { handed_back }), Ok(())) => {
                self.book(&turn.domain, turn.next_at).await?;
                self.unclaim(&turn.domain, handed_back, links).await
            }
            (Err(e), _) | (Ok(Walked::Over { .. }), Err(e)) => {
                // Handed back for another pass: a claim left behind would
                // hold the domain until this process stops announcing.
                if let Err(u) = self.unclaim(&turn.domain, true, links).await {
                    tracing::warn!(domain = %turn.domain, error = u.message(), "crawl: a failed segment's domain could not be handed back");
                }
                Err(e)
            }
        }
    }

    /// Fetches the segment's links in turn until it is done, the turn is
    /// over or the claim is no longer this fetcher's.
    async fn walk(
        &self,
        turn: &mut Turn,
        segment: &[Row],
        turn_ends: OffsetDateTime,
    ) -> ApiResult<Walked> {
        let recheck = claim_recheck(self.inner.config.claim_ttl);
        let mut claim_read = None;
        for row in segment {
            let announced = *self
                .inner
                .announced
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let ttl = self.inner.config.claim_ttl;
            if recheck_due(claim_read, announced, Instant::now(), recheck, ttl) {
                let info = read_domain(self.store(), &turn.domain).await?;
                if info.is_none_or(|i| {
                    i.claim_token != self.token() || i.state != DomainState::Claimed
                }) {
                    return Ok(Walked::Lost);
                }
                claim_read = Some(Instant::now());
            }
            if turn_over(self.inner.clock.now(), turn.next_at, turn_ends) {
                return Ok(Walked::Over { handed_back: true });
            }
            let url = row.string("url");
            let Ok(link) = LinkKey::of(&url) else {
                self.store()
                    .apply(vec![Mutation::delete(&SEGMENTS, segment_key(row))])
                    .await?;
                continue;
            };
            let site = link.site();
            let rules = match self.inner.robots.cached(&site) {
                Some(r) => Ok(r),
                None => self.robots(turn, &site).await?,
            };
            if turn.next_at > turn_ends && matches!(&rules, Ok(r) if r.allowed(&url)) {
                return Ok(Walked::Over { handed_back: true });
            }
            match rules {
                Err(e) => {
                    self.record(&link, row, Outcome::failed(e), None).await?;
                }
                Ok(rules) if !rules.allowed(&url) => {
                    crate::kernel::metrics::crawl_robots_excluded();
                    self.record(&link, row, Outcome::robots(&site), None)
                        .await?;
                }
                Ok(rules) => {
                    if self.fetch(turn, &link, &url, row, &rules).await? {
                        break;
                    }
                }
            }
        }
        Ok(Walked::Over { handed_back: false })
    }

    /// Reads a site's robots.txt (a request to the domain like any other, so
    /// it waits its turn); moves the turn's next request on.
    async fn robots(&self, turn: &mut Turn, site: &str) -> ApiResult<Result<Rules, FetchError>> {
        self.wait_turn(turn, &Rules::AllowAll).await?;
        let fetched = self.inner.robots.fetch(&self.inner.fetcher, site).await;
        // The spacing counts from the end of a request.
        let delay = self.delay_for(fetched.as_ref().unwrap_or(&Rules::AllowAll));
        turn.next_at = spaced(turn.next_at, self.inner.clock.now(), delay);
        Ok(fetched)
    }

    /// Fetches one link robots.txt allows, in its turn, and records what
    /// came: before the next request, booking the slot after next with it,
    /// or at a short spacing beside the next requests (see
    /// [`super::pipeline`]). Moves the turn's next request on; returns
    /// whether the segment stops here (the site asked for a longer wait
    /// than a slot is held).
    async fn fetch(
        &self,
        turn: &mut Turn,
        link: &LinkKey,
        url: &str,
        row: &Row,
        rules: &Rules,
    ) -> ApiResult<bool> {
        // A free place for its record first, so the body is read on at once.
        turn.recording.ready().await?;
        self.wait_turn(turn, rules).await?;
        let validators = Validators {
            e_tag: row.text("e_tag").map(str::to_owned),
            last_modified: row.text("last_modified").map(str::to_owned),
        };
        self.inner
            .fetched
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let got = self.inner.fetcher.get(url, &validators).await;
        let (mut outcome, wait) = Outcome::of(got);
        crate::kernel::metrics::crawl_fetch(outcome.response.as_ref().map(|r| r.status));
        if let Some(w) = wait {
            let now = self.inner.clock.now();
            match back_off(turn.next_at, now, w, self.inner.config.max_wait) {
                BackOff::Stop(at) => {
                    self.record(link, row, outcome, None).await?;
                    turn.next_at = at;
                    return Ok(true);
                }
                BackOff::Wait(at) => {
                    turn.next_at = at;
                    self.book_turn(turn, at).await?;
                }
            }
        }
        let delay = self.delay_for(rules);
        if pipelined(delay) {
            // The body comes off the connection here (a larger one while it
            // is recorded); the spacing counts from the end of that.
            let rest = outcome.read_ahead().await;
            let (crawl, link, row) = (self.clone(), link.clone(), row.clone());
            turn.recording
                .start(async move { crawl.record(&link, &row, outcome, None).await.map(drop) });
            if let Some(rest) = rest {
                rest.await;
            }
            turn.next_at = spaced(turn.next_at, self.inner.clock.now(), delay);
            return Ok(false);
        }
        // The body is read while it is recorded; the spacing counts from
        // the end of that.
        let pace = Pace {
            domain: &turn.domain,
            next_at: turn.next_at,
            delay,
        };
        if let Some((after, slot)) = self.record(link, row, outcome, Some(pace)).await? {
            turn.next_at = after;
            turn.booked = to_ms(slot);
        }
        Ok(false)
    }

    /// Ends this fetcher's claim of `domain`: READY with the rest of its
    /// segment when it was handed back, else PENDING, so the dispatcher
    /// looks at what is left or new.
    async fn unclaim(&self, domain: &str, handed_back: bool, links: usize) -> ApiResult<()> {
        let (state, set) = if handed_back {
            tracing::debug!(%domain, "crawl: turn over, domain handed back");
            crate::kernel::metrics::crawl_handed_back();
            (DomainState::Ready, domain_set().set("claim_tok", ZERO))
        } else {
            tracing::debug!(%domain, links, "crawl: segment done");
            let set = domain_set()
                .set("claim_tok", ZERO)
                .set("dispatched", false)
                .set("more", false);
            (DomainState::Pending, set)
        };
        if let Some(info) = read_domain(self.store(), domain).await?
            && info.claim_token == self.token()
        {
            // Lost only to an admin's change (exclusion), which then holds.
            let _lost = transition(
                self.store(),
                &info,
                state,
                set,
                vec![("claim_tok", Some(self.token().into()))],
            )
            .await?;
        }
        Ok(())
    }

    /// The spacing of requests to a site with these rules.
    fn delay_for(&self, rules: &Rules) -> Duration {
        let c = &self.inner.config;
        spacing(c.delay, c.max_wait, rules.delay())
    }

    /// When the next request to `domain` may go out, as the store knows it
    /// (ms since the epoch).
    async fn next_crawl(&self, domain: &str) -> ApiResult<i64> {
        Ok(self
            .store()
            .get(&DOMAIN_COUNTERS, &[domain.into()])
            .await?
            .and_then(|r| r.bigint("next_crawl"))
            .unwrap_or(0))
    }

    /// Waits until the turn's next request may go out, then makes sure its
    /// slot (now + the delay, or the site's larger Crawl-delay) is booked
    /// in `domain_counters` before the request goes out, for a fetcher that
    /// takes over after a crash: the previous fetch's record booked it
    /// already (`booked`) unless this request goes out later than that
    /// reckoned with. A booking made here reaches [`BOOKING_SLACK`] further,
    /// so that at a short spacing, where records book nothing (they are
    /// written beside the requests, in any order), one booking covers the
    /// requests of that time. Leaves the slot in `next_at` (the caller moves
    /// it on once the request has ended).
    async fn wait_turn(&self, turn: &mut Turn, rules: &Rules) -> ApiResult<()> {
        let now = self.inner.clock.now();
        if turn.next_at > now {
            let wait: Duration = (turn.next_at - now).try_into().unwrap_or_default();
            tokio::time::sleep(wait.min(self.inner.config.max_wait)).await;
        }
        // The booking must cover the request as it goes out, after the
        // write: a store slower than the slack books again, further ahead.
        let mut slack = BOOKING_SLACK;
        for _ in 0..BOOKING_TRIES {
            let next = self.inner.clock.now() + self.delay_for(rules);
            if booked_covers(turn.booked, next) {
                turn.next_at = next;
                return Ok(());
            }
            let started = Instant::now();
            self.book_turn(turn, next + slack).await?;
            slack = slack.max(started.elapsed() * 2);
        }
        tracing::warn!(domain = %turn.domain, "crawl: the store books slower than requests go out; giving the domain back");
        Err(ApiError::Unavailable)
    }

    /// Books `slot` for the turn's domain (see [`Crawl::book`]) and keeps
    /// it as the turn's booking.
    async fn book_turn(&self, turn: &mut Turn, slot: OffsetDateTime) -> ApiResult<()> {
        self.book(&turn.domain, slot).await?;
        turn.booked = to_ms(slot);
        Ok(())
    }

    /// Stores when the next request to `domain` may go out.
    async fn book(&self, domain: &str, next: OffsetDateTime) -> ApiResult<()> {
        self.store().apply(vec![next_crawl_row(domain, next)]).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000) + time::Duration::seconds(secs)
    }

    #[test]
    fn a_crawl_delay_lengthens_the_spacing_up_to_the_longest_wait() {
        let (delay, max_wait) = (SECOND, 600 * SECOND);
        assert_eq!(spacing(delay, max_wait, None), delay);
        assert_eq!(spacing(delay, max_wait, Some(5 * SECOND)), 5 * SECOND);
        assert_eq!(
            spacing(delay, max_wait, Some(SECOND / 10)),
            delay,
            "never faster than our own delay"
        );
        assert_eq!(spacing(delay, max_wait, Some(3600 * SECOND)), max_wait);
    }

    #[test]
    fn a_retry_after_beyond_the_longest_wait_stops_the_segment_for_at_most_a_day() {
        let max_wait = 600 * SECOND;
        assert_eq!(
            back_off(at(1), at(0), 30 * SECOND, max_wait),
            BackOff::Wait(at(30))
        );
        assert_eq!(
            back_off(at(100), at(0), 30 * SECOND, max_wait),
            BackOff::Wait(at(100)),
            "never earlier than the spacing allows"
        );
        assert_eq!(
            back_off(at(1), at(0), 3600 * SECOND, max_wait),
            BackOff::Stop(at(3600))
        );
        assert_eq!(
            back_off(at(1), at(0), 7 * 86_400 * SECOND, max_wait),
            BackOff::Stop(at(86_400))
        );
    }

    #[test]
    fn a_turn_is_over_when_its_time_is_up_or_the_next_request_would_miss_it() {
        let ends = at(300);
        assert!(!turn_over(at(0), at(10), ends));
        assert!(!turn_over(at(0), ends, ends));
        assert!(turn_over(at(0), at(301), ends));
        assert!(turn_over(ends, at(0), ends));
    }

    #[test]
    fn the_claim_is_read_again_at_least_once_a_second_and_once_a_heartbeat() {
        assert_eq!(claim_recheck(Duration::from_secs(900)), SECOND);
        assert_eq!(claim_recheck(2 * SECOND), SECOND / 2);
        let (t, ttl) = (Instant::now(), 4 * SECOND);
        let fresh = Some(t);
        assert!(recheck_due(None, fresh, t, SECOND, ttl), "the first request reads it");
        assert!(!recheck_due(Some(t), fresh, t + SECOND / 2, SECOND, ttl));
        assert!(recheck_due(Some(t), fresh, t + SECOND, SECOND, ttl));
        // Heartbeats that lag (or never came): read before every request.
        let late = t + 3 * SECOND;
        assert!(recheck_due(Some(late), Some(t), late, SECOND, ttl));
        assert!(recheck_due(Some(t), None, t, SECOND, ttl));
        assert!(!recheck_due(Some(late), Some(t + SECOND), late, SECOND, ttl));
    }

    #[test]
    fn a_request_books_again_only_when_it_goes_out_later_than_was_booked() {
        let next = at(10);
        assert!(booked_covers(to_ms(next), next));
        assert!(booked_covers(to_ms(next) + 1, next));
        assert!(!booked_covers(to_ms(next) - 1, next));
        assert!(!booked_covers(0, next), "nothing booked yet");
    }

    #[test]
    fn the_booked_time_reads_back_to_the_millisecond() {
        let t = at(0) + time::Duration::milliseconds(1234);
        assert_eq!(from_ms(to_ms(t)), t);
        assert_eq!(from_ms(0), OffsetDateTime::UNIX_EPOCH);
        assert_eq!(to_ms(OffsetDateTime::UNIX_EPOCH + SECOND), 1000);
    }
}
