//! The settings every test server starts with: short waits, downloads that
//! may reach the test web servers on 127.0.0.2 .. 127.0.0.255 and nothing
//! else internal, a crawler that keeps the same spacing on every test site.

use kartei::app::config::BinaryArgs;
use kartei::kernel::limits::Limits;

pub const SECRET: &str = "kartei-test-secret-0123456789-0123456789";

/// The default limits, with a DataLoader window long enough that a loaded
/// test machine (4 tests at once on 2 cores) still batches a level together
/// on either engine (the default, batching when the request yields, is
/// tested on its own: themes' round-trip test on the embedded store).
pub fn test_limits() -> Limits {
    Limits {
        batch_window_ms: 20,
        ..Limits::default()
    }
}

/// A loopback address of its own for a test's web server (127.0.0.3 ..
/// 127.0.0.254, in turn): each is a crawl domain of its own, so tests never
/// wait for each other's politeness; never 127.0.0.1, which fetches must not reach.
pub fn origin_ip() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Start where another test process on the same shared store is unlikely to be.
    let offset = std::process::id() % 252;
    format!("127.0.0.{}", 3 + (offset + n) % 252)
}

/// The networks test web servers listen on: 127.0.0.2 .. 127.0.0.255, not 127.0.0.1.
pub const ORIGIN_NETWORKS: &[&str] = &[
    "127.0.0.2/31",
    "127.0.0.4/30",
    "127.0.0.8/29",
    "127.0.0.16/28",
    "127.0.0.32/27",
    "127.0.0.64/26",
    "127.0.0.128/25",
];

pub fn origin_networks() -> Vec<kartei::domains::web::Cidr> {
    ORIGIN_NETWORKS.iter().map(|c| c.parse().unwrap()).collect()
}

/// Binary settings for tests: downloads may reach 127.0.0.2 .. 127.0.0.255
/// (where the test image servers listen) and nothing else internal, not
/// 127.0.0.1; failures retry at once; nothing is too young to collect.
pub fn test_binary_args() -> BinaryArgs {
    BinaryArgs {
        max_upload_bytes: 8 << 20,
        fetch_allow: origin_networks(),
        fetch_attempts: 2,
        fetch_retry_delay: 0,
        fetch_connect_timeout: 2,
        fetch_read_timeout: 2,
        gc_grace: 0,
        ..Default::default()
    }
}

/// Crawler settings for tests: 50 ms between requests to one site (every
/// test server on the shared Cassandra keyspace may crawl any test's sites,
/// so they all keep the same spacing), short passes, a short claim TTL (a
/// stopped fetcher's domains are taken over quickly).
pub fn test_crawl_args() -> kartei::app::config::CrawlArgs {
    kartei::app::config::CrawlArgs {
        crawl_delay_ms: 50,
        crawl_pass: std::time::Duration::from_millis(100),
        claim_ttl: std::time::Duration::from_secs(2),
        ..Default::default()
    }
}
