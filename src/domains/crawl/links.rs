//! The links half of the frontier: what the binaries domain hands a URL to
//! when it wants the URL fetched, and a link's fetch history as readers see it.

use std::sync::Arc;

use futures::TryStreamExt;
use tokio::sync::Notify;

use super::model::*;
use super::service::Crawl;
use super::state::{create_pending, domain_set, read_domain, transition};
use crate::domains::binaries::service::Frontier;
use crate::domains::web::is_secret_header;
use crate::kernel::Clock;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::store::{Cas, Condition, Contention, DynStore, Mutation, Row, Slice, pages};

/// Wakes this process's crawl loops when a link is wanted or a segment is
/// ready. One per process, so every `Links` and `Crawl` of it shares it.
static WAKE: std::sync::LazyLock<Arc<Notify>> =
    std::sync::LazyLock::new(|| Arc::new(Notify::new()));

/// Reads of a domain's row that may lose to other writers before a want settles.
const WANT_TRIES: usize = 8;
/// Rows of a link's history read at a time, and (about) the most returned.
const HISTORY_PAGE: usize = 200;
const HISTORY_MOST: usize = 1000;

/// The links half of the frontier: what the binaries domain hands URLs to.
#[derive(Clone)]
pub struct Links {
    store: DynStore,
    clock: Clock,
    pub(super) wake: Arc<Notify>,
}

/// What a wanted link does to its domain, as its row stands.
#[derive(Debug)]
enum WantDoes<'a> {
    /// No row yet: the domain is created PENDING.
    Create,
    /// Nothing: it is PENDING (the dispatcher will look) or EXCLUDED (the
    /// link waits), or a look under way is already told more arrived.
    Nothing,
    /// This IDLE domain becomes PENDING.
    MakePending(&'a DomainInfo),
    /// The dispatcher or fetcher busy with it (in this state) is told that
    /// more arrived.
    MarkMore(DomainState),
}

fn want_does(info: Option<&DomainInfo>) -> WantDoes<'_> {
    let Some(info) = info else {
        return WantDoes::Create;
    };
    match info.state {
        DomainState::Pending | DomainState::Excluded => WantDoes::Nothing,
        DomainState::Idle => WantDoes::MakePending(info),
        _ if info.more => WantDoes::Nothing,
        state => WantDoes::MarkMore(state),
    }
}

/// A link's state row once it is wanted: its last fetch's columns kept.
fn wanted_state(key: &LinkKey, old: Option<&Row>) -> Row {
    let mut row = key.row(&LINK_STATE).set("getnow", true);
    if let Some(old) = old {
        for c in ["last_time", "stat", "fnv", "e_tag", "last_modified"] {
            if let Some(v) = old.get(c) {
                row = row.set(c, v.clone());
            }
        }
    }
    row
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
        let now = fixed_time(self.clock.now());
        if state.as_ref().and_then(|r| r.boolean("getnow")) != Some(true) {
            let mut batch = vec![
                Mutation::upsert(wanted_state(&key, state.as_ref())),
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

    /// Makes `domain` PENDING when IDLE (or new); otherwise marks that more
    /// arrived, so the dispatcher's next look includes it.
    async fn domain_wants_dispatch(&self, domain: &str) -> ApiResult<()> {
        let mut contention = Contention::new(WANT_TRIES);
        loop {
            let info = read_domain(&self.store, domain).await?;
            let settled = match want_does(info.as_ref()) {
                WantDoes::Nothing => true,
                WantDoes::Create => {
                    let since = fixed_time(self.clock.now());
                    create_pending(&self.store, domain, &since).await?
                }
                WantDoes::MakePending(info) => transition(
                    &self.store,
                    info,
                    DomainState::Pending,
                    domain_set(),
                    vec![],
                )
                .await?
                .is_ok(),
                WantDoes::MarkMore(state) => {
                    let marked = self
                        .store
                        .cas(Cas {
                            row: domain_set().set("dom", domain).set("more", true),
                            condition: Condition::Equals(vec![(
                                "state",
                                Some(state.as_str().into()),
                            )]),
                            ttl: None,
                        })
                        .await?;
                    marked.applied
                }
            };
            if settled {
                return Ok(());
            }
            if !contention.lost().await {
                return Err(ApiError::Unavailable);
            }
        }
    }
}

#[async_trait::async_trait]
impl Frontier for Links {
    async fn want(&self, url: &str) -> ApiResult<()> {
        self.want_now(url).await
    }
}

/// One row of a link's history (its first sighting, or a fetch: the status
/// none when no answer came).
#[derive(Clone, Debug)]
pub struct CrawlFetch {
    pub url: String,
    pub time: String,
    pub first_sighting: bool,
    pub status: Option<i32>,
    pub error: Option<String>,
    pub robots_excluded: bool,
    pub redirect_url: Option<String>,
    pub mime: Option<String>,
    /// The first 64 bits of the content's SHA-256 (the `fnv` column).
    pub content_hash: Option<i64>,
    pub headers: Vec<String>,
}

impl CrawlFetch {
    fn from_row(r: &Row) -> Self {
        let time = r.string("time");
        CrawlFetch {
            url: r.string("url"),
            first_sighting: time == EPOCH,
            time,
            status: r.int("stat"),
            error: r.text("err").map(str::to_owned),
            robots_excluded: r.boolean("robot_ex").unwrap_or(false),
            redirect_url: r.text("redto_url").map(str::to_owned),
            mime: r.text("mime").map(str::to_owned),
            content_hash: r.bigint("fnv"),
            // Rows stored before such headers were dropped at the fetch.
            headers: r
                .text_list("headers")
                .into_iter()
                .filter(|h| !is_secret_header(h))
                .collect(),
        }
    }
}

impl Crawl {
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

    /// The rows of a link's history, at most about [`HISTORY_MOST`].
    async fn all_history(&self, url: &str) -> ApiResult<Vec<CrawlFetch>> {
        let Ok(link) = LinkKey::of(url) else {
            return Ok(Vec::new());
        };
        let slice = Slice::partition(vec![link.dom.as_str().into(), link.bucket().into()])
            .prefix(vec![
                link.subdom.as_str().into(),
                link.path.as_str().into(),
                link.proto.as_str().into(),
            ])
            .limit(HISTORY_PAGE);
        let mut pages = std::pin::pin!(pages(self.store().as_ref(), &LINKS, slice));
        let mut out = Vec::new();
        while out.len() < HISTORY_MOST
            && let Some(page) = pages.try_next().await?
        {
            out.extend(page.rows.iter().map(CrawlFetch::from_row));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(state: DomainState, more: bool) -> DomainInfo {
        DomainInfo {
            state,
            more,
            ..DomainInfo::from_row(&Row::new(&DOMAIN_INFO).set("dom", "example.org"))
        }
    }

    #[test]
    fn a_wanted_link_wakes_its_domain_only_when_nobody_will_look() {
        assert!(matches!(want_does(None), WantDoes::Create));
        let idle = domain(DomainState::Idle, false);
        assert!(matches!(want_does(Some(&idle)), WantDoes::MakePending(_)));
        for quiet in [DomainState::Pending, DomainState::Excluded] {
            let quiet = domain(quiet, false);
            assert!(
                matches!(want_does(Some(&quiet)), WantDoes::Nothing),
                "{quiet:?}"
            );
        }
        for busy in [
            DomainState::Dispatching,
            DomainState::Ready,
            DomainState::Claimed,
        ] {
            let (fresh, told) = (domain(busy, false), domain(busy, true));
            assert!(matches!(want_does(Some(&fresh)), WantDoes::MarkMore(s) if s == busy));
            assert!(
                matches!(want_does(Some(&told)), WantDoes::Nothing),
                "{busy:?}"
            );
        }
    }

    #[test]
    fn a_link_wanted_again_keeps_what_its_last_fetch_learnt() {
        let key = LinkKey::of("https://images.example.org/a.jpg").unwrap();
        let fresh = wanted_state(&key, None);
        assert_eq!(fresh.boolean("getnow"), Some(true));
        assert_eq!(fresh.text("e_tag"), None);
        let old = key
            .row(&LINK_STATE)
            .set("last_time", "2024-01-01T00:00:00.000000Z")
            .set("stat", 200)
            .set("fnv", 42i64)
            .set("e_tag", "\"v1\"")
            .set("getnow", false);
        let again = wanted_state(&key, Some(&old));
        assert_eq!(again.boolean("getnow"), Some(true));
        assert_eq!(again.int("stat"), Some(200));
        assert_eq!(again.bigint("fnv"), Some(42));
        assert_eq!(again.text("e_tag"), Some("\"v1\""));
        assert_eq!(again.text("last_time"), old.text("last_time"));
        assert_eq!(again.text("last_modified"), None);
    }

    #[test]
    fn a_history_row_reads_with_its_secret_headers_dropped() {
        let key = LinkKey::of("https://example.org/a.jpg").unwrap();
        let first = CrawlFetch::from_row(&key.row(&LINKS).set("time", EPOCH));
        assert!(first.first_sighting && !first.robots_excluded && first.status.is_none());
        let fetch = CrawlFetch::from_row(
            &key.row(&LINKS)
                .set("time", "2024-01-01T00:00:00.000000Z")
                .set("stat", 301)
                .set("redto_url", "https://example.org/b.jpg")
                .set("robot_ex", true)
                .set("fnv", 7i64)
                .set(
                    "headers",
                    crate::store::Value::TextList(vec![
                        "set-cookie: sid=1".into(),
                        "content-type: image/jpeg".into(),
                    ]),
                ),
        );
        assert!(!fetch.first_sighting);
        assert_eq!(fetch.status, Some(301));
        assert_eq!(
            fetch.redirect_url.as_deref(),
            Some("https://example.org/b.jpg")
        );
        assert!(fetch.robots_excluded);
        assert_eq!(fetch.content_hash, Some(7));
        assert_eq!(fetch.headers, ["content-type: image/jpeg"]);
    }
}
