//! A polite crawler: robots.txt and its delay, Retry-After, and a slow site
//! that hands its slot on.

use std::time::{Duration, Instant};

use kartei::app::config::CrawlArgs;
use kartei::domains::binaries::model::BinaryStatus;
use serde_json::{Value, json};

use super::{all_settled, crawl_args, crawling_server, register, site};
use crate::both_engines;
use crate::support::Engine;

async fn robots_txt_and_the_delay_are_honoured(engine: Engine) {
    let srv = crawling_server(engine, Some(crawl_args(200))).await;
    let s = site(
        Some("User-agent: *\nDisallow: /\n\nUser-agent: kartei\nDisallow: /private/\nCrawl-delay: 1\n"),
        Duration::ZERO,
    )
    .await;
    let open: Vec<String> = (0..3).map(|i| format!("{}/open/{i}.jpg", s.base)).collect();
    let private = format!("{}/private/x.jpg", s.base);
    let mut refs = Vec::new();
    for u in &open {
        refs.push(register(&srv.binaries, u).await);
    }
    let private_ref = register(&srv.binaries, &private).await;
    refs.push(private_ref.clone());
    let statuses = all_settled(&srv.binaries, &refs, Duration::from_secs(60)).await;
    assert_eq!(
        statuses,
        vec![
            BinaryStatus::Ok,
            BinaryStatus::Ok,
            BinaryStatus::Ok,
            BinaryStatus::Error
        ]
    );
    let (_, o) = srv.binaries.resolve(&private_ref).await.unwrap().unwrap();
    assert!(o.error.unwrap_or_default().contains("robots.txt"));
    let hits = s.hits();
    assert_eq!(hits.get("/robots.txt"), Some(&1), "{hits:?}");
    assert_eq!(hits.get("/private/x.jpg"), None, "{hits:?}");
    for i in 0..3 {
        assert_eq!(hits.get(&format!("/open/{i}.jpg")), Some(&1), "{hits:?}");
    }
    // robots.txt asks for 1 s, more than the 200 ms of the flag.
    let gap = s.min_gap().unwrap();
    assert!(gap >= Duration::from_millis(1000), "{gap:?}");
    // The history says why. The crawler writes the fetch's history row just
    // after it has settled the binary, so the row can come a moment later.
    let admin = srv.token(&["admin"]);
    let h = srv
        .data_until(
            "query($u: String!) { crawlLink(url: $u) { firstSighting robotsExcluded status error } }",
            json!({"u": private}),
            Some(&admin),
            |h| h["crawlLink"].as_array().is_some_and(|r| r.len() >= 2),
        )
        .await;
    let rows = h["crawlLink"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{h}");
    assert_eq!(rows[1]["robotsExcluded"], json!(true));
    assert_eq!(rows[1]["status"], Value::Null);
}

async fn retry_after_is_honoured(engine: Engine) {
    let srv = crawling_server(engine, Some(crawl_args(50))).await;
    let s = site(None, Duration::ZERO).await;
    let r = register(&srv.binaries, &format!("{}/busy.jpg", s.base)).await;
    let statuses = all_settled(
        &srv.binaries,
        std::slice::from_ref(&r),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(statuses, vec![BinaryStatus::Ok]);
    let busy: Vec<Instant> = s
        .requests()
        .into_iter()
        .filter(|(p, _)| p == "/busy.jpg")
        .map(|(_, t)| t)
        .collect();
    assert_eq!(busy.len(), 2);
    assert!(
        busy[1] - busy[0] >= Duration::from_secs(1),
        "{:?}",
        busy[1] - busy[0]
    );
}

/// One fetch slot and a 1 s turn: a site whose robots.txt asks for 3 s
/// between requests hands the slot back whenever its next request cannot go
/// out within the turn, so another site's link is fetched while the slow
/// site waits, not after its whole segment; the slow site keeps its spacing.
async fn a_slow_site_hands_its_slot_on(engine: Engine) {
    let args = CrawlArgs {
        crawl_domains: 1,
        crawl_turn: Duration::from_secs(1),
        ..crawl_args(50)
    };
    let srv = crawling_server(engine, Some(args)).await;
    let slow = site(Some("User-agent: *\nCrawl-delay: 3\n"), Duration::ZERO).await;
    let quick = site(None, Duration::ZERO).await;
    let mut refs = Vec::new();
    for i in 0..3 {
        refs.push(register(&srv.binaries, &format!("{}/slow/{i}.jpg", slow.base)).await);
    }
    // The slow site has the slot once its robots.txt is asked for.
    let started = Instant::now();
    while !slow.hits().contains_key("/robots.txt") {
        assert!(started.elapsed() < Duration::from_secs(30), "never claimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    refs.push(register(&srv.binaries, &format!("{}/img/quick.jpg", quick.base)).await);
    let statuses = all_settled(&srv.binaries, &refs, Duration::from_secs(60)).await;
    assert_eq!(statuses, vec![BinaryStatus::Ok; 4]);
    let quick_at = quick
        .requests()
        .into_iter()
        .find(|(p, _)| p == "/img/quick.jpg")
        .expect("the quick site's link")
        .1;
    let slow_images: Vec<Instant> = slow
        .requests()
        .into_iter()
        .filter(|(p, _)| p.starts_with("/slow/"))
        .map(|(_, t)| t)
        .collect();
    assert_eq!(slow_images.len(), 3);
    let last = slow_images.iter().max().unwrap();
    assert!(
        quick_at < *last,
        "the quick site waited for the slow one's segment"
    );
    let gap = slow.min_gap().unwrap();
    assert!(gap >= Duration::from_secs(3), "{gap:?}");
}

/// At zero delay a fetch is recorded beside the next requests to its site
/// (a few at a time): still one request at a time, a body larger than what
/// is read ahead read to its last byte before the next request, every link
/// fetched once, every fetch's history written before the domain is handed
/// back, and URLs serving the same bytes still end on one original.
async fn at_zero_delay_records_run_beside_the_requests_one_at_a_time(engine: Engine) {
    let srv = crawling_server(engine, Some(crawl_args(0))).await;
    // A few milliseconds per answer, so a request would overlap another if
    // one went out before the last one's body was read.
    let s = site(None, Duration::from_millis(3)).await;
    let mut urls: Vec<String> = (0..16).map(|i| format!("{}/img/{i}.jpg", s.base)).collect();
    urls.extend((0..4).map(|i| format!("{}/big/{i}.jpg", s.base)));
    urls.extend((0..4).map(|i| format!("{}/same/{i}.jpg", s.base)));
    let mut refs = Vec::new();
    for u in &urls {
        refs.push(register(&srv.binaries, u).await);
    }
    let statuses = all_settled(&srv.binaries, &refs, Duration::from_secs(60)).await;
    assert_eq!(statuses, vec![BinaryStatus::Ok; urls.len()]);
    let mut same = Vec::new();
    for r in &refs[refs.len() - 4..] {
        let (_, o) = srv
            .binaries
            .resolve(r)
            .await
            .unwrap()
            .expect("the reference");
        same.push(o.id);
    }
    same.dedup();
    assert_eq!(same.len(), 1, "one file, one original: {same:?}");
    let hits = s.hits();
    for u in &urls {
        let path = u.trim_start_matches(&s.base);
        assert_eq!(hits.get(path), Some(&1), "{hits:?}");
    }
    assert_eq!(
        s.most_at_once.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "two requests to the site at once"
    );
    // Once the domain is no longer claimed, every fetch has its history row.
    let admin = srv.token(&["admin"]);
    let d = srv
        .data_until(
            "query($d: String!) { crawlDomain(domain: $d) { state } }",
            json!({"d": s.host()}),
            Some(&admin),
            |d| d["crawlDomain"]["state"] != json!("CLAIMED"),
        )
        .await;
    assert_ne!(d["crawlDomain"]["state"], json!("CLAIMED"), "{d}");
    for u in &urls {
        let h = srv
            .data(
                "query($u: String!) { crawlLink(url: $u) { status } }",
                json!({"u": u}),
                Some(&admin),
            )
            .await;
        let rows = h["crawlLink"].as_array().unwrap();
        assert!(rows.iter().any(|r| r["status"] == json!(200)), "{u}: {h}");
    }
}

both_engines!(
    at_zero_delay_records_run_beside_the_requests_one_at_a_time,
    robots_txt_and_the_delay_are_honoured,
    retry_after_is_honoured,
    a_slow_site_hands_its_slot_on,
);
