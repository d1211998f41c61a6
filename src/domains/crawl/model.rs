//! The crawl tables (seed 004, walker's schema, with the changes cql/README.md
//! lists): the links' fetch history, each link's current state, the links
//! wanted now, the segments handed to fetchers, the domains (with a query table
//! per state instead of secondary indexes), the live fetchers, each domain's
//! earliest next request, and the layout constants.

use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use crate::store::ColumnType::Text;
use crate::store::buckets::bucket_of;
use crate::store::table;
use crate::store::{Mutation, Order, Row, Table, Value, col};

const ASC: Order = Order::Asc;

/// A link's clustering key in every table keyed by link.
const LINK_KEY: &[(crate::store::Column, Order)] = &[
    (col("subdom", Text), ASC),
    (col("path", Text), ASC),
    (col("proto", Text), ASC),
];

table! {
    /// Every fetch of a link, plus its first sighting (`time` = the epoch):
    /// `((dom, bucket), subdom, path, proto, time)`, bucketed by the link.
    pub LINKS: Crawl.links
        partition(dom: Text, bucket: Int)
        clustering(subdom: Text Asc, path: Text Asc, proto: Text Asc, time: Text Asc)
        columns(
            url: Text, stat: Int, err: Text, robot_ex: Boolean, redto_url: Text, getnow: Boolean,
            mime: Text, fnv: BigInt, headers: TextList
        )
}

table! {
    /// Each link's current state, one row per link (the dispatcher's scan of
    /// re-crawls due, without reading the history): `((dom, bucket), subdom, path, proto)`.
    pub LINK_STATE: Crawl.link_state
        partition(dom: Text, bucket: Int)
        clustering = LINK_KEY
        columns(
            url: Text, last_time: Text, stat: Int, fnv: BigInt, e_tag: Text, last_modified: Text,
            getnow: Boolean
        )
}

table! {
    /// The links wanted as soon as possible (new, re-crawl asked for, or a retry
    /// and when it is due): `((dom, bucket), subdom, path, proto)`.
    pub GETNOW: Crawl.getnow
        partition(dom: Text, bucket: Int)
        clustering = LINK_KEY
        columns(url: Text, due: Text)
}

table! {
    /// The links handed to the fetcher of a domain (at most [`SEGMENT`]):
    /// `((dom), subdom, path, proto)`.
    pub SEGMENTS: Crawl.segments
        partition(dom: Text)
        clustering = LINK_KEY
        columns(url: Text, time: Text, e_tag: Text, last_modified: Text)
}

table! {
    /// One row per domain: priority, claim, dispatch, exclusion, counts, and its state.
    pub DOMAIN_INFO: Crawl.domain_info
        partition(dom: Text)
        columns(
            priority: Int, claim_tok: Text, claim_time: Text, dispatched: Boolean,
            excluded: Boolean, exclude_reason: Text, tot_links: Int, uncrawled_links: Int,
            queued_links: Int, last_dispatch: Text, last_empty_dispatch: Text, state: Text,
            dispatch_tok: Text, dispatch_time: Text, more: Boolean, wake_at: Text,
            scan_cursor: Text, version: BigInt
        )
}

table! {
    /// The query table that replaces walker's indexes on claim_tok, priority and
    /// dispatched: the domains in each state, by priority:
    /// `((state, priority), dom, version)`. A row is valid while its version is
    /// the domain row's; each state change writes a row of the next version
    /// first (so a domain is never missing from its state), and removes the
    /// row of the version it left after.
    pub DOMAINS_BY_STATE: Crawl.domains_by_state
        partition(state: Text, priority: Int)
        clustering(dom: Text Asc, version: BigInt Asc)
        columns(wake_at: Text, since: Text)
}

table! {
    /// The live fetchers, each row written with a TTL and refreshed.
    pub ACTIVE_FETCHERS: Crawl.active_fetchers
        partition(tok: Text)
        columns(started: Text, host: Text)
}

table! {
    /// When the next request to a domain may go out (ms since the epoch), written
    /// by its one fetcher before each request, so a fetcher that takes over keeps
    /// the spacing.
    pub DOMAIN_COUNTERS: Crawl.domain_counters
        partition(dom: Text)
        columns(next_crawl: BigInt)
}

/// A time as milliseconds since the epoch (`domain_counters.next_crawl`).
pub(super) fn to_ms(t: OffsetDateTime) -> i64 {
    (t - OffsetDateTime::UNIX_EPOCH).whole_milliseconds() as i64
}

pub(super) fn from_ms(ms: i64) -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(ms)
}

/// The `domain_counters` row saying that the next request to `domain` may go
/// out at `next`.
pub(super) fn next_crawl_row(domain: &str, next: OffsetDateTime) -> Mutation {
    Mutation::upsert(
        Row::new(&DOMAIN_COUNTERS)
            .set("dom", domain)
            .set("next_crawl", to_ms(next)),
    )
}

table! {
    /// Layout constants stored with the data (checked at start-up).
    pub WALKER_GLOBALS: Crawl.walker_globals
        partition(key: Text)
        columns(val: Int)
}

pub static TABLES: &[&Table] = &[
    &LINKS,
    &LINK_STATE,
    &GETNOW,
    &SEGMENTS,
    &DOMAIN_INFO,
    &DOMAINS_BY_STATE,
    &ACTIVE_FETCHERS,
    &DOMAIN_COUNTERS,
    &WALKER_GLOBALS,
];

/// Links per segment.
pub const SEGMENT: usize = 500;
/// Priorities a domain may have (the partitions of `domains_by_state`).
pub const PRIORITIES: std::ops::RangeInclusive<i32> = 0..=9;
pub const DEFAULT_PRIORITY: i32 = 5;
/// The token of no fetcher (walker's zero UUID).
pub const ZERO: &str = "00000000-0000-0000-0000-000000000000";
/// The first sighting's `time`.
pub const EPOCH: &str = "1970-01-01T00:00:00.000000Z";

/// A domain's states; `domains_by_state` holds each domain under its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, async_graphql::Enum)]
pub enum DomainState {
    /// Links wait to be dispatched.
    Pending,
    /// A dispatcher builds its segment.
    Dispatching,
    /// Its segment waits for a fetcher.
    Ready,
    /// A fetcher crawls it.
    Claimed,
    /// Nothing due.
    Idle,
    /// An admin excluded it.
    Excluded,
}

impl DomainState {
    pub const ALL: [DomainState; 6] = [
        DomainState::Pending,
        DomainState::Dispatching,
        DomainState::Ready,
        DomainState::Claimed,
        DomainState::Idle,
        DomainState::Excluded,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DomainState::Pending => "PENDING",
            DomainState::Dispatching => "DISPATCHING",
            DomainState::Ready => "READY",
            DomainState::Claimed => "CLAIMED",
            DomainState::Idle => "IDLE",
            DomainState::Excluded => "EXCLUDED",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// A domain's row.
#[derive(Clone, Debug)]
pub struct DomainInfo {
    pub domain: String,
    pub state: DomainState,
    pub priority: i32,
    pub claim_token: String,
    pub claim_time: Option<String>,
    pub dispatched: bool,
    pub excluded: bool,
    pub exclude_reason: Option<String>,
    pub total_links: Option<i32>,
    pub uncrawled_links: Option<i32>,
    pub queued_links: Option<i32>,
    pub last_dispatch: Option<String>,
    pub last_empty_dispatch: Option<String>,
    pub dispatch_token: Option<String>,
    pub dispatch_time: Option<String>,
    pub more: bool,
    pub wake_at: Option<String>,
    pub scan_cursor: Option<String>,
    /// Bumped by every change of state or priority.
    pub version: i64,
}

impl DomainInfo {
    pub fn from_row(r: &Row) -> Self {
        DomainInfo {
            domain: r.string("dom"),
            state: r
                .text("state")
                .and_then(DomainState::parse)
                .unwrap_or(DomainState::Pending),
            priority: r.int("priority").unwrap_or(DEFAULT_PRIORITY),
            claim_token: r.text("claim_tok").unwrap_or(ZERO).to_owned(),
            claim_time: r.text("claim_time").map(str::to_owned),
            dispatched: r.boolean("dispatched").unwrap_or(false),
            excluded: r.boolean("excluded").unwrap_or(false),
            exclude_reason: r
                .text("exclude_reason")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            total_links: r.int("tot_links"),
            uncrawled_links: r.int("uncrawled_links"),
            queued_links: r.int("queued_links"),
            last_dispatch: r.text("last_dispatch").map(str::to_owned),
            last_empty_dispatch: r.text("last_empty_dispatch").map(str::to_owned),
            dispatch_token: r.text("dispatch_tok").map(str::to_owned),
            dispatch_time: r.text("dispatch_time").map(str::to_owned),
            more: r.boolean("more").unwrap_or(false),
            wake_at: r.text("wake_at").map(str::to_owned),
            scan_cursor: r.text("scan_cursor").map(str::to_owned),
            version: r.bigint("version").unwrap_or(0),
        }
    }
}

/// A link's key parts, from its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkKey {
    /// The registrable domain (public suffix list), or the IP literal.
    pub dom: String,
    /// The host without the domain and its dot ("" for none).
    pub subdom: String,
    /// Path and query.
    pub path: String,
    /// The scheme, with `:port` when the URL names a port.
    pub proto: String,
    pub url: String,
}

impl LinkKey {
    /// The key parts of an http(s) URL.
    pub fn of(url: &str) -> Result<LinkKey, String> {
        let mut parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("only http and https URLs are crawled".into());
        }
        // A link's rows are public (a binary's crawl history): never with a
        // URL's credentials, which the key leaves out anyway.
        let url = if crate::domains::web::strip_credentials(&mut parsed) {
            parsed.to_string()
        } else {
            url.to_owned()
        };
        let (domain, subdomain) = match parsed.host() {
            None => return Err("the URL has no host".into()),
            Some(url::Host::Ipv4(a)) => (a.to_string(), String::new()),
            Some(url::Host::Ipv6(a)) => (format!("[{a}]"), String::new()),
            Some(url::Host::Domain(h)) => {
                let host = h.trim_end_matches('.').to_ascii_lowercase();
                let domain = psl::domain_str(&host).unwrap_or(&host).to_owned();
                let subdomain = host
                    .strip_suffix(&domain)
                    .map(|s| s.trim_end_matches('.').to_owned())
                    .unwrap_or_default();
                (domain, subdomain)
            }
        };
        let mut path = parsed.path().to_owned();
        if let Some(q) = parsed.query() {
            path.push('?');
            path.push_str(q);
        }
        let protocol = match parsed.port() {
            Some(p) => format!("{}:{p}", parsed.scheme()),
            None => parsed.scheme().to_owned(),
        };
        Ok(LinkKey {
            dom: domain,
            subdom: subdomain,
            path,
            proto: protocol,
            url,
        })
    }

    /// The bucket of this link's rows (a function of its clustering key).
    pub fn bucket(&self) -> i32 {
        bucket_of(&format!(
            "{}\u{1}{}\u{1}{}",
            self.subdom, self.path, self.proto
        ))
    }

    /// The key of the link's rows in a bucketed table.
    pub fn bucketed(&self) -> Vec<Value> {
        vec![
            self.dom.as_str().into(),
            self.bucket().into(),
            self.subdom.as_str().into(),
            self.path.as_str().into(),
            self.proto.as_str().into(),
        ]
    }

    /// A row of a bucketed table with the key set.
    pub fn row(&self, table: &'static Table) -> Row {
        Row::new(table)
            .set("dom", &self.dom)
            .set("bucket", self.bucket())
            .set("subdom", &self.subdom)
            .set("path", &self.path)
            .set("proto", &self.proto)
            .set("url", &self.url)
    }

    /// Scheme, host and port: the site whose robots.txt applies.
    pub fn site(&self) -> String {
        let host = if self.subdom.is_empty() {
            self.dom.clone()
        } else {
            format!("{}.{}", self.subdom, self.dom)
        };
        match self.proto.split_once(':') {
            Some((scheme, port)) => format!("{scheme}://{host}:{port}"),
            None => format!("{}://{host}", self.proto),
        }
    }
}

const FIXED: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

/// A time as fixed-width text (sorts as text; the links' clustering `time`).
pub fn fixed_time(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(FIXED)
        .unwrap_or_default()
}

/// The first 64 bits of a hex checksum: a link's content hash (the links'
/// `fnv` column, named after walker's hash; ours is a SHA-256 prefix).
pub fn fingerprint(checksum: &str) -> Option<i64> {
    let hex = checksum.get(..16)?;
    u64::from_str_radix(hex, 16).ok().map(|v| v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_keyed_by_registrable_domain() {
        let k = LinkKey::of("https://images.smb.museum/a/b.jpg?x=1").unwrap();
        assert_eq!(
            (
                k.dom.as_str(),
                k.subdom.as_str(),
                k.path.as_str(),
                k.proto.as_str()
            ),
            ("smb.museum", "images", "/a/b.jpg?x=1", "https")
        );
        assert_eq!(k.site(), "https://images.smb.museum");
        let k = LinkKey::of("http://www.bbc.co.uk/x.png").unwrap();
        assert_eq!((k.dom.as_str(), k.subdom.as_str()), ("bbc.co.uk", "www"));
        let k = LinkKey::of("http://127.0.0.2:8123/x.png").unwrap();
        assert_eq!(
            (k.dom.as_str(), k.subdom.as_str(), k.proto.as_str()),
            ("127.0.0.2", "", "http:8123")
        );
        assert_eq!(k.site(), "http://127.0.0.2:8123");
        let k = LinkKey::of("http://[::1]:80/x").unwrap();
        assert_eq!(k.dom, "[::1]");
        assert_eq!(k.proto, "http");
        let k = LinkKey::of("https://example.org/").unwrap();
        assert_eq!((k.dom.as_str(), k.subdom.as_str()), ("example.org", ""));
        assert!(LinkKey::of("ftp://example.org/x").is_err());
        assert!(LinkKey::of("nonsense").is_err());
        let k = LinkKey::of("https://user:pw@example.org/x.jpg").unwrap();
        assert_eq!(k.url, "https://example.org/x.jpg", "credentials never kept");
        assert_eq!(
            k.bucketed(),
            LinkKey::of("https://example.org/x.jpg").unwrap().bucketed()
        );
    }

    #[test]
    fn times_sort_as_text_and_fingerprints_read_hex() {
        let a = fixed_time(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(a, EPOCH);
        let b = fixed_time(OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(1500));
        let c = fixed_time(OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(2));
        assert!(a < b && b < c, "{a} {b} {c}");
        assert_eq!(fingerprint("ffffffffffffffff00"), Some(-1));
        assert_eq!(fingerprint("00000000000000ff"), Some(255));
        assert_eq!(fingerprint("xyz"), None);
    }
}
