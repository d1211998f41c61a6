//! Instances share the crawl: each URL fetched once, and a dead instance's
//! domain taken over by another.

use std::time::{Duration, Instant};

use kartei::domains::binaries::model::BinaryStatus;
use kartei::domains::binaries::service::Binaries;

use super::{Site, all_settled, crawl_args, crawling_server, register, site};
use crate::both_engines;
use crate::support::{Engine, store, test_binary_args};

/// Two crawl services over one store (two instances), 500 URLs over 20 sites.
async fn instances_share_the_crawl_and_fetch_each_url_once(engine: Engine) {
    let srv = crawling_server(engine, Some(crawl_args(50))).await;
    let second_binaries =
        kartei::app::binaries(&test_binary_args(), srv.store.clone()).expect("binaries");
    let second = kartei::app::crawl(
        &crawl_args(50),
        &test_binary_args(),
        srv.store.clone(),
        second_binaries,
    )
    .expect("crawl");
    second.spawn();
    let mut sites = Vec::new();
    for _ in 0..20 {
        sites.push(site(None, Duration::ZERO).await);
    }
    let mut refs = Vec::new();
    for i in 0..25 {
        for s in &sites {
            refs.push(register(&srv.binaries, &format!("{}/img/{i}.jpg", s.base)).await);
        }
    }
    let statuses = all_settled(&srv.binaries, &refs, Duration::from_secs(240)).await;
    assert!(
        statuses.iter().all(|s| *s == BinaryStatus::Ok),
        "{statuses:?}"
    );
    for s in &sites {
        let hits = s.hits();
        for i in 0..25 {
            assert_eq!(hits.get(&format!("/img/{i}.jpg")), Some(&1), "{hits:?}");
        }
        let gap = s.min_gap().unwrap();
        assert!(gap >= Duration::from_millis(50), "{} {gap:?}", s.base);
    }
    let (a, b) = (srv.crawl.fetched(), second.fetched());
    assert_eq!(a + b, 500, "{a} + {b}");
    if engine == Engine::Embedded {
        assert!(a > 0 && b > 0, "both instances fetched: {a} and {b}");
    }
}

/// An instance dies mid-crawl (its runtime stops, as under kill -9): the
/// other takes its domain over once the dead one's announcement expires.
async fn a_dead_instance_s_domain_is_taken_over(engine: Engine) {
    let ts = store(engine).await;
    let shared = ts.store.clone();
    let (s, binaries, refs) = slow_urls(&shared).await;
    // The first instance, in a runtime of its own.
    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    {
        let shared = shared.clone();
        doomed.spawn(async move {
            let b = kartei::app::binaries(&test_binary_args(), shared.clone()).expect("binaries");
            let c =
                kartei::app::crawl(&crawl_args(50), &test_binary_args(), shared, b).expect("crawl");
            c.spawn();
            std::future::pending::<()>().await;
        });
    }
    assert!(
        crawled_some(&s, Duration::from_secs(60)).await,
        "the first instance never crawled"
    );
    doomed.shutdown_background();
    a_survivor_finishes(shared, &binaries, &refs, &s).await;
    drop(ts);
}

/// A slow site (150 ms an answer) and 20 of its URLs registered over `shared`.
async fn slow_urls(shared: &kartei::store::DynStore) -> (Site, Binaries, Vec<String>) {
    let s = site(None, Duration::from_millis(150)).await;
    let binaries = kartei::app::binaries(&test_binary_args(), shared.clone()).expect("binaries");
    let mut refs = Vec::new();
    for i in 0..20 {
        refs.push(register(&binaries, &format!("{}/slow/{i}.jpg", s.base)).await);
    }
    (s, binaries, refs)
}

/// Whether the site has answered four of its slow URLs within `bound`.
async fn crawled_some(s: &Site, bound: Duration) -> bool {
    let started = Instant::now();
    while s
        .requests()
        .iter()
        .filter(|(p, _)| p.starts_with("/slow/"))
        .count()
        < 4
    {
        if started.elapsed() > bound {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Right after an instance died mid-crawl: a new instance over `shared`
/// takes the domain over once the dead fetcher's claim expires and fetches
/// every URL; only the request in flight at the death may come twice.
async fn a_survivor_finishes(
    shared: kartei::store::DynStore,
    binaries: &Binaries,
    refs: &[String],
    s: &Site,
) {
    let killed_at = Instant::now();
    let survivor = kartei::app::crawl(
        &crawl_args(50),
        &test_binary_args(),
        shared,
        binaries.clone(),
    )
    .expect("crawl");
    survivor.spawn();
    let statuses = all_settled(binaries, refs, Duration::from_secs(120)).await;
    assert!(
        statuses.iter().all(|s| *s == BinaryStatus::Ok),
        "{statuses:?}"
    );
    let hits = s.hits();
    // (robots.txt is read once per process.)
    let twice: Vec<_> = hits
        .iter()
        .filter(|(p, n)| **n > 1 && p.as_str() != "/robots.txt")
        .collect();
    assert!(twice.len() <= 1, "{twice:?}");
    for i in 0..20 {
        assert!(hits.contains_key(&format!("/slow/{i}.jpg")), "{hits:?}");
    }
    eprintln!(
        "taken over and finished {:.1} s after the death; {} request(s) repeated",
        killed_at.elapsed().as_secs_f64(),
        twice.len()
    );
}

both_engines!(
    instances_share_the_crawl_and_fetch_each_url_once,
    a_dead_instance_s_domain_is_taken_over,
);

/// A real `kartei serve` process on the Cassandra node crawls a slow site and
/// is killed with SIGKILL mid-crawl; an instance in this test takes its domain
/// over once the dead fetcher's claim expires (`--claim-ttl 2s`) and fetches
/// the rest. Only the request in flight at the kill may be sent twice. (The
/// embedded store cannot be shared by two processes; its instances are tested
/// in one process above.)
#[test]
fn a_killed_server_process_s_domain_is_taken_over() {
    if crate::support::cassandra_off() {
        return;
    }
    crate::support::run(async {
        // Keyspaces of its own: other tests' crawlers on the shared ones
        // would take part in crawling this site (and, under load, fetch a
        // URL again when their own claims expire), which is not what this
        // test is about.
        let store = crate::support::fresh_keyspaces().await;
        let env = store.env().to_owned();
        let shared: kartei::store::DynStore =
            std::sync::Arc::new(kartei::store::Counted::new(store));
        let (s, binaries, refs) = slow_urls(&shared).await;
        let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_kartei"))
            .args(["serve", "--listen", "127.0.0.1:0", "--env", &env])
            .args([
                "--cassandra",
                &std::env::var("KARTEI_TEST_CASSANDRA").unwrap(),
            ])
            .args(["--auth-secret", "a-killed-process-secret-0123456789-abcdef"])
            .args([
                "--crawl",
                "on",
                "--crawl-delay-ms",
                "50",
                "--crawl-pass",
                "100ms",
            ])
            .args(["--claim-ttl", "2s"])
            .args(["--fetch-allow", &crate::support::ORIGIN_NETWORKS.join(",")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start kartei serve");
        let crawled = crawled_some(&s, Duration::from_secs(90)).await;
        server.kill().expect("SIGKILL");
        server.wait().expect("reaped");
        assert!(crawled, "the server process never crawled");
        a_survivor_finishes(shared, &binaries, &refs, &s).await;
    });
}
