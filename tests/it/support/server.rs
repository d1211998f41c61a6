//! A real server on a free port of 127.0.0.1 ([`TestServer`]), what the
//! builder starts; the older ways to ask for one, each a thin wrapper over
//! [`TestApp`]'s builder; and the router alone, for requests without a socket.

use std::sync::Arc;

use kartei::app::config::{BinaryArgs, CrawlArgs};
use kartei::edge::auth::Auth;
use kartei::kernel::Clock;
use kartei::kernel::limits::Limits;
use kartei::store::{Counted, DynStore};
use serde_json::{Value, json};

use super::{
    Engine, SECRET, TestApp, TestStore, store, test_binary_args, test_crawl_args, test_limits,
};

pub struct TestServer {
    _stop: tokio::sync::oneshot::Sender<()>,
    pub url: String,
    pub client: reqwest::Client,
    pub store: DynStore,
    pub binaries: kartei::domains::binaries::service::Binaries,
    pub crawl: kartei::domains::crawl::service::Crawl,
    auth: Auth,
    _store: TestStore,
}

pub async fn server(engine: Engine) -> TestServer {
    TestApp::on(engine).build().await.into_server()
}

pub async fn server_with(engine: Engine, limits: Limits) -> TestServer {
    TestApp::on(engine)
        .with_limits(limits)
        .build()
        .await
        .into_server()
}

/// A server whose binary worker runs (downloads, scaling).
pub async fn binary_server(engine: Engine) -> TestServer {
    server_full(engine, test_limits(), test_binary_args(), true).await
}

pub async fn server_full(
    engine: Engine,
    limits: Limits,
    binary_args: BinaryArgs,
    worker: bool,
) -> TestServer {
    serve_store(store(engine).await, limits, binary_args, worker).await
}

/// A test server over a given store.
pub async fn serve_store(
    ts: TestStore,
    limits: Limits,
    binary_args: BinaryArgs,
    worker: bool,
) -> TestServer {
    serve_crawling(ts, limits, binary_args, worker.then(test_crawl_args)).await
}

/// A test server whose worker and crawler run when `crawl` is given.
pub async fn serve_crawling(
    ts: TestStore,
    limits: Limits,
    binary_args: BinaryArgs,
    crawl: Option<CrawlArgs>,
) -> TestServer {
    let app = TestApp::over(ts)
        .with_limits(limits)
        .with_binary_args(binary_args);
    match crawl {
        Some(args) => app.crawling_with(args),
        None => app,
    }
    .build()
    .await
    .into_server()
}

/// Starts the application over `ts` (its worker and crawler running when
/// `crawl` is given, its services reading time from `clock`).
pub(super) async fn start(
    ts: TestStore,
    limits: Limits,
    binary_args: BinaryArgs,
    crawl: Option<CrawlArgs>,
    clock: Clock,
) -> TestServer {
    // Its own count of round trips, whatever other tests do on a shared cluster store.
    let counted: DynStore = Arc::new(Counted::over(ts.store.clone()));
    let binaries =
        kartei::app::binaries_at(&binary_args, counted.clone(), clock.clone()).expect("binaries");
    let crawler = kartei::app::crawl(
        crawl.as_ref().unwrap_or(&test_crawl_args()),
        &binary_args,
        counted.clone(),
        binaries.clone(),
    )
    .expect("crawl");
    if crawl.is_some() {
        binaries.spawn_worker(
            std::time::Duration::from_millis(250),
            std::time::Duration::from_secs(3600),
        );
        crawler.spawn();
    }
    // The server (and with it the binary worker) stops when the TestServer is dropped.
    let (url, stop) = listen(
        counted.clone(),
        limits,
        binaries.clone(),
        crawler.clone(),
        clock,
    )
    .await;
    TestServer {
        _stop: stop,
        url,
        client: reqwest::Client::new(),
        store: counted,
        binaries,
        crawl: crawler,
        auth: Auth::hs256(SECRET.as_bytes()).expect("secret"),
        _store: ts,
    }
}

impl TestServer {
    pub fn token(&self, roles: &[&str]) -> String {
        self.token_as("tester", roles)
    }

    pub fn token_as(&self, sub: &str, roles: &[&str]) -> String {
        let roles: Vec<String> = roles.iter().map(|r| r.to_string()).collect();
        self.auth.mint(sub, &roles, 3600).expect("mint")
    }

    pub fn admin(&self) -> String {
        self.token(&["admin"])
    }

    /// GETs a path and returns the body text.
    pub async fn get_text(&self, path: &str) -> String {
        let resp = self
            .client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .expect("request");
        assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
        resp.text().await.expect("body")
    }

    /// POSTs a GraphQL request and returns the whole JSON response.
    pub async fn gql(&self, query: &str, variables: Value, token: Option<&str>) -> Value {
        let mut req = self
            .client
            .post(format!("{}/graphql", self.url))
            .json(&json!({
                "query": query,
                "variables": variables,
            }));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json response")
    }

    /// Like `gql` but fails the test on any error and returns `data`.
    pub async fn data(&self, query: &str, variables: Value, token: Option<&str>) -> Value {
        let r = self.gql(query, variables, token).await;
        assert!(r.get("errors").is_none(), "unexpected errors: {r:#}");
        r["data"].clone()
    }

    /// The query's data once `done` holds for it, polled for up to 10 s; the
    /// last answer when it never does (the caller's assertion then shows it).
    /// For rows a service writes a moment after the state a test waited for.
    pub async fn data_until(
        &self,
        query: &str,
        variables: Value,
        token: Option<&str>,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let d = self.data(query, variables.clone(), token).await;
            if done(&d) || std::time::Instant::now() > deadline {
                return d;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// The application's router over a fresh embedded store, for requests sent
/// with `tower::ServiceExt::oneshot` (no socket, no network).
pub async fn router(limits: Limits) -> (axum::Router, TestStore) {
    router_with(limits, kartei::edge::EdgeArgs::default()).await
}

/// Like [`router`], with the edge's settings (CORS) given.
pub async fn router_with(
    limits: Limits,
    edge: kartei::edge::EdgeArgs,
) -> (axum::Router, TestStore) {
    let ts = store(Engine::Embedded).await;
    let binaries = kartei::app::binaries(&test_binary_args(), ts.store.clone()).expect("binaries");
    let crawl = kartei::app::crawl(
        &test_crawl_args(),
        &test_binary_args(),
        ts.store.clone(),
        binaries.clone(),
    )
    .expect("crawl");
    let app = kartei::app::App::new(
        ts.store.clone(),
        Auth::hs256(SECRET.as_bytes()).expect("secret"),
        limits,
        edge,
        binaries,
        crawl,
        Clock::system(),
    );
    (kartei::edge::router(app), ts)
}

/// Sends one request to a router; returns the status, the headers and the body.
pub async fn call(
    router: &axum::Router,
    request: axum::http::Request<axum::body::Body>,
) -> (u16, axum::http::HeaderMap, Vec<u8>) {
    use tower::ServiceExt;
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 64 << 20)
        .await
        .expect("body");
    (status, headers, body.to_vec())
}

/// A second server instance over `srv`'s store (its own App, change-feed
/// tail and socket), as a second `kartei serve` against the same cluster;
/// it stops when dropped.
pub struct Instance {
    pub url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

pub async fn second_instance(srv: &TestServer) -> Instance {
    let binaries = kartei::app::binaries(&test_binary_args(), srv.store.clone()).expect("binaries");
    let crawl = kartei::app::crawl(
        &test_crawl_args(),
        &test_binary_args(),
        srv.store.clone(),
        binaries.clone(),
    )
    .expect("crawl");
    let (url, stop) = listen(
        srv.store.clone(),
        test_limits(),
        binaries,
        crawl,
        Clock::system(),
    )
    .await;
    Instance { url, _stop: stop }
}

/// Serves an App over `store` on a free port of 127.0.0.1, reading time from
/// `clock`: its URL, and the sender whose drop stops it.
async fn listen(
    store: DynStore,
    limits: Limits,
    binaries: kartei::domains::binaries::service::Binaries,
    crawl: kartei::domains::crawl::service::Crawl,
    clock: Clock,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let connections = kartei::edge::ConnectionLimits::from_limits(&limits);
    let app = kartei::app::App::new(
        store,
        Auth::hs256(SECRET.as_bytes()).expect("secret"),
        limits,
        kartei::edge::EdgeArgs::default(),
        binaries,
        crawl,
        clock,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        kartei::edge::serve(
            listener,
            kartei::edge::router(app),
            connections,
            async move {
                let _ = stopped.await;
            },
        )
        .await;
    });
    (format!("http://{addr}"), stop)
}

/// A binaries service over `store` reading time from `clock`, with no grace
/// for the collector (tests of leases).
pub fn binaries_at(
    store: &DynStore,
    clock: kartei::kernel::Clock,
) -> kartei::domains::binaries::service::Binaries {
    kartei::domains::binaries::service::Binaries::with_clock(
        store.clone(),
        kartei::domains::binaries::service::BinaryConfig {
            gc_grace: std::time::Duration::ZERO,
            ..Default::default()
        },
        kartei::domains::web::FetchPolicy { allow: Vec::new() },
        Arc::new(kartei::domains::crawl::service::Links::new(store.clone())),
        clock,
    )
}
