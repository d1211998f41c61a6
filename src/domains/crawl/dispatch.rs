//! The dispatcher: turns the links wanted and the re-crawls due of a domain
//! into its segment (at most [`SEGMENT`] links) for one fetcher, and keeps
//! the state lists honest (dead claims freed, every row re-written on a sweep).

use futures::TryStreamExt;
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;

use super::claims::dispatch_abandoned;
use super::model::*;
use super::service::{Crawl, uuid_v4};
use super::state::{domain_set, state_row, transition};
use crate::kernel::error::ApiResult;
use crate::kernel::parse_time;
use crate::store::buckets::all_buckets;
use crate::store::{Cursor, Mutation, Row, Slice, Value, table_pages};

/// Domains of one state and priority a dispatch pass reads (PENDING and
/// DISPATCHING share the first).
const PASS_PENDING: usize = 200;
const PASS_CLAIMED: usize = 1000;
const PASS_IDLE: usize = 1000;
/// Domain rows the sweep re-writes at a time.
const SWEEP_PAGE: usize = 500;

/// What a dispatch found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dispatched {
    pub getnow: usize,
    pub recrawls: usize,
}

/// How many of the links wanted now and of the re-crawls due one segment
/// takes: re-crawls fill what wanted links leave, and keep at least a
/// quarter of the segment when both are there, so a domain with a steady
/// stream of new links still has its old ones checked.
fn shares(wanted: usize, recrawls: usize) -> (usize, usize) {
    let take_recrawls = recrawls.min((SEGMENT / 4).max(SEGMENT.saturating_sub(wanted)));
    let take_wanted = wanted.min(SEGMENT - take_recrawls);
    (take_wanted, take_recrawls)
}

/// What a dispatcher's look at a domain's links found.
#[derive(Debug, Default)]
struct Plan {
    /// The `getnow` rows due now, as many as the segment takes.
    wanted: Vec<Row>,
    /// The `link_state` rows of re-crawls due, as many as the segment takes,
    /// one link per content fingerprint.
    recrawls: Vec<Row>,
    /// Links of the scan never fetched.
    uncrawled: usize,
    /// When the first link not taken now comes due.
    wake: Option<OffsetDateTime>,
}

impl Plan {
    /// Plans a segment from the `getnow` rows and the scanned `link_state`
    /// rows of a domain, at `now`, a fetched link being due again
    /// `recrawl_after` its last fetch.
    fn of(
        getnow: &[Row],
        scanned: &[Row],
        now: OffsetDateTime,
        recrawl_after: time::Duration,
    ) -> Plan {
        let mut plan = Plan::default();
        let mut wake_at = |t: OffsetDateTime| {
            plan.wake = Some(plan.wake.map_or(t, |w| w.min(t)));
        };
        let mut wanted = Vec::new();
        for r in getnow {
            match r.text("due").and_then(parse_time) {
                Some(t) if t > now => wake_at(t),
                _ => wanted.push(r.clone()),
            }
        }
        let mut fingerprints = HashSet::new();
        let mut recrawls = Vec::new();
        let mut uncrawled = 0;
        for r in scanned {
            if r.boolean("getnow") == Some(true) {
                uncrawled += usize::from(r.text("last_time").is_none());
                continue;
            }
            let Some(last) = r.text("last_time").and_then(parse_time) else {
                uncrawled += 1;
                continue;
            };
            let due = last + recrawl_after;
            if due > now {
                wake_at(due);
                continue;
            }
            if let Some(f) = r.bigint("fnv")
                && !fingerprints.insert(f)
            {
                continue;
            }
            recrawls.push(r.clone());
        }
        let (take_wanted, take_recrawls) = shares(wanted.len(), recrawls.len());
        wanted.truncate(take_wanted);
        recrawls.truncate(take_recrawls);
        Plan {
            wanted,
            recrawls,
            uncrawled,
            ..plan
        }
    }
}

/// Whether a wake-up time (none: at once) has come.
fn is_due(at: Option<&str>, now: OffsetDateTime) -> bool {
    at.and_then(parse_time).is_none_or(|t| t <= now)
}

/// A segment row for a link, with what its last fetch learnt (a link
/// fetched before is asked for conditionally).
fn segment_row(link: &LinkKey, state: &Row) -> Mutation {
    Mutation::upsert(
        Row::new(&SEGMENTS)
            .set("dom", &link.dom)
            .set("subdom", &link.subdom)
            .set("path", &link.path)
            .set("proto", &link.proto)
            .set("url", &link.url)
            .set_opt("time", state.text("last_time"))
            .set_opt("e_tag", state.text("e_tag"))
            .set_opt("last_modified", state.text("last_modified")),
    )
}

impl Crawl {
    /// One dispatcher pass: PENDING domains get segments, IDLE ones whose
    /// wake-up time has come too (on a sweep: every IDLE one, and every
    /// domain's state row re-written), and claims of dead fetchers are freed.
    pub async fn dispatch_pass(&self, sweep: bool) -> ApiResult<()> {
        let now = self.inner.clock.now();
        let mut counts = HashMap::new();
        // Every priority's rows of a state in one call; each domain is
        // checked against its domain row when its priority's turn comes.
        let from_start = HashMap::new();
        let pending = self.state_pages(DomainState::Pending, PASS_PENDING, &from_start);
        let dispatching = self.state_pages(DomainState::Dispatching, PASS_PENDING, &from_start);
        let claimed = self.state_pages(DomainState::Claimed, PASS_CLAIMED, &from_start);
        let (pending, dispatching, claimed) =
            futures::future::try_join3(pending, dispatching, claimed).await?;
        let states = pending.into_iter().zip(dispatching).zip(claimed);
        for (((p, pending), (_, dispatching)), (_, claimed)) in states {
            for info in self.valid(DomainState::Pending, p, &pending.rows).await? {
                *counts.entry(DomainState::Pending).or_insert(0) += 1;
                self.dispatch(&info).await?;
            }
            let dispatching = self
                .valid(DomainState::Dispatching, p, &dispatching.rows)
                .await?;
            for info in dispatching {
                // A dispatcher that stopped: taken over after the claim TTL.
                if dispatch_abandoned(&info, self.inner.config.claim_ttl, now) {
                    self.dispatch(&info).await?;
                }
            }
            let claimed = self.valid(DomainState::Claimed, p, &claimed.rows).await?;
            *counts.entry(DomainState::Claimed).or_insert(0) += claimed.len();
            self.free_dead_claims(claimed).await?;
        }
        for (p, page) in self
            .state_pages(DomainState::Idle, PASS_IDLE, &from_start)
            .await?
        {
            let due: Vec<Row> = page
                .rows
                .into_iter()
                .filter(|r| sweep || is_due(r.text("wake_at"), now))
                .collect();
            for info in self.valid(DomainState::Idle, p, &due).await? {
                self.dispatch(&info).await?;
            }
        }
        if sweep {
            self.sweep().await?;
        }
        for s in [DomainState::Pending, DomainState::Claimed] {
            crate::kernel::metrics::crawl_domains(s.as_str(), counts.get(&s).copied().unwrap_or(0));
        }
        Ok(())
    }

    /// Re-writes every domain's state row (mends a row lost to a crash
    /// between a state change and its query row) and counts the states.
    async fn sweep(&self) -> ApiResult<()> {
        let since = self.now();
        let mut counts = HashMap::new();
        let mut pages = std::pin::pin!(table_pages(
            self.store().as_ref(),
            &DOMAIN_INFO,
            None,
            SWEEP_PAGE
        ));
        while let Some(page) = pages.try_next().await? {
            let rows: Vec<Mutation> = page
                .rows
                .iter()
                .map(|r| {
                    let i = DomainInfo::from_row(r);
                    *counts.entry(i.state.as_str()).or_insert(0usize) += 1;
                    state_row(
                        &i.domain,
                        i.state,
                        i.priority,
                        i.version,
                        i.wake_at.as_deref(),
                        &since,
                    )
                })
                .collect();
            if !rows.is_empty() {
                self.store().write_bulk(rows).await?;
            }
        }
        for s in DomainState::ALL {
            crate::kernel::metrics::crawl_domains(
                s.as_str(),
                counts.get(s.as_str()).copied().unwrap_or(0),
            );
        }
        Ok(())
    }

    /// Builds the segment of one domain (PENDING, IDLE, or DISPATCHING by a
    /// dispatcher that stopped): the links wanted now and due, and a share of
    /// re-crawls due (a quarter when both are there), one link per content
    /// fingerprint; READY when there is any, else IDLE until the next due time.
    pub async fn dispatch(&self, info: &DomainInfo) -> ApiResult<Dispatched> {
        let me = uuid_v4();
        let now_t = self.inner.clock.now();
        let now = self.now();
        let mut also = vec![];
        if info.state == DomainState::Dispatching {
            also.push(("dispatch_tok", info.dispatch_token.clone().map(Value::Text)));
        }
        let Ok(info) = transition(
            self.store(),
            info,
            DomainState::Dispatching,
            domain_set()
                .set("dispatch_tok", &me)
                .set("dispatch_time", &now)
                .set("more", false),
            also,
        )
        .await?
        else {
            return Ok(Dispatched::default());
        };
        let domain = info.domain.clone();
        let buckets = all_buckets(&[domain.as_str().into()]);
        let getnow = self.store().merged_slice(&GETNOW,
            &buckets,
            &Slice::partition(vec![]).limit(SEGMENT * 4),
        )
        .await?;
        // Re-crawls due, from where the last scan stopped.
        let after = info
            .scan_cursor
            .as_deref()
            .and_then(|c| Cursor::decode(c).ok());
        let started_fresh = after.is_none();
        let scan = self.store().merged_slice(&LINK_STATE,
            &buckets,
            &Slice::partition(vec![]).limit(SEGMENT * 4).after(after),
        )
        .await?;
        let recrawl_after = time::Duration::try_from(self.inner.config.recrawl_after)
            .unwrap_or(time::Duration::days(30));
        let plan = Plan::of(&getnow.rows, &scan.rows, now_t, recrawl_after);
        let (take_wanted, take_recrawls) = (plan.wanted.len(), plan.recrawls.len());
        // A link fetched before keeps its validators (a conditional request).
        let keys: Vec<Vec<Value>> = plan
            .wanted
            .iter()
            .filter_map(|r| LinkKey::of(&r.string("url")).ok())
            .map(|k| k.bucketed())
            .collect();
        let states = self.store().get_many(&LINK_STATE, &keys).await?;
        let segment: Vec<Mutation> = states
            .into_iter()
            .flatten()
            .chain(plan.recrawls)
            .filter_map(|r| Some(segment_row(&LinkKey::of(&r.string("url")).ok()?, &r)))
            .collect();
        let n = segment.len();
        if n > 0 {
            self.store().write_bulk(segment).await?;
        }
        let mut set = domain_set()
            .set("dispatch_tok", ZERO)
            .set_opt("scan_cursor", scan.next.as_ref().map(|c| c.encode()));
        if started_fresh && scan.next.is_none() {
            set = set
                .set("tot_links", scan.rows.len() as i32)
                .set("uncrawled_links", plan.uncrawled as i32);
        }
        // More rows to scan: come back soon.
        let wake = if scan.next.is_some() {
            Some(now_t)
        } else {
            plan.wake
        };
        let wake_at = fixed_time(
            wake.unwrap_or_else(|| self.inner.clock.now() + self.inner.config.recrawl_after),
        );
        let mine = vec![("dispatch_tok", Some(Value::Text(me.clone())))];
        let done = if n > 0 {
            transition(
                self.store(),
                &info,
                DomainState::Ready,
                set.set("dispatched", true)
                    .set("queued_links", n as i32)
                    .set("last_dispatch", &now)
                    .set("wake_at", &wake_at),
                mine,
            )
            .await?
        } else {
            let mut cond = mine;
            cond.push(("more", Some(Value::Boolean(false))));
            match transition(
                self.store(),
                &info,
                DomainState::Idle,
                set.clone()
                    .set("queued_links", 0)
                    .set("last_empty_dispatch", &now)
                    .set("wake_at", &wake_at),
                cond,
            )
            .await?
            {
                Ok(i) => Ok(i),
                // Links arrived while this looked: look again next pass.
                Err(Some(cur)) if cur.state == DomainState::Dispatching => {
                    transition(
                        self.store(),
                        &cur,
                        DomainState::Pending,
                        set.set("more", false),
                        vec![("dispatch_tok", Some(Value::Text(me)))],
                    )
                    .await?
                }
                Err(other) => Err(other),
            }
        };
        tracing::debug!(%domain, segment = n, getnow = take_wanted, recrawls = take_recrawls, done = done.is_ok(), "crawl: dispatched");
        if done.is_ok() && n > 0 {
            self.inner.links.wake.notify_waiters();
        }
        Ok(Dispatched {
            getnow: take_wanted,
            recrawls: take_recrawls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const THIRTY_DAYS: Duration = Duration::from_secs(30 * 86_400);

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::days(365 * 50) + time::Duration::seconds(secs)
    }

    fn wanted(path: &str, due: i64) -> Row {
        let key = LinkKey::of(&format!("https://example.org/{path}")).unwrap();
        key.row(&GETNOW).set("due", fixed_time(at(due)))
    }

    fn fetched(path: &str, last: Option<i64>, fingerprint: Option<i64>) -> Row {
        let key = LinkKey::of(&format!("https://example.org/{path}")).unwrap();
        key.row(&LINK_STATE)
            .set_opt("last_time", last.map(|l| fixed_time(at(l))))
            .set_opt("fnv", fingerprint)
            .set("getnow", false)
    }

    #[test]
    fn a_segment_keeps_a_quarter_for_recrawls_when_both_wait() {
        assert_eq!(shares(0, 0), (0, 0));
        assert_eq!(shares(10, 20), (10, 20), "both fit");
        assert_eq!(shares(1000, 1000), (SEGMENT * 3 / 4, SEGMENT / 4));
        assert_eq!(shares(1000, 10), (SEGMENT - 10, 10));
        assert_eq!(
            shares(0, 1000),
            (0, SEGMENT),
            "re-crawls fill an empty segment"
        );
        assert_eq!(shares(SEGMENT, 0), (SEGMENT, 0));
        assert_eq!(shares(100, 1000), (100, SEGMENT - 100));
    }

    #[test]
    fn a_plan_takes_what_is_due_and_wakes_for_the_first_that_is_not() {
        let recrawl = time::Duration::try_from(THIRTY_DAYS).unwrap();
        let now = at(0);
        let month = recrawl.whole_seconds();
        let getnow = [
            wanted("a", -5),
            wanted("b", 0),
            wanted("c", 90),
            wanted("d", 30),
        ];
        let scanned = [
            fetched("e", Some(-month - 1), Some(1)),
            // The same content under another URL: one of them is checked.
            fetched("f", Some(-month - 2), Some(1)),
            fetched("g", Some(-month + 60), Some(2)),
            fetched("h", None, None),
            fetched("a", None, None).set("getnow", true),
            fetched("b", Some(-10), None).set("getnow", true),
        ];
        let plan = Plan::of(&getnow, &scanned, now, recrawl);
        let urls = |rows: &[Row]| rows.iter().map(|r| r.string("url")).collect::<Vec<_>>();
        assert_eq!(
            urls(&plan.wanted),
            ["https://example.org/a", "https://example.org/b"]
        );
        assert_eq!(urls(&plan.recrawls), ["https://example.org/e"]);
        assert_eq!(plan.uncrawled, 2, "h, and a wanted before its first fetch");
        assert_eq!(plan.wake, Some(at(30)), "d comes due first");
    }

    #[test]
    fn a_plan_of_nothing_due_has_no_segment() {
        let recrawl = time::Duration::try_from(THIRTY_DAYS).unwrap();
        let plan = Plan::of(&[], &[fetched("x", Some(-60), None)], at(0), recrawl);
        assert!(plan.wanted.is_empty() && plan.recrawls.is_empty());
        assert_eq!(plan.wake, Some(at(-60) + recrawl));
        let plan = Plan::of(&[], &[], at(0), recrawl);
        assert_eq!(plan.wake, None);
    }

    #[test]
    fn a_segment_row_carries_the_link_and_its_validators() {
        let key = LinkKey::of("http://img.example.org:8080/a.jpg?s=1").unwrap();
        let state = key
            .row(&LINK_STATE)
            .set("last_time", "t")
            .set("e_tag", "\"e\"");
        let Mutation::Upsert { row, .. } = segment_row(&key, &state) else {
            panic!("an upsert");
        };
        assert_eq!(row.string("dom"), "example.org");
        assert_eq!(row.string("subdom"), "img");
        assert_eq!(row.string("proto"), "http:8080");
        assert_eq!(row.string("path"), "/a.jpg?s=1");
        assert_eq!(row.text("e_tag"), Some("\"e\""));
        assert_eq!(row.text("last_modified"), None);
        assert_eq!(row.text("time"), Some("t"));
    }

    #[test]
    fn an_idle_domain_without_a_wake_up_time_is_due() {
        assert!(is_due(None, at(0)));
        assert!(is_due(Some(&fixed_time(at(0))), at(0)));
        assert!(!is_due(Some(&fixed_time(at(1))), at(0)));
    }
}
