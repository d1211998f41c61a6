//! Test harness: a shared runtime, a fresh store per test (embedded: its own
//! directory; Cassandra: one fresh keyspace set per test binary, unique ids per
//! test), and a real HTTP server on 127.0.0.1.

use std::future::Future;
use std::sync::{Arc, LazyLock};

use kartei::app::config::BinaryArgs;
use kartei::edge::auth::Auth;
use kartei::kernel::limits::Limits;
use kartei::store::cql::CqlStore;
use kartei::store::embedded::EmbeddedStore;
use kartei::store::{
    Cas, CasOutcome, Counted, DynStore, Mutation, Page, Row, Slice, Store, StoreError, Table,
    Value as KValue,
};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

pub const SECRET: &str = "kartei-test-secret-0123456789-0123456789";

/// One runtime for the whole binary: the Cassandra session must outlive single tests.
static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
});

pub fn run<F: Future>(f: F) -> F::Output {
    RT.block_on(f)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Engine {
    Embedded,
    Cassandra,
}

/// Generates one `#[test]` per engine for each named `async fn(Engine)`.
#[macro_export]
macro_rules! both_engines {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $( #[test] fn $name() { $crate::support::run(super::$name($crate::support::Engine::Embedded)) } )*
        }
        mod cassandra {
            $( #[test] fn $name() {
                if $crate::support::cassandra_off() { return; }
                $crate::support::run(super::$name($crate::support::Engine::Cassandra))
            } )*
        }
    };
}

/// `KARTEI_TEST_CASSANDRA=off` skips the Cassandra tier explicitly; unset is an error,
/// so that a run without the node cannot pass by testing nothing.
pub fn cassandra_off() -> bool {
    match std::env::var("KARTEI_TEST_CASSANDRA") {
        Ok(v) if v == "off" => {
            eprintln!("Cassandra tier skipped (KARTEI_TEST_CASSANDRA=off)");
            true
        }
        Ok(_) => false,
        Err(_) => panic!(
            "set KARTEI_TEST_CASSANDRA=127.0.0.1:9042 (scripts/test.sh starts a node) or KARTEI_TEST_CASSANDRA=off"
        ),
    }
}

/// Fragments `F0` to `F{levels - 1}` on `ty`, each spreading the one before
/// twice: `...F{levels - 1}` expands to 2^(levels - 1) copies of `base`.
pub fn doubling_fragments(ty: &str, base: &str, levels: usize) -> String {
    let mut q = format!("fragment F0 on {ty} {{ {base} }}");
    for i in 1..levels {
        q.push_str(&format!(
            " fragment F{i} on {ty} {{ ...F{p} ...F{p} }}",
            p = i - 1
        ));
    }
    q
}

pub fn uid() -> String {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).expect("random");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

static CLUSTER: OnceCell<Arc<Counted<CqlStore>>> = OnceCell::const_new();

/// The shared cluster store: a fresh keyspace set `*_t<random>` per test binary.
/// A connection to the test node (KARTEI_TEST_CASSANDRA) with a keyspace set
/// of a new name, migrated.
pub async fn fresh_keyspaces() -> CqlStore {
    let nodes: Vec<String> = std::env::var("KARTEI_TEST_CASSANDRA")
        .expect("KARTEI_TEST_CASSANDRA")
        .split(',')
        .map(str::to_owned)
        .collect();
    let store = CqlStore::connect(
        &nodes,
        &format!("t{}", uid()),
        "{'class': 'SimpleStrategy', 'replication_factor': 1}".into(),
    )
    .await
    .expect("connect to Cassandra");
    store.migrate(kartei::CQL_FILES).await.expect("migrate");
    store
}

pub async fn cluster() -> Arc<Counted<CqlStore>> {
    CLUSTER
        .get_or_init(|| async {
            let started = std::time::Instant::now();
            let store = fresh_keyspaces().await;
            let env = store.env().to_owned();
            for t in crate::engine::PROBE_TABLES {
                store
                    .ddl(&store.create_table_cql(t))
                    .await
                    .expect("probe table");
            }
            eprintln!(
                "keyspaces *_{env} ready in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            Arc::new(Counted::new(store))
        })
        .await
        .clone()
}

/// A store no other test sees: on Cassandra a keyspace set of its own
/// (migrated for this test, a few seconds), for tests whose assertions other
/// tests' crawlers on the shared keyspaces would disturb.
pub async fn isolated_store(engine: Engine) -> TestStore {
    match engine {
        Engine::Embedded => store(engine).await,
        Engine::Cassandra => TestStore {
            store: Arc::new(Counted::new(fresh_keyspaces().await)),
            _dir: None,
        },
    }
}

pub struct TestStore {
    pub store: DynStore,
    _dir: Option<tempfile::TempDir>,
}

pub async fn store(engine: Engine) -> TestStore {
    match engine {
        Engine::Embedded => {
            let dir = tempfile::tempdir().expect("tempdir");
            let s = EmbeddedStore::open(dir.path()).expect("open embedded store");
            TestStore {
                store: Arc::new(Counted::new(s)),
                _dir: Some(dir),
            }
        }
        Engine::Cassandra => TestStore {
            store: cluster().await,
            _dir: None,
        },
    }
}

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
    server_with(engine, test_limits()).await
}

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

pub async fn server_with(engine: Engine, limits: Limits) -> TestServer {
    server_full(engine, limits, test_binary_args(), false).await
}

/// A server whose binary worker runs (downloads, scaling).
pub async fn binary_server(engine: Engine) -> TestServer {
    server_full(engine, test_limits(), test_binary_args(), true).await
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

pub async fn server_full(
    engine: Engine,
    limits: Limits,
    binary_args: BinaryArgs,
    worker: bool,
) -> TestServer {
    serve_store(store(engine).await, limits, binary_args, worker).await
}

impl TestStore {
    /// The same store seen through `wrap` (e.g. a [`Faulty`] one).
    pub fn wrapped(self, wrap: impl FnOnce(DynStore) -> DynStore) -> TestStore {
        TestStore {
            store: wrap(self.store),
            _dir: self._dir,
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
    crawl: Option<kartei::app::config::CrawlArgs>,
) -> TestServer {
    let worker = crawl.is_some();
    // Its own count of round trips, whatever other tests do on a shared cluster store.
    let counted: DynStore = Arc::new(Counted::new(ts.store.clone()));
    let binaries = kartei::app::binaries(&binary_args, counted.clone()).expect("binaries");
    if worker {
        binaries.spawn_worker(
            std::time::Duration::from_millis(250),
            std::time::Duration::from_secs(3600),
        );
    }
    let crawler = kartei::app::crawl(
        crawl.as_ref().unwrap_or(&test_crawl_args()),
        &binary_args,
        counted.clone(),
        binaries.clone(),
    )
    .expect("crawl");
    if crawl.is_some() {
        crawler.spawn();
    }
    // The server (and with it the binary worker) stops when the TestServer is dropped.
    let (url, stop) = listen(counted.clone(), limits, binaries.clone(), crawler.clone()).await;
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

/// The `extensions.code` of the first error.
pub fn code(response: &Value) -> &str {
    response["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error code in {response:#}"))
}

/// The store's round trips while `f` runs.
pub async fn round_trips<F: Future>(store: &DynStore, f: F) -> (u64, F::Output) {
    let before = store.round_trips();
    let out = f.await;
    (store.round_trips() - before, out)
}

/// What a [`Faulty`] store runs before each `apply`.
pub type ApplyHook = Box<dyn Fn(&[Mutation]) + Send>;

/// A real store that fails on purpose: it stands in for a process that dies
/// between two writes (the writes before the fault are really stored).
pub struct Faulty {
    inner: DynStore,
    /// Every `apply` touching one of these tables fails.
    pub fail_apply_on: std::sync::Mutex<Vec<&'static str>>,
    /// After this many more successful `cas` calls, every `cas` fails (None: never).
    pub cas_budget: std::sync::Mutex<Option<usize>>,
    /// Every read (get, get_many, slice) first waits this long (None: no wait).
    pub read_delay: std::sync::Mutex<Option<std::time::Duration>>,
    /// Delayed reads begun, and delayed reads that ran to their end (a read
    /// whose request was dropped meanwhile never ends).
    pub reads_begun: std::sync::atomic::AtomicUsize,
    pub reads_ended: std::sync::atomic::AtomicUsize,
    /// Runs before every `apply` (a test's clock moving as a slow write would).
    pub before_apply: std::sync::Mutex<Option<ApplyHook>>,
}

impl Faulty {
    pub fn new(inner: DynStore) -> Arc<Self> {
        Arc::new(Faulty {
            inner,
            fail_apply_on: Default::default(),
            cas_budget: Default::default(),
            read_delay: Default::default(),
            reads_begun: Default::default(),
            reads_ended: Default::default(),
            before_apply: Default::default(),
        })
    }

    async fn slow_read(&self) {
        let delay = *self.read_delay.lock().unwrap();
        if let Some(d) = delay {
            use std::sync::atomic::Ordering::SeqCst;
            self.reads_begun.fetch_add(1, SeqCst);
            tokio::time::sleep(d).await;
            self.reads_ended.fetch_add(1, SeqCst);
        }
    }
}

fn injected() -> StoreError {
    StoreError::Unavailable("injected crash".into())
}

#[async_trait::async_trait]
impl Store for Faulty {
    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
    async fn get(&self, table: &'static Table, key: &[KValue]) -> Result<Option<Row>, StoreError> {
        self.slow_read().await;
        self.inner.get(table, key).await
    }
    async fn get_many(
        &self,
        table: &'static Table,
        keys: &[Vec<KValue>],
    ) -> Result<Vec<Option<Row>>, StoreError> {
        self.slow_read().await;
        self.inner.get_many(table, keys).await
    }
    async fn slice(&self, table: &'static Table, slice: &Slice) -> Result<Page, StoreError> {
        self.slow_read().await;
        self.inner.slice(table, slice).await
    }
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        if let Some(hook) = self.before_apply.lock().unwrap().as_ref() {
            hook(&batch);
        }
        let failing = self.fail_apply_on.lock().unwrap().clone();
        let touches = |m: &Mutation| {
            let t = match m {
                Mutation::Upsert { row, .. } => row.table.name,
                Mutation::Delete { table, .. } => table.name,
            };
            failing.contains(&t)
        };
        if batch.iter().any(touches) {
            return Err(injected());
        }
        self.inner.apply(batch).await
    }
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        {
            let mut budget = self.cas_budget.lock().unwrap();
            match budget.as_mut() {
                Some(0) => return Err(injected()),
                Some(n) => *n -= 1,
                None => {}
            }
        }
        self.inner.cas(cas).await
    }
    async fn scan(
        &self,
        table: &'static Table,
        after: Option<kartei::store::Cursor>,
        limit: usize,
    ) -> Result<Page, StoreError> {
        self.inner.scan(table, after, limit).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
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
    let (url, stop) = listen(srv.store.clone(), test_limits(), binaries, crawl).await;
    Instance { url, _stop: stop }
}

/// Serves an App over `store` on a free port of 127.0.0.1: its URL, and the
/// sender whose drop stops it.
async fn listen(
    store: DynStore,
    limits: Limits,
    binaries: kartei::domains::binaries::service::Binaries,
    crawl: kartei::domains::crawl::service::Crawl,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let connections = kartei::edge::ConnectionLimits::from_limits(&limits);
    let app = kartei::app::App::new(
        store,
        Auth::hs256(SECRET.as_bytes()).expect("secret"),
        limits,
        kartei::edge::EdgeArgs::default(),
        binaries,
        crawl,
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
