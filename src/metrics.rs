//! Process-wide counters in Prometheus text format: requests, errors, latency,
//! and store round trips. Hand-rolled (a few atomics) to keep the build lean.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static STORE_CALLS: AtomicU64 = AtomicU64::new(0);
static STORE_REQUESTS: AtomicU64 = AtomicU64::new(0);
static STORE_ROWS_READ: AtomicU64 = AtomicU64::new(0);
static STORE_CALLS_BY: Mutex<BTreeMap<(&'static str, &'static str), u64>> =
    Mutex::new(BTreeMap::new());
static HTTP: Mutex<BTreeMap<(String, u16), u64>> = Mutex::new(BTreeMap::new());
static GRAPHQL_ERRORS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];
static LATENCY_BUCKETS: [AtomicU64; 10] = [const { AtomicU64::new(0) }; 10];
static LATENCY_COUNT: AtomicU64 = AtomicU64::new(0);
static LATENCY_SUM_MICROS: AtomicU64 = AtomicU64::new(0);

/// One call of the store API (one round trip as a client sees it; a multi-key
/// read is one call whose single-partition reads run concurrently).
pub fn store_call(op: &'static str, table: &'static str) {
    STORE_CALLS.fetch_add(1, Ordering::Relaxed);
    *STORE_CALLS_BY
        .lock()
        .expect("metrics")
        .entry((op, table))
        .or_default() += 1;
}

/// Rows returned by store reads.
pub fn rows_read(n: usize) {
    STORE_ROWS_READ.fetch_add(n as u64, Ordering::Relaxed);
}

/// One request sent to the cluster by the CQL engine.
pub fn store_request() {
    STORE_REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// Store calls so far (tests read differences of this).
pub fn store_calls() -> u64 {
    STORE_CALLS.load(Ordering::Relaxed)
}

pub fn http_request(route: &str, status: u16, elapsed: Duration) {
    *HTTP
        .lock()
        .expect("metrics")
        .entry((route.to_owned(), status))
        .or_default() += 1;
    let secs = elapsed.as_secs_f64();
    for (i, b) in BUCKETS.iter().enumerate() {
        if secs <= *b {
            LATENCY_BUCKETS[i].fetch_add(1, Ordering::Relaxed);
        }
    }
    LATENCY_COUNT.fetch_add(1, Ordering::Relaxed);
    LATENCY_SUM_MICROS.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
}

pub fn graphql_error(code: &str) {
    *GRAPHQL_ERRORS
        .lock()
        .expect("metrics")
        .entry(code.to_owned())
        .or_default() += 1;
}

/// The Prometheus text exposition of every metric.
pub fn render() -> String {
    let mut out = String::new();
    out.push_str("# HELP kartei_http_requests_total HTTP requests by route and status.\n");
    out.push_str("# TYPE kartei_http_requests_total counter\n");
    for ((route, status), n) in HTTP.lock().expect("metrics").iter() {
        let _ = writeln!(
            out,
            "kartei_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
        );
    }
    out.push_str("# HELP kartei_http_request_duration_seconds HTTP request latency.\n");
    out.push_str("# TYPE kartei_http_request_duration_seconds histogram\n");
    for (i, b) in BUCKETS.iter().enumerate() {
        let _ = writeln!(
            out,
            "kartei_http_request_duration_seconds_bucket{{le=\"{b}\"}} {}",
            LATENCY_BUCKETS[i].load(Ordering::Relaxed)
        );
    }
    let count = LATENCY_COUNT.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "kartei_http_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
    );
    let _ = writeln!(
        out,
        "kartei_http_request_duration_seconds_sum {}",
        LATENCY_SUM_MICROS.load(Ordering::Relaxed) as f64 / 1e6
    );
    let _ = writeln!(out, "kartei_http_request_duration_seconds_count {count}");
    out.push_str("# HELP kartei_graphql_errors_total GraphQL errors by extensions.code.\n");
    out.push_str("# TYPE kartei_graphql_errors_total counter\n");
    for (code, n) in GRAPHQL_ERRORS.lock().expect("metrics").iter() {
        let _ = writeln!(out, "kartei_graphql_errors_total{{code=\"{code}\"}} {n}");
    }
    out.push_str("# HELP kartei_store_calls_total Store round trips by operation and table.\n");
    out.push_str("# TYPE kartei_store_calls_total counter\n");
    for ((op, table), n) in STORE_CALLS_BY.lock().expect("metrics").iter() {
        let _ = writeln!(
            out,
            "kartei_store_calls_total{{op=\"{op}\",table=\"{table}\"}} {n}"
        );
    }
    out.push_str("# HELP kartei_store_rows_read_total Rows returned by store reads.\n");
    out.push_str("# TYPE kartei_store_rows_read_total counter\n");
    let _ = writeln!(
        out,
        "kartei_store_rows_read_total {}",
        STORE_ROWS_READ.load(Ordering::Relaxed)
    );
    out.push_str(
        "# HELP kartei_store_cql_requests_total Requests sent to the cluster (cql engine).\n",
    );
    out.push_str("# TYPE kartei_store_cql_requests_total counter\n");
    let _ = writeln!(
        out,
        "kartei_store_cql_requests_total {}",
        STORE_REQUESTS.load(Ordering::Relaxed)
    );
    out
}
