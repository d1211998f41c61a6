//! Process-wide metrics, exposed at `/metrics` in the OpenMetrics text format
//! (prometheus-client): requests by route and status, their latency, GraphQL
//! errors by code, store round trips by operation and table, rows read,
//! requests sent to the cluster, and the embedded store's group commits.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    op: &'static str,
    table: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobKindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    worker: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerNameLabels {
    worker: String,
}

/// The states a background worker reports.
const WORKER_STATES: [&str; 4] = ["busy", "idle", "failing", "done"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppliedLabels {
    applied: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WikiLabels {
    wiki: String,
}

const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// Declares the metrics: each a field of [`Metrics`], registered (in this
/// order) under its name, with its doc comment as the help text, and made by
/// `with` or else by `Default`.
macro_rules! metrics {
    ($($(#[doc = $help:literal])+ $field:ident: $ty:ty = $name:literal $(with $init:expr)?,)*) => {
        struct Metrics {
            registry: Registry,
            $($field: $ty,)*
        }

        fn metrics() -> Metrics {
            let mut registry = Registry::default();
            $(
                let $field: $ty = metrics!(@init $($init)?);
                registry.register($name, concat!($($help),+).trim(), $field.clone());
            )*
            Metrics { registry, $($field,)* }
        }
    };
    (@init) => { Default::default() };
    (@init $init:expr) => { $init };
}

metrics! {
    /// HTTP requests by route and status
    http: Family<HttpLabels, Counter> = "kartei_http_requests",
    /// HTTP request latency
    latency: Histogram = "kartei_http_request_duration_seconds" with Histogram::new(BUCKETS),
    /// GraphQL errors by extensions.code
    graphql_errors: Family<CodeLabels, Counter> = "kartei_graphql_errors",
    /// Store round trips by operation and table
    store_calls: Family<StoreLabels, Counter> = "kartei_store_calls",
    /// Rows returned by store reads
    rows_read: Counter = "kartei_store_rows_read",
    /// Requests sent to the cluster (cql engine)
    cql_requests: Counter = "kartei_store_cql_requests",
    /// Compare-and-sets whose outcome the cluster left unknown, settled by a serial read
    cas_settled: Family<AppliedLabels, Counter> = "kartei_store_cas_settled",
    /// Counter updates whose outcome the cluster left unknown (they may be missing; repair-views recomputes the counts)
    counter_updates_unsure: Counter = "kartei_store_counter_updates_unsure",
    /// Durable transactions committed by the embedded store's writer
    commits: Counter = "kartei_store_embedded_commits",
    /// Write calls (batches, compare-and-sets) those transactions held
    committed_jobs: Counter = "kartei_store_embedded_committed_writes",
    /// Image-suggestion rows imported
    suggestion_rows: Counter = "kartei_suggestions_rows_imported",
    /// Bad lines in image-suggestion imports
    suggestion_bad_lines: Counter = "kartei_suggestions_bad_lines",
    /// Current-dataset switches (publish or rollback) by wiki
    suggestion_switches: Family<WikiLabels, Counter> = "kartei_suggestions_dataset_switches",
    /// Seconds since each wiki's current dataset became current (refreshed every minute)
    suggestion_age: Family<WikiLabels, Gauge> = "kartei_suggestions_current_dataset_age_seconds",
    /// Feedback recorded on image suggestions
    suggestion_feedback: Counter = "kartei_suggestions_feedback",
    /// Crawler requests by HTTP status (or "error" when none came back)
    crawl_fetches: Family<StatusLabels, Counter> = "kartei_crawl_fetches",
    /// Links robots.txt kept the crawler from
    crawl_robots_excluded: Counter = "kartei_crawl_robots_exclusions",
    /// Domains this process claimed for fetching
    crawl_claims: Counter = "kartei_crawl_claims",
    /// Claims of fetchers that stopped, freed by this process's dispatcher
    crawl_freed_claims: Counter = "kartei_crawl_freed_claims",
    /// Domains this process handed back at the end of a turn, segment unfinished (a slow site or
    /// a long Crawl-delay)
    crawl_handed_back: Counter = "kartei_crawl_handed_back",
    /// Domains per crawl state, as this process's dispatcher last counted them (queue depth)
    crawl_domains: Family<StateLabels, Gauge> = "kartei_crawl_queue_domains",
    /// 1 for each background worker's current state (busy, idle, failing, done), 0 for the others
    worker_state: Family<WorkerLabels, Gauge> = "kartei_worker_state",
    /// Units of background work that failed, by worker
    worker_errors: Family<WorkerNameLabels, Counter> = "kartei_worker_errors",
    /// Batch jobs handed over to this server and running now, by kind
    jobs_running: Family<JobKindLabels, Gauge> = "kartei_jobs_running",
    /// Batch jobs handed over to this server that ended, by kind and outcome (done: exit 0;
    /// failed: bad lines, not published or an error; cancelled: its command went away)
    jobs_ended: Family<JobLabels, Counter> = "kartei_jobs_ended",
}

static METRICS: LazyLock<Metrics> = LazyLock::new(metrics);

/// Store calls so far, process-wide (tests read differences of this).
static STORE_CALLS: AtomicU64 = AtomicU64::new(0);

/// One call of the store API (one round trip as a client sees it; a multi-key
/// read is one call whose single-partition reads run concurrently).
pub fn store_call(op: &'static str, table: &'static str) {
    STORE_CALLS.fetch_add(1, Ordering::Relaxed);
    METRICS
        .store_calls
        .get_or_create(&StoreLabels { op, table })
        .inc();
}

/// Rows returned by store reads.
pub fn rows_read(n: usize) {
    METRICS.rows_read.inc_by(n as u64);
}

/// One request sent to the cluster by the CQL engine.
pub fn store_request() {
    METRICS.cql_requests.inc();
}

/// A compare-and-set of unknown outcome, settled by a serial read.
pub fn cas_settled(applied: bool) {
    METRICS
        .cas_settled
        .get_or_create(&AppliedLabels { applied })
        .inc();
}

/// `n` counter updates that failed or timed out (cql engine).
pub fn counter_updates_unsure(n: usize) {
    METRICS.counter_updates_unsure.inc_by(n as u64);
}

/// One group commit of the embedded writer, holding `jobs` write calls.
pub fn embedded_commit(jobs: usize) {
    METRICS.commits.inc();
    METRICS.committed_jobs.inc_by(jobs as u64);
}

/// An image-suggestion import wrote `rows` and skipped `bad` lines.
pub fn suggestions_imported(rows: usize, bad: usize) {
    METRICS.suggestion_rows.inc_by(rows as u64);
    METRICS.suggestion_bad_lines.inc_by(bad as u64);
}

/// A wiki's current dataset changed.
pub fn suggestion_switch(wiki: &str) {
    let labels = WikiLabels {
        wiki: wiki.to_owned(),
    };
    METRICS.suggestion_switches.get_or_create(&labels).inc();
    METRICS.suggestion_age.get_or_create(&labels).set(0);
}

/// How old a wiki's current dataset is.
pub fn suggestion_dataset_age(wiki: &str, seconds: i64) {
    METRICS
        .suggestion_age
        .get_or_create(&WikiLabels {
            wiki: wiki.to_owned(),
        })
        .set(seconds);
}

pub fn suggestion_feedback() {
    METRICS.suggestion_feedback.inc();
}

pub fn crawl_fetch(status: Option<u16>) {
    let status = status.map_or_else(|| "error".to_owned(), |s| s.to_string());
    METRICS
        .crawl_fetches
        .get_or_create(&StatusLabels { status })
        .inc();
}

pub fn crawl_robots_excluded() {
    METRICS.crawl_robots_excluded.inc();
}

pub fn crawl_claim() {
    METRICS.crawl_claims.inc();
}

pub fn crawl_freed_claim() {
    METRICS.crawl_freed_claims.inc();
}

pub fn crawl_handed_back() {
    METRICS.crawl_handed_back.inc();
}

pub fn crawl_domains(state: &'static str, n: usize) {
    METRICS
        .crawl_domains
        .get_or_create(&StateLabels { state })
        .set(n as i64);
}

/// A background worker is now in `state`.
pub fn worker_state(worker: &str, state: &'static str) {
    for s in WORKER_STATES {
        METRICS
            .worker_state
            .get_or_create(&WorkerLabels {
                worker: worker.to_owned(),
                state: s,
            })
            .set(i64::from(s == state));
    }
}

/// A unit of background work failed.
pub fn worker_error(worker: &str) {
    METRICS
        .worker_errors
        .get_or_create(&WorkerNameLabels {
            worker: worker.to_owned(),
        })
        .inc();
}

/// A handed-over batch job of `kind` started.
pub fn job_started(kind: &'static str) {
    METRICS
        .jobs_running
        .get_or_create(&JobKindLabels { kind })
        .inc();
}

/// A handed-over batch job of `kind` ended: `done`, `failed` or `cancelled`.
pub fn job_ended(kind: &'static str, outcome: &'static str) {
    METRICS
        .jobs_running
        .get_or_create(&JobKindLabels { kind })
        .dec();
    METRICS
        .jobs_ended
        .get_or_create(&JobLabels { kind, outcome })
        .inc();
}

/// Store calls so far.
pub fn store_calls() -> u64 {
    STORE_CALLS.load(Ordering::Relaxed)
}

pub fn http_request(route: &str, status: u16, elapsed: Duration) {
    METRICS
        .http
        .get_or_create(&HttpLabels {
            route: route.to_owned(),
            status,
        })
        .inc();
    METRICS.latency.observe(elapsed.as_secs_f64());
}

pub fn graphql_error(code: &str) {
    METRICS
        .graphql_errors
        .get_or_create(&CodeLabels {
            code: code.to_owned(),
        })
        .inc();
}

/// The OpenMetrics text of every metric.
pub fn render() -> String {
    let mut out = String::new();
    if prometheus_client::encoding::text::encode(&mut out, &METRICS.registry).is_err() {
        tracing::error!("cannot encode the metrics");
    }
    out
}

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
