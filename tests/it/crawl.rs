//! The crawl frontier: robots.txt and the delay per domain, several instances
//! sharing one crawl (every URL fetched once), an instance that dies mid-crawl,
//! Retry-After, exclusion and the admin's levers. The web sites are real HTTP
//! servers on addresses of their own (127.0.0.x), which count every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kartei::app::config::CrawlArgs;
use kartei::domains::binaries::model::BinaryStatus;
use kartei::domains::binaries::service::Binaries;
use kartei::kernel::roles::{Principal, Role};
use serde_json::{Value, json};

use crate::binaries::jpeg;
use crate::both_engines;
use crate::support::{
    Engine, TestServer, code, origin_ip, serve_crawling, store, test_binary_args, test_crawl_args,
    test_limits, uid,
};

/// A web site that logs every request (path, when it arrived).
#[derive(Clone)]
struct Site {
    base: String,
    log: Arc<Mutex<Vec<(String, Instant)>>>,
}

#[derive(Clone)]
struct SiteState {
    log: Arc<Mutex<Vec<(String, Instant)>>>,
    robots: Option<&'static str>,
    /// Each image answer waits this long (a slow site).
    slow: Duration,
    busy_left: Arc<Mutex<u32>>,
}

/// A distinct small JPEG per name (the binaries domain folds identical content).
fn image_for(name: &str) -> Vec<u8> {
    let h = name
        .bytes()
        .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    jpeg(16 + h % 40, 16 + (h / 40) % 40 + (name.len() as u32 % 7))
}

async fn site(robots: Option<&'static str>, slow: Duration) -> Site {
    let ip = origin_ip();
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let state = SiteState {
        log: log.clone(),
        robots,
        slow,
        busy_left: Arc::new(Mutex::new(1)),
    };
    async fn note(s: &SiteState, path: String) {
        s.log.lock().unwrap().push((path, Instant::now()));
    }
    let app = axum::Router::new()
        .route(
            "/robots.txt",
            get(|State(s): State<SiteState>| async move {
                note(&s, "/robots.txt".into()).await;
                match s.robots {
                    Some(text) => text.into_response(),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }),
        )
        .route(
            "/busy.jpg",
            get(|State(s): State<SiteState>| async move {
                note(&s, "/busy.jpg".into()).await;
                let first = {
                    let mut left = s.busy_left.lock().unwrap();
                    let first = *left > 0;
                    *left = left.saturating_sub(1);
                    first
                };
                if first {
                    return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")])
                        .into_response();
                }
                ([(header::CONTENT_TYPE, "image/jpeg")], image_for("busy")).into_response()
            }),
        )
        .route(
            "/{dir}/{name}",
            get(
                |State(s): State<SiteState>, Path((dir, name)): Path<(String, String)>| async move {
                    note(&s, format!("/{dir}/{name}")).await;
                    tokio::time::sleep(s.slow).await;
                    (
                        [(header::CONTENT_TYPE, "image/jpeg")],
                        image_for(&format!("{dir}/{name}")),
                    )
                },
            ),
        )
        .with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Site {
        base: format!("http://{ip}:{port}"),
        log,
    }
}

impl Site {
    /// Its host: the crawl domain of its links (an IP).
    fn host(&self) -> String {
        let authority = self.base.trim_start_matches("http://");
        authority.split(':').next().unwrap().to_owned()
    }

    fn requests(&self) -> Vec<(String, Instant)> {
        self.log.lock().unwrap().clone()
    }

    fn hits(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for (p, _) in self.requests() {
            *out.entry(p).or_insert(0) += 1;
        }
        out
    }

    /// The shortest gap between two requests that arrived one after the other.
    fn min_gap(&self) -> Option<Duration> {
        let mut at: Vec<Instant> = self.requests().into_iter().map(|(_, t)| t).collect();
        at.sort();
        at.windows(2).map(|w| w[1] - w[0]).min()
    }
}

fn machine() -> Principal {
    Principal::local("crawl-test", &[Role::Machine])
}

async fn register(b: &Binaries, url: &str) -> String {
    b.register_url(&machine(), url, &format!("crawl-{}", uid()), None)
        .await
        .expect("register")
        .reference_id
}

/// Waits until every reference's binary is settled (not PROCESSING or RETRY);
/// returns their statuses.
async fn all_settled(b: &Binaries, refs: &[String], bound: Duration) -> Vec<BinaryStatus> {
    let started = Instant::now();
    loop {
        let mut out = Vec::new();
        for r in refs {
            let (_, o) = b.resolve(r).await.unwrap().expect("the reference");
            match o.status {
                Some(BinaryStatus::Processing | BinaryStatus::Retry) | None => break,
                Some(s) => out.push(s),
            }
        }
        if out.len() == refs.len() {
            return out;
        }
        assert!(
            started.elapsed() < bound,
            "{} of {} settled after {bound:?}",
            out.len(),
            refs.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn crawl_args(delay_ms: u64) -> CrawlArgs {
    CrawlArgs {
        crawl_delay_ms: delay_ms,
        ..test_crawl_args()
    }
}

/// A server whose crawler runs, in keyspaces of its own on Cassandra: the
/// tests count the requests a site sees, and other tests' crawlers on the
/// shared keyspaces would fetch its links too (each instance reads
/// robots.txt for itself).
async fn crawling_server(engine: Engine, args: Option<CrawlArgs>) -> TestServer {
    serve_crawling(
        crate::support::isolated_store(engine).await,
        test_limits(),
        test_binary_args(),
        args,
    )
    .await
}

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

const DOMAIN: &str = "query($d: String!) { crawlDomain(domain: $d) { domain state priority excluded excludeReason claimed } }";

async fn admins_exclude_include_and_prioritise_domains(engine: Engine) {
    // The crawler is not running yet: the domain waits, PENDING. (Keyspaces
    // of its own: other tests' crawlers would fetch the waiting link.)
    let srv = serve_crawling(
        crate::support::isolated_store(engine).await,
        test_limits(),
        test_binary_args(),
        None,
    )
    .await;
    let s = site(None, Duration::ZERO).await;
    let url = format!("{}/img/excluded.jpg", s.base);
    let r = register(&srv.binaries, &url).await;
    let dom = s.host();
    let admin = srv.token(&["admin"]);
    let editor = srv.token(&["editor"]);
    let d = srv.data(DOMAIN, json!({"d": dom}), Some(&editor)).await;
    assert_eq!(d["crawlDomain"]["state"], "PENDING");
    let exclude = "mutation($d: String!, $r: String!) { excludeDomain(domain: $d, reason: $r) { state excluded excludeReason } }";
    let denied = srv
        .gql(
            exclude,
            json!({"d": dom, "r": "asked us to stop"}),
            Some(&editor),
        )
        .await;
    assert_eq!(code(&denied), "FORBIDDEN");
    let anonymous = srv.gql(DOMAIN, json!({"d": dom}), None).await;
    assert_eq!(code(&anonymous), "UNAUTHENTICATED");
    let d = srv
        .data(
            exclude,
            json!({"d": dom, "r": "asked us to stop"}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        d["excludeDomain"],
        json!({"state": "EXCLUDED", "excluded": true, "excludeReason": "asked us to stop"})
    );
    let listed = srv
        .data(
            "{ crawlDomains(state: EXCLUDED, first: 100) { edges { node { domain } } } }",
            json!({}),
            Some(&admin),
        )
        .await;
    assert!(listed.to_string().contains(&dom), "{listed}");
    let bad = srv
        .gql(
            "mutation($d: String!) { setDomainPriority(domain: $d, priority: 12) { priority } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&bad), "BAD_USER_INPUT");
    let p = srv
        .data(
            "mutation($d: String!) { setDomainPriority(domain: $d, priority: 7) { priority state } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        p["setDomainPriority"],
        json!({"priority": 7, "state": "EXCLUDED"})
    );
    // Now the crawler runs: an excluded domain is left alone.
    srv.crawl.spawn();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(s.requests().is_empty(), "{:?}", s.requests());
    let (_, o) = srv.binaries.resolve(&r).await.unwrap().unwrap();
    assert_eq!(o.status, Some(BinaryStatus::Processing));
    // Included again, its waiting link is fetched.
    let d = srv
        .data(
            "mutation($d: String!) { includeDomain(domain: $d) { state excluded } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        d["includeDomain"],
        json!({"state": "PENDING", "excluded": false})
    );
    let statuses = all_settled(
        &srv.binaries,
        std::slice::from_ref(&r),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(statuses, vec![BinaryStatus::Ok]);
    assert_eq!(s.hits().get("/img/excluded.jpg"), Some(&1));
    let d = srv.data(DOMAIN, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(d["crawlDomain"]["priority"], 7);
    // The binary shows its crawl history (the fetch is recorded just after
    // the binary settles: wait for it).
    let b = srv
        .data_until(
            "query($r: ID!) { binary(referenceId: $r) { crawls { firstSighting status mime } } }",
            json!({"r": r}),
            None,
            |b| {
                b["binary"]["crawls"]
                    .as_array()
                    .is_some_and(|c| c.len() >= 2)
            },
        )
        .await;
    assert_eq!(
        b["binary"]["crawls"],
        json!([
            {"firstSighting": true, "status": null, "mime": null},
            {"firstSighting": false, "status": 200, "mime": "image/jpeg"}
        ])
    );
    let missing = srv
        .gql(
            "mutation { recrawl(url: \"http://127.0.0.9:1/never-registered.jpg\") }",
            json!({}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&missing), "NOT_FOUND");
}

/// Renamed for issue 31: each old name and the field or argument that
/// replaces it. The old ones answer for one more release.
const RENAMED_FIELDS: [(&str, &str, &str); 6] = [
    ("CrawlDomain", "dom", "domain"),
    ("CrawlDomain", "totLinks", "totalLinks"),
    ("CrawlLinkFetch", "time", "fetchedAt"),
    ("CrawlLinkFetch", "fingerprint", "contentHash"),
    ("ImageSuggestion", "pageRev", "pageRevision"),
    ("Viewer", "sub", "subject"),
];
const RENAMED_ARGUMENTS: [(&str, &str); 4] = [
    ("Query", "crawlDomain"),
    ("Mutation", "setDomainPriority"),
    ("Mutation", "excludeDomain"),
    ("Mutation", "includeDomain"),
];

/// A client written against the seed's abbreviations keeps working for one
/// release: every old field and argument answers what its new name answers,
/// both names at once are refused (and change nothing), and introspection
/// marks each old name deprecated, pointing at its new one.
async fn old_names_answer_like_the_new_ones_and_are_marked_deprecated(engine: Engine) {
    let srv = crawling_server(engine, Some(crawl_args(50))).await;
    let s = site(None, Duration::ZERO).await;
    let url = format!("{}/img/renamed.jpg", s.base);
    let r = register(&srv.binaries, &url).await;
    let settled = all_settled(&srv.binaries, &[r], Duration::from_secs(60)).await;
    assert_eq!(settled, vec![BinaryStatus::Ok]);
    let admin = srv.admin();

    let history = srv
        .data_until(
            "query($u: String!) { crawlLink(url: $u) { fetchedAt time contentHash fingerprint } }",
            json!({"u": url}),
            Some(&admin),
            |h| h["crawlLink"].as_array().is_some_and(|a| a.len() >= 2),
        )
        .await;
    let rows = history["crawlLink"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{history}");
    assert!(rows[1]["contentHash"].is_string(), "{history}");
    for row in rows {
        assert_eq!(row["time"], row["fetchedAt"], "{history}");
        assert_eq!(row["fingerprint"], row["contentHash"], "{history}");
    }

    let dom = s.host();
    let by_new = "query($d: String!) { crawlDomain(domain: $d) { domain totalLinks priority } }";
    let by_old = "query($d: String!) { crawlDomain(dom: $d) { dom totLinks priority } }";
    let set_old = "mutation($d: String!) { setDomainPriority(dom: $d, priority: 3) { priority } }";
    let set = srv.data(set_old, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(set["setDomainPriority"]["priority"], 3);
    let new = srv.data(by_new, json!({"d": dom}), Some(&admin)).await;
    let old = srv.data(by_old, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(new["crawlDomain"]["domain"], json!(dom));
    assert_eq!(old["crawlDomain"]["dom"], json!(dom));
    assert_eq!(
        old["crawlDomain"]["totLinks"],
        new["crawlDomain"]["totalLinks"]
    );
    assert_eq!(new["crawlDomain"]["priority"], 3);
    let levers = srv
        .data(
            "mutation($d: String!) { excludeDomain(dom: $d, reason: \"old client\") { excluded }
               includeDomain(dom: $d) { excluded } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        levers,
        json!({"excludeDomain": {"excluded": true}, "includeDomain": {"excluded": false}})
    );
    let both = srv
        .gql(
            "mutation($d: String!) { setDomainPriority(domain: $d, dom: $d, priority: 9) { priority } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&both), "BAD_USER_INPUT");
    let neither = srv
        .gql("{ crawlDomain { priority } }", json!({}), Some(&admin))
        .await;
    assert_eq!(code(&neither), "BAD_USER_INPUT");
    let after = srv.data(by_new, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(
        after["crawlDomain"]["priority"], 3,
        "a refused call changed it"
    );

    let viewer = srv
        .data("{ viewer { subject sub } }", json!({}), Some(&admin))
        .await;
    assert_eq!(
        viewer["viewer"],
        json!({"subject": "tester", "sub": "tester"})
    );

    let suggestions = kartei::domains::suggestions::service::Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let imported = crate::suggestions::run_import(
        &suggestions,
        &wiki,
        vec![crate::suggestions::line(7, "Renamed.jpg", 0.9)],
        0,
        1,
    )
    .await;
    assert!(imported.published, "{}", imported.summary());
    let page = srv
        .data(
            "query($w: String!) { imageSuggestions(wiki: $w, pageId: 7) { pageRevision pageRev } }",
            json!({"w": wiki}),
            None,
        )
        .await;
    assert_eq!(
        page["imageSuggestions"],
        json!([{"pageRevision": 107, "pageRev": 107}])
    );

    let introspection = srv
        .data(
            "{ __schema { types { name
                 fields(includeDeprecated: true) { name isDeprecated deprecationReason
                   args(includeDeprecated: true) { name isDeprecated deprecationReason } } } } }",
            json!({}),
            None,
        )
        .await;
    let mut deprecated = Vec::new();
    let mut current = Vec::new();
    for ty in introspection["__schema"]["types"].as_array().unwrap() {
        let tn = ty["name"].as_str().unwrap();
        for f in ty["fields"].as_array().into_iter().flatten() {
            let fname = f["name"].as_str().unwrap();
            let mut note = |path: String, v: &Value| {
                if v["isDeprecated"] == true {
                    deprecated.push((path, v["deprecationReason"].as_str().unwrap().to_owned()));
                } else {
                    current.push(path);
                }
            };
            note(format!("{tn}.{fname}"), f);
            for a in f["args"].as_array().unwrap() {
                note(format!("{tn}.{fname}({})", a["name"].as_str().unwrap()), a);
            }
        }
    }
    let mut expected: Vec<(String, String)> = RENAMED_FIELDS
        .iter()
        .map(|(ty, old, new)| (format!("{ty}.{old}"), format!("use `{new}`")))
        .chain(
            RENAMED_ARGUMENTS
                .iter()
                .map(|(ty, field)| (format!("{ty}.{field}(dom)"), "use `domain`".to_owned())),
        )
        .collect();
    expected.sort();
    deprecated.sort();
    assert_eq!(
        deprecated, expected,
        "the deprecated names and their reasons"
    );
    for (ty, _, new) in RENAMED_FIELDS {
        assert!(current.contains(&format!("{ty}.{new}")), "{ty}.{new}");
    }
    for (ty, field) in RENAMED_ARGUMENTS {
        assert!(
            current.contains(&format!("{ty}.{field}(domain)")),
            "{ty}.{field}"
        );
    }
}

both_engines!(
    robots_txt_and_the_delay_are_honoured,
    instances_share_the_crawl_and_fetch_each_url_once,
    a_dead_instance_s_domain_is_taken_over,
    retry_after_is_honoured,
    a_slow_site_hands_its_slot_on,
    admins_exclude_include_and_prioritise_domains,
    old_names_answer_like_the_new_ones_and_are_marked_deprecated,
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
        let cluster = crate::support::cluster().await;
        let env = cluster.engine.env().to_owned();
        let shared: kartei::store::DynStore = cluster;
        let (s, binaries, refs) = slow_urls(&shared).await;
        let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_kartei"))
            .args(["serve", "--listen", "127.0.0.1:0", "--env", &env])
            .args([
                "--cassandra",
                &std::env::var("KARTEI_TEST_CASSANDRA").unwrap(),
            ])
            .args(["--auth-secret", "a-killed-process-secret-0123"])
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
