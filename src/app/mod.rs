//! Assembles the application, in one place: configuration -> store ->
//! services -> GraphQL schema -> router state (`App`, the edge's
//! `AppState`). A new domain adds its service here and its root fields in
//! `api::schema`. Also the builders of the binaries and crawl services from
//! their flags, which the command line uses too.

pub mod config;
pub mod control;
pub mod jobs;

use std::sync::Arc;
use std::time::Duration;

use crate::api::schema::{Services, live_schema, schema};
use crate::app::config::{BinaryArgs, CrawlArgs};
use crate::domains::assignments::service::Assignments;
use crate::domains::binaries::imaging::ImagingLimits;
use crate::domains::binaries::render_budget::RenderLimits;
use crate::domains::binaries::service::{Binaries, BinaryConfig};
use crate::domains::crawl::service::{Crawl, CrawlConfig, Links};
use crate::domains::jobs::service::Jobs;
use crate::domains::objects::service::Objects;
use crate::domains::suggestions::service::Suggestions;
use crate::domains::themes::service::Themes;
use crate::domains::web::{FetchLimits, FetchPolicy, Fetcher};
use crate::edge::EdgeArgs;
use crate::edge::auth::Auth;
use crate::kernel::Clock;
use crate::kernel::limits::Limits;
use crate::store::DynStore;

/// The running application: the router's state, built here.
pub use crate::edge::AppState as App;

impl App {
    /// The services over `store`, reading time from `clock`, and the schema
    /// that serves them; starts the tail of the assignment change feed (so it
    /// needs a tokio runtime).
    pub fn new(
        store: DynStore,
        auth: Auth,
        limits: Limits,
        edge: EdgeArgs,
        binaries: Binaries,
        crawl: Crawl,
        clock: Clock,
    ) -> Arc<Self> {
        let themes = Themes::new(store.clone())
            .with_max_category_depth(limits.vocabulary.max_category_depth.into())
            .with_clock(clock.clone());
        let suggestions = Suggestions::new(store.clone());
        let assignments = Assignments::new(store.clone())
            .with_feed(feed(&limits.feed))
            .with_clock(clock.clone());
        assignments.events().spawn_tail(Duration::from_millis(250));
        let objects = Objects::new(store.clone())
            .with_clock(clock.clone())
            .with_url_pattern(&edge.object_url_pattern);
        let services = Services {
            themes: themes.clone(),
            assignments: assignments.clone(),
            binaries: binaries.clone(),
            suggestions: suggestions.clone(),
            crawl: crawl.clone(),
            jobs: Jobs::new(store.clone()).with_clock(clock),
            objects: objects.clone(),
        };
        let schema = schema(Some(services.clone()), &limits, edge.federation);
        let live_schema = live_schema(services, &limits, edge.federation);
        let sockets = crate::edge::sockets::Sockets::new(
            crate::edge::sockets::SocketLimits::from_limits(&limits),
        );
        Arc::new(App {
            gate: crate::api::graphql::gate_for(&limits),
            schema,
            live_schema,
            auth: Arc::new(auth),
            store,
            themes,
            exports: crate::api::assignments_rest::Exports::new(
                assignments.clone(),
                limits.max_exports,
            ),
            assignments,
            binaries,
            suggestions,
            crawl,
            objects,
            limits,
            edge,
            sockets,
        })
    }
}

impl App {
    /// Every service's background workers (to stop them at shutdown).
    pub fn workers(&self) -> Vec<crate::kernel::worker::Workers> {
        vec![
            self.binaries.workers().clone(),
            self.assignments.events().workers().clone(),
            self.suggestions.workers().clone(),
            self.crawl.workers().clone(),
        ]
    }
}

/// Marks the jobs whose process died as interrupted, in the background
/// (a starting server runs it).
pub fn sweep_interrupted_jobs(store: DynStore) {
    let jobs = Jobs::new(store);
    tokio::spawn(async move {
        match jobs.sweep_interrupted().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                jobs = n,
                "jobs whose process stopped are marked interrupted"
            ),
            Err(e) => tracing::warn!(error = %e, "jobs whose process stopped could not be marked"),
        }
    });
}

/// The change feed's settings the flags describe.
fn feed(args: &crate::kernel::limits::FeedArgs) -> crate::domains::assignments::events::FeedConfig {
    crate::domains::assignments::events::FeedConfig {
        lag: args.feed_lag,
        replay_window: args.replay_window,
        replay_budget_bytes: args.replay_budget_bytes,
        ..Default::default()
    }
}

/// The crawler's SSRF rules.
fn policy(args: &BinaryArgs) -> FetchPolicy {
    FetchPolicy {
        allow: args.fetch_allow.clone(),
    }
}

/// The binaries service the flags describe; the URLs it wants go to the
/// crawl frontier in `store`.
pub fn binaries(args: &BinaryArgs, store: DynStore) -> anyhow::Result<Binaries> {
    binaries_at(args, store, Clock::system())
}

/// Like [`binaries`], reading time from `clock` (tests of leases and grace periods).
pub fn binaries_at(args: &BinaryArgs, store: DynStore, clock: Clock) -> anyhow::Result<Binaries> {
    anyhow::ensure!(
        args.scale_lease >= Duration::from_secs(1),
        "--scale-lease must be at least 1s"
    );
    anyhow::ensure!(
        args.render_pixels_in_flight >= 1 && args.render_share_per_client >= 1,
        "--render-pixels-in-flight and --render-share-per-client must be at least 1"
    );
    let config = BinaryConfig {
        max_bytes: args.max_upload_bytes,
        imaging: ImagingLimits {
            max_pixels: args.max_pixels,
            jpeg_quality: args.jpeg_quality,
        },
        max_attempts: args.fetch_attempts.max(1),
        retry_base: Duration::from_secs(args.fetch_retry_delay),
        gc_grace: Duration::from_secs(args.gc_grace),
        public_url: args
            .public_url
            .as_ref()
            .map(|u| u.trim_end_matches('/').to_owned()),
        iiif_cache_bytes: args.iiif_cache_bytes,
        max_decode_bytes: args.max_decode_bytes,
        render: RenderLimits {
            pixels_in_flight: args.render_pixels_in_flight,
            share_per_client: args.render_share_per_client,
            queue_per_client: args.render_queue_per_client,
            wait: args.render_wait,
            ..RenderLimits::default()
        },
        lease: args.scale_lease,
    };
    Ok(Binaries::with_clock(
        store.clone(),
        config,
        policy(args),
        Arc::new(Links::new(store)),
        clock,
    ))
}

/// The crawl frontier's service the flags describe (its loops start with
/// [`Crawl::spawn`]).
pub fn crawl(
    args: &CrawlArgs,
    binary_args: &BinaryArgs,
    store: DynStore,
    binaries: Binaries,
) -> anyhow::Result<Crawl> {
    let fetcher = Fetcher::new(
        policy(binary_args),
        FetchLimits {
            max_bytes: binary_args.max_upload_bytes,
            connect_timeout: Duration::from_secs(binary_args.fetch_connect_timeout),
            read_timeout: Duration::from_secs(binary_args.fetch_read_timeout),
            total_timeout: Duration::from_secs(binary_args.fetch_total_timeout.max(1)),
            min_rate: binary_args.fetch_min_rate,
            max_redirects: binary_args.fetch_max_redirects,
        },
    )?;
    let config = CrawlConfig {
        delay: Duration::from_millis(args.crawl_delay_ms),
        recrawl_after: args.recrawl_after,
        claim_ttl: args.claim_ttl.max(Duration::from_secs(1)),
        domains: args.crawl_domains.max(1),
        pass: args.crawl_pass.max(Duration::from_millis(10)),
        turn: args.crawl_turn.max(Duration::from_secs(1)),
        ..CrawlConfig::default()
    };
    Ok(Crawl::new(
        store.clone(),
        Links::new(store),
        binaries,
        fetcher,
        config,
    ))
}
