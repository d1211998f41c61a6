//! The crawl frontier's rules: links wanted, the dispatcher that turns them
//! into segments, the fetchers that claim a domain's segment and fetch it
//! politely, freeing the claims of fetchers that died, and the admin's levers.
//!
//! Shared nothing but the store: any number of instances run a dispatcher and
//! fetchers. Every change of a domain's state is a compare-and-set on its
//! `domain_info` row (walker's claim `IF dispatched = true AND claim_tok =
//! <zero>` among them), so one dispatcher builds a domain's segment and one
//! fetcher crawls it. Each change also bumps the row's `version`; the
//! `domains_by_state` row of the new version is written ahead of the CAS and
//! the old version's row removed after, so a domain is never missing from
//! its state's list (a reader checks `domain_info` before it acts, and drops
//! rows of versions left behind); the dispatcher's sweep re-writes every
//! domain's row now and then as insurance.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::Notify;

use super::model::*;
use super::robots::{RobotsCache, Rules};
use crate::domains::binaries::service::{Arrival, Binaries, Frontier};
use crate::domains::web::{FetchError, Fetched, Fetcher, Validators, is_secret_header};
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::kernel::{Clock, parse_time};
use crate::store::buckets::{all_buckets, merged_slice};
use crate::store::{Cas, Condition, Cursor, DynStore, Listed, Mutation, Row, Slice, Value};

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

fn now_fixed(clock: &Clock) -> String {
    fixed_time(clock.now())
}

fn later_fixed(clock: &Clock, d: Duration) -> String {
    fixed_time(clock.now() + d)
}

fn is_due(at: Option<&str>, now: OffsetDateTime) -> bool {
    at.and_then(parse_time).is_none_or(|t| t <= now)
}

/// The state-table row of `dom` in `state` at `version`.
fn state_row(
    dom: &str,
    state: DomainState,
    priority: i32,
    version: i64,
    wake_at: Option<&str>,
    since: &str,
) -> Mutation {
    Mutation::upsert(
        Row::new(&DOMAINS_BY_STATE)
            .set("state", state.as_str())
            .set("priority", priority)
            .set("dom", dom)
            .set("version", version)
            .set_opt("wake_at", wake_at)
            .set("since", since),
    )
}

fn state_delete(dom: &str, state: DomainState, priority: i32, version: i64) -> Mutation {
    Mutation::delete(
        &DOMAINS_BY_STATE,
        vec![
            state.as_str().into(),
            priority.into(),
            dom.into(),
            version.into(),
        ],
    )
}

/// How long a state row of a version its domain never reached (a lost CAS,
/// a crash between the two writes) is kept before a reader removes it.
const PENDING_ROW_KEEP: Duration = Duration::from_secs(60);

/// The longest a site's Retry-After keeps its domain waiting.
const LONGEST_BACK_OFF: Duration = Duration::from_secs(24 * 3600);
/// READY domains a claim pass reads at a time, and pages at most per
/// priority and pass.
const CLAIM_PAGE: usize = 100;
const CLAIM_PAGES: usize = 5;

/// What a state-table row is worth, given its domain's row.
#[derive(Debug, PartialEq, Eq)]
enum RowIs {
    Valid,
    /// Of a version the domain has left: remove it.
    Stale,
    /// Of a version the domain has not reached (yet).
    Ahead,
}

fn judge(state: DomainState, priority: i32, version: i64, info: Option<&DomainInfo>) -> RowIs {
    match info {
        // Written ahead of the domain's creation (or left by a lost one).
        None => RowIs::Ahead,
        Some(i) if version < i.version => RowIs::Stale,
        Some(i) if version > i.version => RowIs::Ahead,
        Some(i) if i.state == state && i.priority == priority => RowIs::Valid,
        Some(_) => RowIs::Stale,
    }
}

async fn domain(store: &DynStore, dom: &str) -> ApiResult<Option<DomainInfo>> {
    Ok(store
        .get(&DOMAIN_INFO, &[dom.into()])
        .await?
        .map(|r| DomainInfo::from_row(&r)))
}

/// Moves `from` (as read) to state `to`, setting `set`'s columns too, if
/// `domain_info` still holds `from`'s version and `also`: the state row of
/// the next version is written first, the one of `from`'s version removed
/// after (each by its exact key, so no other change's row is ever removed).
/// `Ok(Err(row found))` when the CAS lost, `Ok(Ok(new))` when it applied.
async fn transition(
    store: &DynStore,
    from: &DomainInfo,
    to: DomainState,
    set: Row,
    also: Vec<(&'static str, Option<Value>)>,
) -> ApiResult<Result<DomainInfo, Option<DomainInfo>>> {
    let priority = set.int("priority").unwrap_or(from.priority);
    let wake_at = set
        .text("wake_at")
        .map(str::to_owned)
        .or(from.wake_at.clone());
    let version = from.version + 1;
    let since = fixed_time(OffsetDateTime::now_utc());
    store
        .apply(vec![state_row(
            &from.dom,
            to,
            priority,
            version,
            wake_at.as_deref(),
            &since,
        )])
        .await?;
    let mut condition = vec![
        ("state", Some(from.state.as_str().into())),
        ("version", Some(Value::BigInt(from.version))),
    ];
    condition.extend(also);
    let outcome = store
        .cas(Cas {
            row: set
                .set("dom", &from.dom)
                .set("state", to.as_str())
                .set("version", version),
            condition: Condition::Equals(condition),
            ttl: None,
        })
        .await?;
    let current = outcome.current.as_ref().map(DomainInfo::from_row);
    if outcome.applied {
        store
            .apply(vec![state_delete(
                &from.dom,
                from.state,
                from.priority,
                from.version,
            )])
            .await?;
        return Ok(Ok(current.unwrap_or_else(|| DomainInfo {
            state: to,
            priority,
            version,
            ..from.clone()
        })));
    }
    if judge(to, priority, version, current.as_ref()) != RowIs::Valid {
        store
            .apply(vec![state_delete(&from.dom, to, priority, version)])
            .await?;
    }
    Ok(Err(current))
}

fn domain_set() -> Row {
    Row::new(&DOMAIN_INFO)
}

/// Wakes this process's crawl loops when a link is wanted or a segment is ready.
static WAKE: std::sync::LazyLock<Arc<Notify>> =
    std::sync::LazyLock::new(|| Arc::new(Notify::new()));

/// The links half of the frontier: what the binaries domain hands URLs to.
#[derive(Clone)]
pub struct Links {
    store: DynStore,
    clock: Clock,
    wake: Arc<Notify>,
}

impl Links {
    pub fn new(store: DynStore) -> Self {
        Links {
            store,
            clock: Clock::system(),
            wake: WAKE.clone(),
        }
    }

    /// Wants `url` fetched now: its first sighting in `links`, its state row,
    /// a `getnow` row, and its domain made PENDING (created when new).
    pub async fn want_now(&self, url: &str) -> ApiResult<()> {
        let key = LinkKey::of(url).map_err(ApiError::BadUserInput)?;
        let state = self.store.get(&LINK_STATE, &key.bucketed()).await?;
        let now = now_fixed(&self.clock);
        if state.as_ref().and_then(|r| r.boolean("getnow")) != Some(true) {
            let mut state_row = key.row(&LINK_STATE).set("getnow", true);
            if let Some(old) = &state {
                for c in ["last_time", "stat", "fnv", "e_tag", "last_modified"] {
                    if let Some(v) = old.get(c) {
                        state_row = state_row.set(c, v.clone());
                    }
                }
            }
            let mut batch = vec![
                Mutation::upsert(state_row),
                Mutation::upsert(key.row(&GETNOW).set("due", &now)),
            ];
            if state.is_none() {
                batch.push(Mutation::upsert(
                    key.row(&LINKS).set("time", EPOCH).set("getnow", true),
                ));
            }
            self.store.apply(batch).await?;
        }
        self.domain_wants_dispatch(&key.dom).await?;
        self.wake.notify_waiters();
        Ok(())
    }

    /// Makes `dom` PENDING when IDLE (or new); otherwise marks that more
    /// arrived, so the dispatcher's next look includes it.
    async fn domain_wants_dispatch(&self, dom: &str) -> ApiResult<()> {
        for _ in 0..8 {
            let Some(info) = domain(&self.store, dom).await? else {
                let since = now_fixed(&self.clock);
                self.store
                    .apply(vec![state_row(
                        dom,
                        DomainState::Pending,
                        DEFAULT_PRIORITY,
                        0,
                        None,
                        &since,
                    )])
                    .await?;
                let created = self
                    .store
                    .cas(Cas {
                        row: domain_set()
                            .set("dom", dom)
                            .set("state", DomainState::Pending.as_str())
                            .set("priority", DEFAULT_PRIORITY)
                            .set("claim_tok", ZERO)
                            .set("dispatched", false)
                            .set("more", false)
                            .set("version", 0i64),
                        condition: Condition::NotExists,
                        ttl: None,
                    })
                    .await?;
                if created.applied {
                    return Ok(());
                }
                continue;
            };
            match info.state {
                DomainState::Pending | DomainState::Excluded => return Ok(()),
                DomainState::Idle => {
                    if transition(
                        &self.store,
                        &info,
                        DomainState::Pending,
                        domain_set(),
                        vec![],
                    )
                    .await?
                    .is_ok()
                    {
                        return Ok(());
                    }
                }
                _ if info.more => return Ok(()),
                _ => {
                    let marked = self
                        .store
                        .cas(Cas {
                            row: domain_set().set("dom", dom).set("more", true),
                            condition: Condition::Equals(vec![(
                                "state",
                                Some(info.state.as_str().into()),
                            )]),
                            ttl: None,
                        })
                        .await?;
                    if marked.applied {
                        return Ok(());
                    }
                }
            }
        }
        Err(ApiError::Unavailable)
    }
}

#[async_trait::async_trait]
impl Frontier for Links {
    async fn want(&self, url: &str) -> ApiResult<()> {
        self.want_now(url).await
    }
}

/// One row of a link's history.
#[derive(Clone, Debug)]
pub struct CrawlFetch {
    pub url: String,
    pub time: String,
    pub first_sighting: bool,
    pub stat: Option<i32>,
    pub err: Option<String>,
    pub robot_ex: bool,
    pub redto_url: Option<String>,
    pub mime: Option<String>,
    pub fnv: Option<i64>,
    pub headers: Vec<String>,
}

impl CrawlFetch {
    fn from_row(r: &Row) -> Self {
        let time = r.string("time");
        CrawlFetch {
            url: r.string("url"),
            first_sighting: time == EPOCH,
            time,
            stat: r.int("stat"),
            err: r.text("err").map(str::to_owned),
            robot_ex: r.boolean("robot_ex").unwrap_or(false),
            redto_url: r.text("redto_url").map(str::to_owned),
            mime: r.text("mime").map(str::to_owned),
            fnv: r.bigint("fnv"),
            // Rows stored before such headers were dropped at the fetch.
            headers: r
                .text_list("headers")
                .into_iter()
                .filter(|h| !is_secret_header(h))
                .collect(),
        }
    }
}

/// What a dispatch found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dispatched {
    pub getnow: usize,
    pub recrawls: usize,
}

#[derive(Clone)]
pub struct Crawl {
    inner: Arc<Inner>,
}

struct Inner {
    store: DynStore,
    links: Links,
    binaries: Binaries,
    fetcher: Fetcher,
    config: CrawlConfig,
    /// This process's fetcher token (its `active_fetchers` row).
    token: String,
    robots: RobotsCache,
    slots: Arc<tokio::sync::Semaphore>,
    /// Domains this process crawls now.
    crawling: Mutex<HashSet<String>>,
    /// Where the last claim pass stopped reading each priority's READY
    /// domains: the next pass goes on from there, so every READY domain is
    /// looked at in turn however many there are.
    claim_from: Mutex<std::collections::HashMap<i32, Cursor>>,
    /// Requests for links this service sent (robots.txt not counted).
    fetched: std::sync::atomic::AtomicU64,
    clock: Clock,
    /// The announcer and the dispatcher, once started.
    workers: crate::kernel::worker::Workers,
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
            }),
        }
    }

    fn store(&self) -> &DynStore {
        &self.inner.store
    }

    pub fn token(&self) -> &str {
        &self.inner.token
    }

    /// Requests for links this service has sent.
    pub fn fetched(&self) -> u64 {
        self.inner
            .fetched
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn now(&self) -> String {
        now_fixed(&self.inner.clock)
    }

    // ----- running -----

    /// Runs the dispatcher and the fetchers until the service is dropped:
    /// announces this fetcher (TTL row, refreshed at 3/4 of it), and every
    /// pass (or when a link is wanted) dispatches PENDING domains, frees dead
    /// claims and claims READY domains while slots are free.
    pub fn spawn(&self) {
        // The announcement has a task of its own: a slow pass must never let
        // it expire (another instance would take this one's domains).
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else { break };
                let this = Crawl { inner };
                if let Err(e) = this.announce().await {
                    tracing::warn!(error = e.message(), "crawl: announcing this fetcher failed");
                }
                let every = this.inner.config.claim_ttl / 4;
                drop(this);
                tokio::time::sleep(every).await;
            }
        });
        let weak = Arc::downgrade(&self.inner);
        let wake = self.inner.links.wake.clone();
        let pass = self.inner.config.pass;
        tokio::spawn(async move {
            let mut swept: Option<tokio::time::Instant> = None;
            loop {
                let Some(inner) = weak.upgrade() else { break };
                let this = Crawl { inner };
                let sweep = swept.is_none_or(|s| s.elapsed() >= this.inner.config.sweep);
                if let Err(e) = this.dispatch_pass(sweep).await {
                    tracing::warn!(error = e.message(), "crawl: a dispatch pass failed");
                } else if sweep {
                    swept = Some(tokio::time::Instant::now());
                }
                if let Err(e) = this.claim_pass().await {
                    tracing::warn!(error = e.message(), "crawl: a claim pass failed");
                }
                drop(this);
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(pass) => {}
                }
            }
        });
    }

    /// The announcer and the dispatcher, as the admin sees them.
    pub fn workers(&self) -> &crate::kernel::worker::Workers {
        &self.inner.workers
    }

    /// Writes this fetcher's `active_fetchers` row with the claim TTL.
    pub async fn announce(&self) -> ApiResult<()> {
        let ttl = self.inner.config.claim_ttl.as_secs().max(1) as u32;
        self.store()
            .apply(vec![Mutation::Upsert {
                row: Row::new(&ACTIVE_FETCHERS)
                    .set("tok", self.token())
                    .set("started", self.now())
                    .set("host", hostname()),
                ttl: Some(ttl),
            }])
            .await?;
        Ok(())
    }

    /// Lists the domains of a state-table partition whose rows are valid
    /// (checked against their domain rows; stale rows are removed, and rows
    /// of a version never reached once they are old).
    async fn in_state(
        &self,
        state: DomainState,
        priority: i32,
        limit: usize,
    ) -> ApiResult<Vec<DomainInfo>> {
        Ok(self.in_state_from(state, priority, limit, None).await?.0)
    }

    /// [`Self::in_state`] from a cursor; also returns where the page ended.
    async fn in_state_from(
        &self,
        state: DomainState,
        priority: i32,
        limit: usize,
        after: Option<Cursor>,
    ) -> ApiResult<(Vec<DomainInfo>, Option<Cursor>)> {
        let page = self
            .store()
            .slice(
                &DOMAINS_BY_STATE,
                &Slice::partition(vec![state.as_str().into(), priority.into()])
                    .limit(limit)
                    .after(after),
            )
            .await?;
        Ok((self.valid(state, priority, &page.rows).await?, page.next))
    }

    /// The domains of state-table rows that are valid, in the rows' order.
    async fn valid(
        &self,
        state: DomainState,
        priority: i32,
        rows: &[Row],
    ) -> ApiResult<Vec<DomainInfo>> {
        let keys: Vec<Vec<Value>> = rows
            .iter()
            .map(|r| vec![r.string("dom").as_str().into()])
            .collect();
        let infos = self.store().get_many(&DOMAIN_INFO, &keys).await?;
        let now = self.inner.clock.now();
        let mut out = Vec::new();
        let mut stale = Vec::new();
        for (row, info) in rows.iter().zip(infos) {
            let info = info.map(|r| DomainInfo::from_row(&r));
            let dom = row.string("dom");
            let version = row.bigint("version").unwrap_or(0);
            match judge(state, priority, version, info.as_ref()) {
                RowIs::Valid => out.extend(info),
                RowIs::Stale => stale.push(state_delete(&dom, state, priority, version)),
                RowIs::Ahead => {
                    let old = row
                        .text("since")
                        .and_then(parse_time)
                        .is_none_or(|t| now - t > PENDING_ROW_KEEP);
                    if old {
                        stale.push(state_delete(&dom, state, priority, version));
                    }
                }
            }
        }
        if !stale.is_empty() {
            self.store().write_bulk(stale).await?;
        }
        Ok(out)
    }

    /// One dispatcher pass: PENDING domains get segments, IDLE ones whose
    /// wake-up time has come too (on a sweep: every IDLE one, and every
    /// domain's state row re-written), and claims of dead fetchers are freed.
    pub async fn dispatch_pass(&self, sweep: bool) -> ApiResult<()> {
        let now = self.inner.clock.now();
        let mut counts = std::collections::HashMap::new();
        for p in PRIORITIES.rev() {
            for info in self.in_state(DomainState::Pending, p, 200).await? {
                *counts.entry(DomainState::Pending).or_insert(0) += 1;
                self.dispatch(&info).await?;
            }
            for info in self.in_state(DomainState::Dispatching, p, 200).await? {
                // A dispatcher that stopped: taken over after the claim TTL.
                let abandoned = info
                    .dispatch_time
                    .as_deref()
                    .and_then(parse_time)
                    .is_none_or(|t| t + self.inner.config.claim_ttl <= now);
                if abandoned {
                    self.dispatch(&info).await?;
                }
            }
            let claimed = self.in_state(DomainState::Claimed, p, 1000).await?;
            *counts.entry(DomainState::Claimed).or_insert(0) += claimed.len();
            self.free_dead_claims(claimed).await?;
        }
        for p in PRIORITIES.rev() {
            let page = self
                .store()
                .slice(
                    &DOMAINS_BY_STATE,
                    &Slice::partition(vec![DomainState::Idle.as_str().into(), p.into()])
                        .limit(1000),
                )
                .await?;
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
        let mut after = None;
        let mut counts = std::collections::HashMap::new();
        loop {
            let page = self.store().scan(&DOMAIN_INFO, after, 500).await?;
            let rows: Vec<Mutation> = page
                .rows
                .iter()
                .map(|r| {
                    let i = DomainInfo::from_row(r);
                    *counts.entry(i.state.as_str()).or_insert(0usize) += 1;
                    state_row(
                        &i.dom,
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
            match page.next {
                Some(n) => after = Some(n),
                None => break,
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

    /// Frees the claims whose fetcher's `active_fetchers` row has expired:
    /// the domain is READY again with what is left of its segment.
    async fn free_dead_claims(&self, claimed: Vec<DomainInfo>) -> ApiResult<()> {
        let mut alive: std::collections::HashMap<String, bool> = Default::default();
        for info in claimed {
            let tok = info.claim_tok.clone();
            let live = match alive.get(&tok) {
                Some(l) => *l,
                None => {
                    let l = self
                        .store()
                        .get(&ACTIVE_FETCHERS, &[tok.as_str().into()])
                        .await?
                        .is_some();
                    alive.insert(tok.clone(), l);
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
                vec![("claim_tok", Some(tok.as_str().into()))],
            )
            .await?;
            if freed.is_ok() {
                crate::kernel::metrics::crawl_freed_claim();
                tracing::info!(dom = %info.dom, fetcher = %tok, "crawl: freed the claim of a fetcher that stopped");
            }
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
            also.push(("dispatch_tok", info.dispatch_tok.clone().map(Value::Text)));
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
        let dom = info.dom.clone();
        let buckets = all_buckets(&[dom.as_str().into()]);
        // Links wanted now.
        let mut wake: Option<OffsetDateTime> = None;
        let getnow = merged_slice(
            self.store().as_ref(),
            &GETNOW,
            &buckets,
            &Slice::partition(vec![]).limit(SEGMENT * 4),
        )
        .await?;
        let mut wanted = Vec::new();
        for r in &getnow.rows {
            match r.text("due").and_then(parse_time) {
                Some(t) if t > now_t => wake = Some(wake.map_or(t, |w| w.min(t))),
                _ => wanted.push(r.clone()),
            }
        }
        // Re-crawls due, from where the last scan stopped.
        let after = info
            .scan_cursor
            .as_deref()
            .and_then(|c| Cursor::decode(c).ok());
        let started_fresh = after.is_none();
        let scan = merged_slice(
            self.store().as_ref(),
            &LINK_STATE,
            &buckets,
            &Slice::partition(vec![]).limit(SEGMENT * 4).after(after),
        )
        .await?;
        let recrawl_after = time::Duration::try_from(self.inner.config.recrawl_after)
            .unwrap_or(time::Duration::days(30));
        let mut fingerprints = HashSet::new();
        let mut recrawls = Vec::new();
        let mut uncrawled = 0;
        for r in &scan.rows {
            if r.boolean("getnow") == Some(true) {
                uncrawled += usize::from(r.text("last_time").is_none());
                continue;
            }
            let Some(last) = r.text("last_time").and_then(parse_time) else {
                uncrawled += 1;
                continue;
            };
            let due = last + recrawl_after;
            if due > now_t {
                wake = Some(wake.map_or(due, |w| w.min(due)));
                continue;
            }
            if let Some(f) = r.bigint("fnv")
                && !fingerprints.insert(f)
            {
                continue;
            }
            recrawls.push(r.clone());
        }
        let take_r = recrawls
            .len()
            .min((SEGMENT / 4).max(SEGMENT.saturating_sub(wanted.len())));
        let take_g = wanted.len().min(SEGMENT - take_r);
        // A link fetched before keeps its validators (a conditional request).
        let wanted: Vec<Row> = wanted.into_iter().take(take_g).collect();
        let keys: Vec<Vec<Value>> = wanted
            .iter()
            .filter_map(|r| LinkKey::of(&r.string("url")).ok())
            .map(|k| k.bucketed())
            .collect();
        let states = self.store().get_many(&LINK_STATE, &keys).await?;
        let mut segment = Vec::new();
        let picked = states
            .into_iter()
            .flatten()
            .chain(recrawls.into_iter().take(take_r));
        for r in picked {
            let Ok(link) = LinkKey::of(&r.string("url")) else {
                continue;
            };
            let mut row = Row::new(&SEGMENTS)
                .set("dom", &link.dom)
                .set("subdom", &link.subdom)
                .set("path", &link.path)
                .set("proto", &link.proto)
                .set("url", &link.url);
            row = row
                .set_opt("time", r.text("last_time"))
                .set_opt("e_tag", r.text("e_tag"))
                .set_opt("last_modified", r.text("last_modified"));
            segment.push(Mutation::upsert(row));
        }
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
                .set("uncrawled_links", uncrawled as i32);
        }
        if scan.next.is_some() {
            // More rows to scan: come back soon.
            wake = Some(now_t);
        }
        let wake_at = wake
            .map(fixed_time)
            .unwrap_or_else(|| later_fixed(&self.inner.clock, self.inner.config.recrawl_after));
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
        tracing::debug!(%dom, segment = n, getnow = take_g, recrawls = take_r, done = done.is_ok(), "crawl: dispatched");
        if done.is_ok() && n > 0 {
            self.inner.links.wake.notify_waiters();
        }
        Ok(Dispatched {
            getnow: take_g,
            recrawls: take_r,
        })
    }

    /// Claims READY domains whose next request may go out now, highest
    /// priority first and, within a priority, the one waiting longest first;
    /// each is crawled in a task of its own while this process has slots.
    /// Each priority's READY domains are read on from where the last pass
    /// stopped, a few pages a pass, so none waits behind the first ones.
    pub async fn claim_pass(&self) -> ApiResult<usize> {
        let mut started = 0;
        let now_ms =
            (self.inner.clock.now() - OffsetDateTime::UNIX_EPOCH).whole_milliseconds() as i64;
        for p in PRIORITIES.rev() {
            let mut pages = 0;
            while self.inner.slots.available_permits() > 0 && pages < CLAIM_PAGES {
                pages += 1;
                let from = self.claim_from().remove(&p);
                let wrapped = from.is_none();
                let (infos, next) = self
                    .in_state_from(DomainState::Ready, p, CLAIM_PAGE, from)
                    .await?;
                if let Some(n) = next.clone() {
                    self.claim_from().insert(p, n);
                }
                let infos: Vec<DomainInfo> = infos
                    .into_iter()
                    .filter(|i| !self.crawling(&i.dom) && i.dispatched && i.claim_tok == ZERO)
                    .collect();
                let keys: Vec<Vec<Value>> =
                    infos.iter().map(|i| vec![i.dom.as_str().into()]).collect();
                let counters = self.store().get_many(&DOMAIN_COUNTERS, &keys).await?;
                let mut due: Vec<(i64, DomainInfo)> = infos
                    .into_iter()
                    .zip(counters)
                    .map(|(i, c)| (c.and_then(|r| r.bigint("next_crawl")).unwrap_or(0), i))
                    .filter(|(at, _)| *at <= now_ms)
                    .collect();
                due.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.dom.cmp(&b.1.dom)));
                for (_, info) in due {
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

    fn claim_from(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<i32, Cursor>> {
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
        tracing::debug!(dom = %info.dom, "crawl: claimed");
        crate::kernel::metrics::crawl_claim();
        self.inner
            .crawling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(info.dom.clone());
        let this = self.clone();
        tokio::spawn(async move {
            let dom = info.dom.clone();
            if let Err(e) = this.crawl_domain(info).await {
                tracing::warn!(%dom, error = e.message(), "crawl: crawling a domain failed");
            }
            this.inner
                .crawling
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&dom);
            drop(slot);
            this.inner.links.wake.notify_waiters();
        });
        Ok(true)
    }

    fn crawling(&self, dom: &str) -> bool {
        self.inner
            .crawling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(dom)
    }

    /// Crawls a claimed domain's segment, one request at a time, spaced by
    /// the delay (or the site's Crawl-delay, or its Retry-After), then
    /// unclaims it (PENDING, for the dispatcher). Stops when the claim is no
    /// longer this fetcher's (freed, excluded). When the turn is over, or the
    /// next request could not go out within it, hands the domain back
    /// (READY, with the rest of its segment) so that a slow site holds a
    /// slot no longer than a turn.
    async fn crawl_domain(&self, claimed: DomainInfo) -> ApiResult<()> {
        let dom = claimed.dom.clone();
        let turn_ends = self.inner.clock.now() + self.inner.config.turn;
        let mut handed_back = false;
        let segment = self
            .store()
            .slice(
                &SEGMENTS,
                &Slice::partition(vec![dom.as_str().into()]).limit(SEGMENT * 2),
            )
            .await?;
        let mut next_at = self.next_crawl(&dom).await?;
        for row in &segment.rows {
            let Some(info) = domain(self.store(), &dom).await? else {
                return Ok(());
            };
            if info.claim_tok != self.token() || info.state != DomainState::Claimed {
                return Ok(());
            }
            if self.inner.clock.now() >= turn_ends || next_at > turn_ends {
                handed_back = true;
                break;
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
                None => {
                    next_at = self.wait_turn(&dom, next_at, &Rules::AllowAll).await?;
                    let fetched = self.inner.robots.fetch(&self.inner.fetcher, &site).await;
                    // The spacing counts from the end of a request.
                    let delay = self.delay_for(fetched.as_ref().unwrap_or(&Rules::AllowAll));
                    next_at = next_at.max(self.inner.clock.now() + delay);
                    fetched
                }
            };
            if next_at > turn_ends && matches!(&rules, Ok(r) if r.allowed(&url)) {
                handed_back = true;
                break;
            }
            let outcome = match rules {
                Err(e) => self.record(&link, row, Outcome::failed(e)).await,
                Ok(rules) if !rules.allowed(&url) => {
                    crate::kernel::metrics::crawl_robots_excluded();
                    self.record(&link, row, Outcome::robots(&site)).await
                }
                Ok(rules) => {
                    next_at = self.wait_turn(&dom, next_at, &rules).await?;
                    let validators = Validators {
                        e_tag: row.text("e_tag").map(str::to_owned),
                        last_modified: row.text("last_modified").map(str::to_owned),
                    };
                    self.inner
                        .fetched
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let got = self.inner.fetcher.get(&url, &validators).await;
                    let (outcome, wait) = Outcome::of(got);
                    crate::kernel::metrics::crawl_fetch(
                        outcome.response.as_ref().map(|r| r.status),
                    );
                    if let Some(w) = wait {
                        if w > self.inner.config.max_wait {
                            // Longer than a slot is held: the domain goes back
                            // with its next time moved on (at most a day), so
                            // the site is not asked again on the next pass.
                            next_at = next_at.max(self.inner.clock.now() + w.min(LONGEST_BACK_OFF));
                            self.record(&link, row, outcome).await?;
                            break;
                        }
                        next_at = next_at.max(self.inner.clock.now() + w);
                        self.book(&dom, next_at).await?;
                    }
                    // The body is read while it is recorded; the spacing
                    // counts from the end of that.
                    let recorded = self.record(&link, row, outcome).await;
                    next_at = next_at.max(self.inner.clock.now() + self.delay_for(&rules));
                    recorded
                }
            };
            outcome?;
        }
        self.book(&dom, next_at).await?;
        let (state, set) = if handed_back {
            tracing::debug!(%dom, "crawl: turn over, domain handed back");
            crate::kernel::metrics::crawl_handed_back();
            (DomainState::Ready, domain_set().set("claim_tok", ZERO))
        } else {
            tracing::debug!(%dom, links = segment.rows.len(), "crawl: segment done");
            // PENDING, so the dispatcher looks at what is left or new.
            let set = domain_set()
                .set("claim_tok", ZERO)
                .set("dispatched", false)
                .set("more", false);
            (DomainState::Pending, set)
        };
        if let Some(info) = domain(self.store(), &dom).await?
            && info.claim_tok == self.token()
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

    /// The spacing of requests to a site: the delay, or its larger
    /// Crawl-delay (at most `max_wait`).
    fn delay_for(&self, rules: &Rules) -> Duration {
        let c = &self.inner.config;
        rules
            .delay()
            .map_or(c.delay, |d| d.min(c.max_wait).max(c.delay))
    }

    /// When the next request to `dom` may go out, as the store knows it.
    async fn next_crawl(&self, dom: &str) -> ApiResult<OffsetDateTime> {
        let ms = self
            .store()
            .get(&DOMAIN_COUNTERS, &[dom.into()])
            .await?
            .and_then(|r| r.bigint("next_crawl"))
            .unwrap_or(0);
        Ok(OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(ms))
    }

    /// Waits until `next_at`, then books the next slot (now + the delay, or
    /// the site's larger Crawl-delay) in `domain_counters` before the request
    /// goes out, for a fetcher that takes over after a crash; returns that
    /// slot (the caller moves it on once the request has ended).
    async fn wait_turn(
        &self,
        dom: &str,
        next_at: OffsetDateTime,
        rules: &Rules,
    ) -> ApiResult<OffsetDateTime> {
        let now = self.inner.clock.now();
        if next_at > now {
            let wait: Duration = (next_at - now).try_into().unwrap_or_default();
            tokio::time::sleep(wait.min(self.inner.config.max_wait)).await;
        }
        let next = self.inner.clock.now() + self.delay_for(rules);
        self.book(dom, next).await?;
        Ok(next)
    }

    /// Stores when the next request to `dom` may go out.
    async fn book(&self, dom: &str, next: OffsetDateTime) -> ApiResult<()> {
        let ms = (next - OffsetDateTime::UNIX_EPOCH).whole_milliseconds() as i64;
        self.store()
            .apply(vec![Mutation::upsert(
                Row::new(&DOMAIN_COUNTERS)
                    .set("dom", dom)
                    .set("next_crawl", ms),
            )])
            .await?;
        Ok(())
    }

    /// Hands the answer to the binaries domain and records the fetch: a
    /// links row, the link's state, its getnow row (kept, with the due time,
    /// for a RETRY), and the segment row gone, in one batch.
    async fn record(&self, link: &LinkKey, segment_row: &Row, outcome: Outcome) -> ApiResult<()> {
        let time = self.now();
        let Outcome {
            arrival,
            response,
            robot_ex,
            mime,
        } = outcome;
        let err = match &arrival {
            Arrival::Failed(e) => Some(e.message().to_owned()),
            _ => None,
        };
        let validators = match &arrival {
            Arrival::Body { validators, .. } => Some(validators.clone()),
            _ => None,
        };
        let settled = self.inner.binaries.link_fetched(&link.url, arrival).await?;
        let fnv = settled.checksum.as_deref().and_then(fingerprint);
        let mut history = link
            .row(&LINKS)
            .set("time", &time)
            .set("getnow", false)
            .set_opt("stat", response.as_ref().map(|r| i32::from(r.status)))
            .set_opt("err", err)
            .set_opt(
                "redto_url",
                response.as_ref().and_then(|r| r.redirected_to.clone()),
            )
            .set_opt("mime", mime)
            .set_opt("fnv", fnv)
            .set(
                "headers",
                Value::TextList(
                    response
                        .as_ref()
                        .map(|r| r.headers.clone())
                        .unwrap_or_default(),
                ),
            );
        if robot_ex {
            history = history.set("robot_ex", true);
        }
        let old = self.store().get(&LINK_STATE, &link.bucketed()).await?;
        let keep = |c: &str| old.as_ref().and_then(|r| r.get(c).cloned());
        // Kept wanted while a binary still waits for this URL's body: a
        // RETRY when it is due, or a new original now.
        let retry = settled.waiting;
        let mut state = link
            .row(&LINK_STATE)
            .set("last_time", &time)
            .set("getnow", retry)
            .set_opt("stat", response.as_ref().map(|r| i32::from(r.status)))
            .set_opt("fnv", fnv.map(Value::BigInt).or_else(|| keep("fnv")));
        // A new answer's validators, else the ones stored (a 304 keeps them).
        let (e_tag, last_modified) = match &validators {
            Some(v) => (
                v.e_tag.clone().map(Value::Text),
                v.last_modified.clone().map(Value::Text),
            ),
            None => (keep("e_tag"), keep("last_modified")),
        };
        state = state
            .set_opt("e_tag", e_tag)
            .set_opt("last_modified", last_modified);
        let mut batch = vec![
            Mutation::upsert(history),
            Mutation::upsert(state),
            Mutation::delete(&SEGMENTS, segment_key(segment_row)),
        ];
        if retry {
            let due = settled
                .retry_at
                .as_deref()
                .and_then(parse_time)
                .map(fixed_time)
                .unwrap_or_else(|| self.now());
            batch.push(Mutation::upsert(link.row(&GETNOW).set("due", due)));
        } else {
            batch.push(Mutation::delete(&GETNOW, link.bucketed()));
        }
        self.store().apply(batch).await?;
        // A registration that gave the URL a new original after
        // `link_fetched` looked found the link still wanted and wrote nothing;
        // the batch above has just cleared that want. Looked at again after
        // the batch, such an original is always seen (it was made before its
        // want was skipped), and a want made from now on sees the cleared flag.
        if !retry && self.inner.binaries.url_waits(&link.url).await? {
            self.inner.links.want_now(&link.url).await?;
        }
        Ok(())
    }

    // ----- reads -----

    pub async fn domain(&self, who: &Principal, dom: &str) -> ApiResult<Option<DomainInfo>> {
        who.require_any(&[Role::Admin, Role::Machine, Role::Editor])?;
        domain(self.store(), dom.trim()).await
    }

    /// The domains in one state, by name, paged.
    pub async fn domains(
        &self,
        who: &Principal,
        state: DomainState,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<Listed<DomainInfo>> {
        who.require_any(&[Role::Admin, Role::Machine, Role::Editor])?;
        let partitions: Vec<Vec<Value>> = PRIORITIES
            .map(|p| vec![state.as_str().into(), p.into()])
            .collect();
        let page = merged_slice(
            self.store().as_ref(),
            &DOMAINS_BY_STATE,
            &partitions,
            &Slice::partition(vec![]).limit(first).after(after),
        )
        .await?;
        let keys: Vec<Vec<Value>> = page
            .rows
            .iter()
            .map(|r| vec![r.string("dom").as_str().into()])
            .collect();
        let infos = self.store().get_many(&DOMAIN_INFO, &keys).await?;
        let mut infos = infos.into_iter();
        // Only valid rows (a domain changing state meanwhile may have a row
        // of its next version too).
        Ok(page.listed(|row| {
            let info = infos.next().flatten().map(|r| DomainInfo::from_row(&r))?;
            let version = row.bigint("version").unwrap_or(0);
            (judge(
                state,
                row.int("priority").unwrap_or(-1),
                version,
                Some(&info),
            ) == RowIs::Valid)
                .then_some(info)
        }))
    }

    /// A link's history, oldest first (the first sighting's time is the epoch).
    pub async fn link(&self, who: &Principal, url: &str) -> ApiResult<Vec<CrawlFetch>> {
        who.require_any(&[Role::Admin, Role::Machine, Role::Editor])?;
        self.history(who, url).await
    }

    /// A link's history for anybody (a binary's own crawls); the response
    /// headers only for the crawl's operators, machine and admin (empty for
    /// others, as the field is part of a public object: a reader's query
    /// asking for it still answers).
    pub async fn history(&self, who: &Principal, url: &str) -> ApiResult<Vec<CrawlFetch>> {
        let mut out = self.all_history(url).await?;
        if !who.has(Role::Machine) {
            for f in &mut out {
                f.headers.clear();
            }
        }
        Ok(out)
    }

    /// The rows of a link's history, at most about 1,000.
    async fn all_history(&self, url: &str) -> ApiResult<Vec<CrawlFetch>> {
        let Ok(link) = LinkKey::of(url) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .store()
                .slice(
                    &LINKS,
                    &Slice::partition(vec![link.dom.as_str().into(), link.bucket().into()])
                        .prefix(vec![
                            link.subdom.as_str().into(),
                            link.path.as_str().into(),
                            link.proto.as_str().into(),
                        ])
                        .limit(200)
                        .after(after),
                )
                .await?;
            out.extend(page.rows.iter().map(CrawlFetch::from_row));
            match page.next {
                Some(n) if out.len() < 1000 => after = Some(n),
                _ => return Ok(out),
            }
        }
    }

    // ----- the admin's levers -----

    /// Sets a domain's priority (0..=9; higher is claimed first).
    pub async fn set_priority(
        &self,
        who: &Principal,
        dom: &str,
        priority: i32,
    ) -> ApiResult<DomainInfo> {
        who.require_any(&[Role::Admin])?;
        if !PRIORITIES.contains(&priority) {
            return Err(ApiError::bad_input(format!(
                "priority must be {}..={}",
                PRIORITIES.start(),
                PRIORITIES.end()
            )));
        }
        self.change(dom, |info| {
            Some((info.state, domain_set().set("priority", priority), vec![]))
        })
        .await
    }

    /// Excludes a domain: it is not dispatched or fetched (a fetcher crawling
    /// it stops before its next request); its links wait.
    pub async fn exclude(&self, who: &Principal, dom: &str, reason: &str) -> ApiResult<DomainInfo> {
        who.require_any(&[Role::Admin])?;
        let reason = reason.trim();
        if reason.is_empty() || reason.len() > 1000 {
            return Err(ApiError::bad_input("a reason of 1 to 1000 bytes is needed"));
        }
        let info = self
            .change(dom, |_| {
                Some((
                    DomainState::Excluded,
                    domain_set()
                        .set("excluded", true)
                        .set("exclude_reason", reason)
                        .set("claim_tok", ZERO)
                        .set("dispatched", false),
                    vec![],
                ))
            })
            .await?;
        self.store()
            .apply(vec![Mutation::delete(
                &SEGMENTS,
                vec![info.dom.as_str().into()],
            )])
            .await?;
        Ok(info)
    }

    /// Includes an excluded domain again (PENDING: its waiting links are dispatched).
    pub async fn include(&self, who: &Principal, dom: &str) -> ApiResult<DomainInfo> {
        who.require_any(&[Role::Admin])?;
        let info = self
            .change(dom, |info| {
                (info.state == DomainState::Excluded).then(|| {
                    (
                        DomainState::Pending,
                        domain_set()
                            .set("excluded", false)
                            .set("exclude_reason", ""),
                        vec![],
                    )
                })
            })
            .await?;
        self.inner.links.wake.notify_waiters();
        Ok(info)
    }

    /// Wants a link fetched again now (an ERROR binary behind it waits for
    /// a body again).
    pub async fn recrawl(&self, who: &Principal, url: &str) -> ApiResult<bool> {
        who.require_any(&[Role::Admin])?;
        let url = url.trim();
        let link = LinkKey::of(url).map_err(ApiError::BadUserInput)?;
        if self
            .store()
            .get(&LINK_STATE, &link.bucketed())
            .await?
            .is_none()
        {
            return Err(ApiError::NotFound(format!("link {}", link.url)));
        }
        self.inner.binaries.retry_url(&link.url).await?;
        self.mark_due(&link.url).await?;
        Ok(true)
    }

    /// Makes a link due now (its getnow row), whatever its last fetch.
    async fn mark_due(&self, url: &str) -> ApiResult<()> {
        let link = LinkKey::of(url).map_err(ApiError::BadUserInput)?;
        if let Some(r) = self.store().get(&LINK_STATE, &link.bucketed()).await? {
            self.store()
                .apply(vec![Mutation::upsert(r.set("getnow", false))])
                .await?;
        }
        self.inner.links.want_now(url).await
    }

    /// Makes every link due now (`kartei recheck-binaries`); returns how many.
    pub async fn mark_all_due(&self) -> ApiResult<u64> {
        let mut after = None;
        let mut n = 0;
        loop {
            let page = self.store().scan(&LINK_STATE, after, 500).await?;
            for r in &page.rows {
                self.mark_due(&r.string("url")).await?;
                n += 1;
            }
            match page.next {
                Some(c) => after = Some(c),
                None => return Ok(n),
            }
        }
    }

    /// Applies `f`'s change to a domain's row (retrying a lost CAS).
    async fn change(
        &self,
        dom: &str,
        f: impl Fn(&DomainInfo) -> Option<(DomainState, Row, Vec<(&'static str, Option<Value>)>)>,
    ) -> ApiResult<DomainInfo> {
        let dom = dom.trim();
        for _ in 0..8 {
            let Some(info) = domain(self.store(), dom).await? else {
                return Err(ApiError::NotFound(format!("crawl domain {dom}")));
            };
            let Some((to, set, also)) = f(&info) else {
                return Ok(info);
            };
            if let Ok(done) = transition(self.store(), &info, to, set, also).await? {
                return Ok(done);
            }
        }
        Err(ApiError::Unavailable)
    }
}

fn segment_key(row: &Row) -> Vec<Value> {
    ["dom", "subdom", "path", "proto"]
        .iter()
        .map(|c| row.get(c).cloned().unwrap_or(Value::Text(String::new())))
        .collect()
}

/// A fetch's result, ready to record.
struct Outcome {
    arrival: Arrival,
    response: Option<crate::domains::web::Response>,
    robot_ex: bool,
    mime: Option<String>,
}

impl Outcome {
    fn failed(e: FetchError) -> Self {
        Outcome {
            arrival: Arrival::Failed(e),
            response: None,
            robot_ex: false,
            mime: None,
        }
    }

    fn robots(site: &str) -> Self {
        Outcome {
            robot_ex: true,
            ..Outcome::failed(FetchError::Permanent(format!(
                "the robots.txt of {site} does not allow {} to fetch it",
                super::robots::AGENT
            )))
        }
    }

    /// The outcome of a request, and how long the site asked us to wait.
    fn of(got: Result<Fetched, FetchError>) -> (Outcome, Option<Duration>) {
        match got {
            Err(e) => (Outcome::failed(e), None),
            Ok(Fetched::NotModified { response }) => (
                Outcome {
                    arrival: Arrival::NotModified,
                    response: Some(response),
                    robot_ex: false,
                    mime: None,
                },
                None,
            ),
            Ok(Fetched::Body {
                body,
                mime,
                validators,
                response,
            }) => (
                Outcome {
                    mime: mime.clone(),
                    arrival: Arrival::Body {
                        body,
                        mime,
                        validators,
                    },
                    response: Some(response),
                    robot_ex: false,
                },
                None,
            ),
            Ok(Fetched::Refused {
                response,
                retry_after,
            }) => {
                let status = response.status;
                let text = format!("the server answered {status}");
                let temporary = status == 429 || status >= 500 || status == 408;
                let e = if temporary {
                    FetchError::Temporary(text)
                } else {
                    FetchError::Permanent(text)
                };
                (
                    Outcome {
                        response: Some(response),
                        ..Outcome::failed(e)
                    },
                    retry_after.filter(|_| temporary),
                )
            }
        }
    }
}

/// A random (version 4) UUID as text.
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

fn hostname() -> String {
    std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown".into())
}
