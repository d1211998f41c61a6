//! [`TestApp`]: a running application assembled the way a test describes it
//! (engine, store, limits, binary settings, crawler, clock, seeded
//! vocabulary), and the callers that talk to it as one user or another, so
//! that a test reads as the behaviour it checks:
//!
//! ```ignore
//! let app = TestApp::on(engine).with_vocabulary().build().await;
//! let v = app.vocabulary();
//! app.as_contributor("carla").query(SUGGEST, suggestion(&v.p, "o1", &v.k1, &v.c1)).await;
//! assert_eq!(app.as_machine("bot").query_err(TRANSITION, vars).await, "FORBIDDEN");
//! ```

use std::ops::Deref;

use kartei::app::config::{BinaryArgs, CrawlArgs};
use kartei::kernel::Clock;
use kartei::kernel::limits::Limits;
use serde_json::Value;

use super::server::{TestServer, start};
use super::{
    Engine, TestStore, Vocabulary, code, isolated_store, store, test_binary_args, test_crawl_args,
    test_limits, vocabulary,
};

/// A running server and what it was seeded with; everything of the
/// [`TestServer`] underneath (`url`, `store`, `binaries`, `gql`...) is
/// reachable through it.
pub struct TestApp {
    server: TestServer,
    vocabulary: Option<Vocabulary>,
}

/// Where the application keeps its data.
enum Storage {
    /// A fresh embedded directory, or the binary's shared Cassandra keyspaces.
    Fresh(Engine),
    /// On Cassandra a keyspace set of its own, for tests that other tests'
    /// crawlers on the shared keyspaces would disturb.
    Isolated(Engine),
    /// A store the test prepared (a wrapped, faulty one).
    Given(TestStore),
}

/// How a [`TestApp`] is to be assembled; [`TestAppBuilder::build`] starts it.
#[must_use = "an application starts only once built"]
pub struct TestAppBuilder {
    storage: Storage,
    limits: Limits,
    binary_args: BinaryArgs,
    crawl: Option<CrawlArgs>,
    clock: Clock,
    vocabulary: bool,
}

impl TestApp {
    /// An application on the embedded store.
    pub fn embedded() -> TestAppBuilder {
        Self::on(Engine::Embedded)
    }

    /// An application on `engine`, with the test settings: no crawler, the
    /// system clock, nothing seeded.
    pub fn on(engine: Engine) -> TestAppBuilder {
        Self::builder(Storage::Fresh(engine))
    }

    /// An application over a store the test prepared.
    pub fn over(store: TestStore) -> TestAppBuilder {
        Self::builder(Storage::Given(store))
    }

    fn builder(storage: Storage) -> TestAppBuilder {
        TestAppBuilder {
            storage,
            limits: test_limits(),
            binary_args: test_binary_args(),
            crawl: None,
            clock: Clock::system(),
            vocabulary: false,
        }
    }

    /// The server alone (what the older helpers hand out).
    pub fn into_server(self) -> TestServer {
        self.server
    }

    /// The vocabulary seeded by [`TestAppBuilder::with_vocabulary`].
    pub fn vocabulary(&self) -> &Vocabulary {
        self.vocabulary
            .as_ref()
            .expect("no vocabulary: build the app `.with_vocabulary()`")
    }

    /// A caller without a token.
    pub fn anonymous(&self) -> Caller<'_> {
        Caller {
            server: &self.server,
            token: None,
        }
    }

    /// A caller with a token for `sub` holding `roles` (none: a reader that signed in).
    pub fn signed_in(&self, sub: &str, roles: &[&str]) -> Caller<'_> {
        Caller {
            server: &self.server,
            token: Some(self.server.token_as(sub, roles)),
        }
    }

    pub fn as_admin(&self) -> Caller<'_> {
        self.signed_in("tester", &["admin"])
    }

    pub fn as_editor(&self, sub: &str) -> Caller<'_> {
        self.signed_in(sub, &["editor"])
    }

    pub fn as_contributor(&self, sub: &str) -> Caller<'_> {
        self.signed_in(sub, &["contributor"])
    }

    pub fn as_machine(&self, sub: &str) -> Caller<'_> {
        self.signed_in(sub, &["machine"])
    }
}

impl Deref for TestApp {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        &self.server
    }
}

impl TestAppBuilder {
    /// Keyspaces of its own on Cassandra (a few seconds to migrate); a store
    /// given to [`TestApp::over`] stays the one given.
    pub fn isolated(mut self) -> Self {
        self.storage = match self.storage {
            Storage::Fresh(engine) | Storage::Isolated(engine) => Storage::Isolated(engine),
            given @ Storage::Given(_) => given,
        };
        self
    }

    /// Request limits instead of [`test_limits`].
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Binary settings instead of [`test_binary_args`].
    pub fn with_binary_args(mut self, args: BinaryArgs) -> Self {
        self.binary_args = args;
        self
    }

    /// The binary worker and the crawler run, with the test crawl settings.
    pub fn crawling(self) -> Self {
        self.crawling_with(test_crawl_args())
    }

    /// The binary worker and the crawler run, with `args`.
    pub fn crawling_with(mut self, args: CrawlArgs) -> Self {
        self.crawl = Some(args);
        self
    }

    /// The services read time from `clock`.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Seeds a small [`Vocabulary`] of unique ids (two portals, their
    /// categories, three keywords) before the test begins.
    pub fn with_vocabulary(mut self) -> Self {
        self.vocabulary = true;
        self
    }

    /// Opens the store, starts the server and seeds what was asked for.
    pub async fn build(self) -> TestApp {
        let ts = match self.storage {
            Storage::Fresh(engine) => store(engine).await,
            Storage::Isolated(engine) => isolated_store(engine).await,
            Storage::Given(ts) => ts,
        };
        let server = start(ts, self.limits, self.binary_args, self.crawl, self.clock).await;
        let vocabulary = if self.vocabulary {
            Some(vocabulary(&server.store).await)
        } else {
            None
        };
        TestApp { server, vocabulary }
    }
}

/// One user of a [`TestApp`]: GraphQL requests with that user's token.
#[derive(Clone)]
pub struct Caller<'a> {
    server: &'a TestServer,
    token: Option<String>,
}

impl Caller<'_> {
    /// The bearer token sent (None for an anonymous caller).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The whole response: `data` and `errors`.
    pub async fn response(&self, query: &str, variables: Value) -> Value {
        self.server.gql(query, variables, self.token()).await
    }

    /// The `data` of a query that must succeed (the test fails with the errors).
    pub async fn query(&self, query: &str, variables: Value) -> Value {
        self.server.data(query, variables, self.token()).await
    }

    /// The `extensions.code` of a query that must fail.
    pub async fn query_err(&self, query: &str, variables: Value) -> String {
        code(&self.response(query, variables).await).to_owned()
    }
}

/// A clock that reads now plus an offset in seconds the test moves
/// (`offset.store(..)`), for the app's `with_clock`.
pub fn movable_clock() -> (
    std::sync::Arc<std::sync::atomic::AtomicI64>,
    kartei::kernel::Clock,
) {
    let offset = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let read = offset.clone();
    let clock = kartei::kernel::Clock::from_fn(move || {
        time::OffsetDateTime::now_utc()
            + time::Duration::seconds(read.load(std::sync::atomic::Ordering::SeqCst))
    });
    (offset, clock)
}
