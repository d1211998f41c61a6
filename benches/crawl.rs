//! Benchmark (not a test): the crawl frontier's scheduler overhead, on the
//! embedded store.
//!
//! N URLs over 20 local web servers (127.0.0.2 .. 127.0.0.21, each answering
//! any path at once with a small 64×48 JPEG, distinct per path through a
//! comment segment, so every URL is its own original, stored and scaled as in
//! a real crawl, but cheap to decode) are registered, then crawled with zero
//! delay between requests, `--crawl-domains` (8) domains at a time. The
//! reference fetches the same URLs with the crawler's own HTTP client in the
//! same shape (8 hosts at a time, one request at a time per host) with no
//! scheduler, no claims, no history rows and no store. Also reported: the
//! store calls of the whole crawl per claim (dispatch, claim, announce, one
//! segment's fetches with their history rows and binaries writes, unclaim)
//! and per URL, counted by the store seam.
//!
//! Run: `cargo bench --bench crawl` (`-- N`, default 2,000 URLs; `-- --smoke`
//! for 200; `KARTEI_CRAWL_DOMAINS=N` crawls N domains at a time instead of
//! 8). With `KARTEI_BENCH_CASSANDRA=host:port` the same crawl runs on
//! Cassandra too (keyspaces `*_bench<random>`, dropped afterwards; with
//! `--cassandra-only` there alone). Prints one
//! `BENCH|...` line per figure for `scripts/bench.sh`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kartei::app::config::{BinaryArgs, CrawlArgs};
use kartei::domains::web::{FetchLimits, FetchPolicy, Fetcher};
use kartei::kernel::roles::{Principal, Role};
use kartei::store::embedded::EmbeddedStore;
use kartei::store::{Counted, DynStore};

#[path = "common/cassandra.rs"]
mod cassandra;
use cassandra::BenchKeyspaces;

const HOSTS: usize = 20;

fn bench(figure: &str, ours: String, reference: String, ratio: String, goal: &str) {
    println!("  {figure}: {ours} (reference {reference}, {ratio}; goal {goal})");
    println!("BENCH|{figure}|{ours}|{reference}|{ratio}|{goal}");
}

/// `jpeg` made distinct for `path`: a comment segment after the SOI marker.
fn distinct(jpeg: &[u8], path: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(jpeg.len() + path.len() + 4);
    out.extend_from_slice(&jpeg[..2]);
    out.extend_from_slice(&[0xFF, 0xFE]);
    out.extend_from_slice(&((path.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// A small JPEG.
fn jpeg() -> Vec<u8> {
    let img = image::RgbImage::from_fn(64, 48, |x, y| {
        image::Rgb([(x * 4) as u8, (y * 5) as u8, 90])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg)
        .expect("encode");
    out.into_inner()
}

/// Starts one web server on 127.0.0.`last`; returns its base URL. Every
/// request but robots.txt (404: allow all) counts in `hits`.
async fn site(last: usize, body: Arc<Vec<u8>>, hits: Arc<AtomicU64>) -> String {
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.{last}:0"))
        .await
        .expect("bind a loopback address");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let body = body.clone();
        let hits = hits.clone();
        async move {
            use axum::response::IntoResponse;
            if uri.path() == "/robots.txt" {
                return axum::http::StatusCode::NOT_FOUND.into_response();
            }
            hits.fetch_add(1, Ordering::Relaxed);
            (
                [(axum::http::header::CONTENT_TYPE, "image/jpeg")],
                distinct(&body, uri.path()),
            )
                .into_response()
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    format!("http://{addr}")
}

fn binary_args() -> BinaryArgs {
    BinaryArgs {
        fetch_allow: vec!["127.0.0.0/8".parse().expect("cidr")],
        ..BinaryArgs::default()
    }
}

/// The number a counter of `/metrics` shows now.
fn metric(name: &str) -> f64 {
    kartei::kernel::metrics::render()
        .lines()
        .find(|l| l.starts_with(name) && !l.starts_with('#'))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Every store-call counter of `/metrics`, by its labels (`op`, `table`).
fn store_calls() -> std::collections::BTreeMap<String, f64> {
    kartei::kernel::metrics::render()
        .lines()
        .filter(|l| l.starts_with("kartei_store_calls_total{"))
        .filter_map(|l| {
            let (labels, v) = l.rsplit_once(' ')?;
            Some((
                labels
                    .trim_start_matches("kartei_store_calls_total")
                    .to_owned(),
                v.parse().ok()?,
            ))
        })
        .collect()
}

/// The crawl settings as the server's command line reads them, from its
/// environment variables and defaults: a run varies `KARTEI_CRAWL_DOMAINS`
/// (or any other) as it would for the server.
fn server_crawl_args() -> CrawlArgs {
    #[derive(clap::Parser)]
    struct Server {
        #[command(flatten)]
        crawl: CrawlArgs,
    }
    <Server as clap::Parser>::parse_from(["kartei"]).crawl
}

async fn run(n: usize, cassandra_only: bool) {
    let body = Arc::new(jpeg());
    let hits = Arc::new(AtomicU64::new(0));
    let mut bases = Vec::new();
    for i in 0..HOSTS {
        bases.push(site(2 + i, body.clone(), hits.clone()).await);
    }
    let urls: Vec<String> = (0..n)
        .map(|i| format!("{}/img/{i}.jpg", bases[i % HOSTS]))
        .collect();

    // The reference: the crawler's client, 8 hosts at a time, one request at a time per host.
    let args = CrawlArgs {
        crawl_delay_ms: 0,
        crawl_pass: Duration::from_millis(50),
        ..server_crawl_args()
    };
    let fetcher = Fetcher::new(
        FetchPolicy {
            allow: binary_args().fetch_allow,
        },
        FetchLimits {
            max_bytes: 8 << 20,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(5),
            total_timeout: Duration::from_secs(30),
            min_rate: 1024,
            max_redirects: 5,
        },
    )
    .expect("fetcher");
    let started = Instant::now();
    let per_host: Vec<Vec<&String>> = (0..HOSTS)
        .map(|h| urls.iter().skip(h).step_by(HOSTS).collect())
        .collect();
    kartei::kernel::bounded(per_host, args.crawl_domains, |list| {
        let fetcher = &fetcher;
        async move {
            for u in list {
                let (status, _) = fetcher.small(u, 1 << 20).await.expect("fetch");
                assert_eq!(status, 200);
            }
        }
    })
    .await;
    let direct = n as f64 / started.elapsed().as_secs_f64();

    if !cassandra_only {
        let dir = tempfile::tempdir().expect("tempdir");
        let store: DynStore = Arc::new(Counted::new(
            EmbeddedStore::open(dir.path()).expect("store"),
        ));
        crawl("embedded", store, &urls, &hits, direct, &args).await;
    }
    if let Some(nodes) = std::env::var("KARTEI_BENCH_CASSANDRA")
        .ok()
        .filter(|v| !v.is_empty())
    {
        let (keyspaces, store) = BenchKeyspaces::create(&nodes).await;
        crawl("cassandra", store, &urls, &hits, direct, &args).await;
        keyspaces.drop_all().await;
    }
}

/// Registers every URL, then crawls until every binary has settled, on
/// `store`; prints the figures beside the direct fetches' rate.
async fn crawl(
    engine: &str,
    store: DynStore,
    urls: &[String],
    hits: &AtomicU64,
    direct: f64,
    args: &CrawlArgs,
) {
    let n = urls.len();
    hits.store(0, Ordering::Relaxed);
    let binaries = kartei::app::binaries(&binary_args(), store.clone()).expect("binaries");
    let machine = Principal::local("bench", &[Role::Machine]);
    let mut refs = Vec::with_capacity(n);
    for u in urls {
        refs.push(
            binaries
                .register_url(&machine, u, "bench", None)
                .await
                .map_err(|e| e.message())
                .expect("register")
                .reference_id,
        );
    }
    let crawl =
        kartei::app::crawl(args, &binary_args(), store.clone(), binaries.clone()).expect("crawl");
    let calls_before = store.round_trips();
    let by_kind_before = store_calls();
    let commits_before = metric("kartei_store_embedded_commits_total");
    let requests_before = metric("kartei_store_cql_requests_total");
    let claims_before = metric("kartei_crawl_claims_total");
    let disk_before = disk_bytes_written();
    let started = Instant::now();
    crawl.spawn();
    while (hits.load(Ordering::Relaxed) as usize) < n {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the crawl stalled at {} of {n}",
            hits.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Every fetched body is handed to the binaries pipeline before the next
    // request to its host; the last ones settle here.
    let calls = store.round_trips() - calls_before;
    let mut by_kind: Vec<(String, f64)> = store_calls()
        .into_iter()
        .map(|(k, v)| {
            let before = by_kind_before.get(&k).copied().unwrap_or(0.0);
            (k, v - before)
        })
        .filter(|(_, v)| *v > 0.0)
        .collect();
    by_kind.sort_by(|a, b| b.1.total_cmp(&a.1));
    let commits = metric("kartei_store_embedded_commits_total") - commits_before;
    if engine == "embedded" {
        // The embedded store's one writer groups concurrent writes.
        let writes: f64 = by_kind
            .iter()
            .filter(|(k, _)| {
                ["apply", "write_bulk", "cas", "insert_new"]
                    .iter()
                    .any(|op| k.contains(&format!("\"{op}\"")))
            })
            .map(|(_, v)| v)
            .sum();
        println!(
            "  durable commits: {:.2} per URL, {:.1} writes each, one every {:.2} ms",
            commits / n as f64,
            writes / commits.max(1.0),
            started.elapsed().as_secs_f64() * 1000.0 / commits.max(1.0)
        );
        if let (Some(before), Some(after)) = (disk_before, disk_bytes_written()) {
            // What the B-tree's copy-on-write pages cost per URL.
            println!(
                "  bytes written to storage: {:.0} KiB per URL, {:.0} KiB per commit",
                (after - before) as f64 / 1024.0 / n as f64,
                (after - before) as f64 / 1024.0 / commits.max(1.0)
            );
        }
    }
    let requests = metric("kartei_store_cql_requests_total") - requests_before;
    if requests > 0.0 {
        println!("  CQL requests: {:.1} per URL", requests / n as f64);
    }
    println!("  store calls per URL by kind:");
    for (k, v) in &by_kind {
        println!("    {:>6.2}  {k}", v / n as f64);
    }
    let claims = metric("kartei_crawl_claims_total") - claims_before;
    let mut pending: Vec<&String> = refs.iter().collect();
    while !pending.is_empty() {
        let mut left = Vec::new();
        for r in pending {
            let (_, o) = binaries.resolve(r).await.ok().flatten().expect("reference");
            if matches!(
                o.status,
                Some(kartei::domains::binaries::model::BinaryStatus::Processing) | None
            ) {
                left.push(r);
            }
        }
        pending = left;
        if !pending.is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "binaries never settled"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let ours = n as f64 / started.elapsed().as_secs_f64();
    // Stopped, so that its passes do not count in the next engine's figures.
    crawl.workers().stop(Duration::from_secs(10)).await;
    binaries.workers().stop(Duration::from_secs(10)).await;
    bench(
        &format!("crawl: {n} URLs over {HOSTS} local hosts, zero delay, {engine}"),
        format!("{ours:.0} URLs/s"),
        format!("{direct:.0} URLs/s fetched directly, same client and shape"),
        format!("x{:.2}", ours / direct),
        "scheduler overhead (report)",
    );
    bench(
        &format!(
            "crawl: store calls per URL (claims, fetch history, storing and scaling), {engine}"
        ),
        format!("{:.1} calls", calls as f64 / n as f64),
        format!(
            "{claims:.0} claim cycles of {:.0} URLs, {:.0} calls each",
            n as f64 / claims.max(1.0),
            calls as f64 / claims.max(1.0)
        ),
        "n/a".into(),
        "report",
    );
}

/// Bytes this process has caused to be written to storage so far
/// (`write_bytes` of `/proc/self/io`); none where that is not readable.
fn disk_bytes_written() -> Option<u64> {
    std::fs::read_to_string("/proc/self/io")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))?
        .trim()
        .parse()
        .ok()
}

fn main() {
    kartei::tune_allocator();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = if args.iter().any(|a| a == "--smoke") {
        200
    } else {
        args.iter().find_map(|a| a.parse().ok()).unwrap_or(2_000)
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(n, args.iter().any(|a| a == "--cassandra-only")));
}
