//! robots.txt per site (RFC 9309, parsed by `texting_robots`): fetched
//! through the crawler's SSRF-safe client, cached for a day. A 4xx answer
//! means no rules; a 5xx answer or no answer means "try later" (the RFC's
//! "unreachable": assume complete disallow until it can be read).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use texting_robots::Robot;

use crate::domains::web::{FetchError, Fetcher};

/// The user agent token robots.txt groups are matched against.
pub const AGENT: &str = "kartei";
/// How long a site's rules are kept.
const KEEP: Duration = Duration::from_secs(24 * 3600);
/// The most of a robots.txt that is read (the RFC asks for at least 500 KiB).
const MAX_BYTES: usize = 512 * 1024;
/// Sites whose rules are kept at once.
const MAX_SITES: usize = 10_000;
/// Memory the kept rules may take, estimated as [`WEIGHT_PER_BYTE`] times
/// their files' sizes: 10,000 hostile sites of 512 KiB each would otherwise
/// have held 10–30 GiB of parsed rules.
const MAX_WEIGHT: usize = 64 << 20;
/// What a byte of robots.txt may become once parsed: each rule is kept
/// percent-encoded (a non-ASCII byte is three) and again for matching.
const WEIGHT_PER_BYTE: usize = 4;

#[derive(Clone)]
pub enum Rules {
    /// No robots.txt (4xx), or an empty one.
    AllowAll,
    Parsed(Arc<Robot>),
}

impl Rules {
    pub fn allowed(&self, url: &str) -> bool {
        match self {
            Rules::AllowAll => true,
            Rules::Parsed(r) => r.allowed(url),
        }
    }

    /// The Crawl-delay asked for our agent (or `*`).
    pub fn delay(&self) -> Option<Duration> {
        match self {
            Rules::AllowAll => None,
            Rules::Parsed(r) => r
                .delay
                .filter(|d| d.is_finite() && *d > 0.0)
                .map(|d| Duration::from_secs_f32(d.min(86_400.0))),
        }
    }
}

/// Parses a robots.txt body as the RFC says (an unparsable one allows all).
pub fn parse(body: &[u8]) -> Rules {
    match Robot::new(AGENT, body) {
        Ok(r) => Rules::Parsed(Arc::new(r)),
        Err(_) => Rules::AllowAll,
    }
}

#[derive(Default)]
pub struct RobotsCache {
    /// Site -> (fetched at, rules, weight).
    sites: Mutex<HashMap<String, (Instant, Rules, usize)>>,
}

impl RobotsCache {
    /// The cached rules of `site` (`scheme://host[:port]`), if fresh.
    pub fn cached(&self, site: &str) -> Option<Rules> {
        let sites = self.sites.lock().unwrap_or_else(|p| p.into_inner());
        sites
            .get(site)
            .filter(|(at, _, _)| at.elapsed() < KEEP)
            .map(|(_, r, _)| r.clone())
    }

    /// Fetches and caches the rules of `site`; a temporary failure when the
    /// file cannot be read now (the links wait).
    pub async fn fetch(&self, fetcher: &Fetcher, site: &str) -> Result<Rules, FetchError> {
        let (status, body) = fetcher
            .small(&format!("{site}/robots.txt"), MAX_BYTES)
            .await
            .map_err(|e| match e {
                FetchError::Permanent(m) | FetchError::Temporary(m) => {
                    FetchError::Temporary(format!("robots.txt of {site} could not be read: {m}"))
                }
            })?;
        let weight = site.len() + WEIGHT_PER_BYTE * body.len();
        let rules = match status {
            // Off the async workers: a rule with `*` or `$` compiles a regex.
            200..=299 => tokio::task::spawn_blocking(move || parse(&body))
                .await
                .unwrap_or(Rules::AllowAll),
            400..=499 => Rules::AllowAll,
            _ => {
                return Err(FetchError::Temporary(format!(
                    "robots.txt of {site} answered {status}"
                )));
            }
        };
        self.keep(site, &rules, weight);
        Ok(rules)
    }

    /// Keeps `rules` of `site`, expired and then the oldest sites making
    /// room, within [`MAX_SITES`] and [`MAX_WEIGHT`].
    fn keep(&self, site: &str, rules: &Rules, weight: usize) {
        if weight > MAX_WEIGHT {
            return;
        }
        let mut sites = self.sites.lock().unwrap_or_else(|p| p.into_inner());
        sites.remove(site);
        let total = |sites: &HashMap<String, (Instant, Rules, usize)>| {
            sites.values().map(|(_, _, w)| w).sum::<usize>()
        };
        if sites.len() >= MAX_SITES || total(&sites) + weight > MAX_WEIGHT {
            sites.retain(|_, (at, _, _)| at.elapsed() < KEEP);
            // Then the oldest go until the new rules fit.
            let mut by_age: Vec<(Instant, String)> = sites
                .iter()
                .map(|(k, (at, _, _))| (*at, k.clone()))
                .collect();
            by_age.sort();
            let mut kept = total(&sites);
            for (_, oldest) in by_age {
                if sites.len() < MAX_SITES && kept + weight <= MAX_WEIGHT {
                    break;
                }
                if let Some((_, _, w)) = sites.remove(&oldest) {
                    kept -= w;
                }
            }
        }
        sites.insert(site.to_owned(), (Instant::now(), rules.clone(), weight));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_for_our_agent_apply() {
        let r = parse(
            b"User-agent: *\nDisallow: /\n\nUser-agent: kartei\nDisallow: /private/\nAllow: /private/ok.jpg\nCrawl-delay: 2\n",
        );
        assert!(r.allowed("http://h/a.jpg"));
        assert!(!r.allowed("http://h/private/x.jpg"));
        assert!(r.allowed("http://h/private/ok.jpg"));
        assert_eq!(r.delay(), Some(Duration::from_secs(2)));
        let r = parse(b"User-agent: *\nDisallow: /\n");
        assert!(!r.allowed("http://h/a.jpg"));
        assert_eq!(parse(b"").delay(), None);
        assert!(parse(b"\xff\xfe garbage").allowed("http://h/a"));
    }

    #[test]
    fn the_cache_keeps_its_weight_by_dropping_the_oldest() {
        let cache = RobotsCache::default();
        let big = MAX_WEIGHT / 3;
        for i in 0..3 {
            cache.keep(&format!("http://s{i}"), &Rules::AllowAll, big);
        }
        assert!(cache.cached("http://s0").is_some());
        cache.keep("http://s3", &Rules::AllowAll, big);
        assert!(cache.cached("http://s0").is_none(), "the oldest made room");
        for i in 1..4 {
            assert!(cache.cached(&format!("http://s{i}")).is_some(), "s{i}");
        }
        // Rules heavier than the whole budget are used but not kept.
        cache.keep("http://huge", &Rules::AllowAll, MAX_WEIGHT + 1);
        assert!(cache.cached("http://huge").is_none());
        assert!(cache.cached("http://s3").is_some());
    }
}
