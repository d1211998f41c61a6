//! Assembles the application, in one place: configuration -> store ->
//! services -> GraphQL schema (the domains' root fields merged) -> router
//! state. A new domain adds its service and its Query/Mutation here. `App` is the state every handler
//! reaches through axum's `FromRef`: a domain's routes ask for the part they
//! need (their service; the caller comes from the request) and never see `App`.

use std::sync::Arc;
use std::time::Duration;

use async_graphql::{MergedObject, MergedSubscription, SDLExportOptions, Schema, SchemaBuilder};
use axum::extract::FromRef;

use crate::assignments::graphql::{AssignmentsMutation, AssignmentsQuery};
use crate::assignments::service::Assignments;
use crate::auth::Auth;
use crate::binaries::graphql::{BinariesMutation, BinariesQuery};
use crate::binaries::imaging::ImagingLimits;
use crate::binaries::render_budget::RenderLimits;
use crate::binaries::service::{Binaries, BinaryConfig};
use crate::config::{BinaryArgs, CrawlArgs, EdgeArgs, Limits};
use crate::crawl::fetch::{FetchLimits, FetchPolicy, Fetcher};
use crate::crawl::graphql::{CrawlMutation, CrawlQuery};
use crate::crawl::service::{Crawl, CrawlConfig, Links};
use crate::store::DynStore;
use crate::suggestions::graphql::{SuggestionsMutation, SuggestionsQuery};
use crate::suggestions::service::Suggestions;
use crate::themes::graphql::{ThemesMutation, ThemesQuery};
use crate::themes::service::Themes;

// Every domain's root query fields (a doc comment would become a schema description).
#[derive(MergedObject, Default)]
pub struct Query(
    crate::graphql::viewer::ViewerQuery,
    ThemesQuery,
    AssignmentsQuery,
    BinariesQuery,
    SuggestionsQuery,
    CrawlQuery,
);

// Every domain's mutations.
#[derive(MergedObject, Default)]
pub struct Mutation(
    ThemesMutation,
    AssignmentsMutation,
    BinariesMutation,
    SuggestionsMutation,
    CrawlMutation,
);

// Every domain's subscriptions.
#[derive(MergedSubscription, Default)]
pub struct Subscription(crate::assignments::subscription::AssignmentsSubscription);

pub type KarteiSchema = Schema<Query, Mutation, Subscription>;

/// The domain services the resolvers use (from the request's schema data).
#[derive(Clone)]
pub struct Services {
    pub themes: Themes,
    pub assignments: Assignments,
    pub binaries: Binaries,
    pub suggestions: Suggestions,
    pub crawl: Crawl,
}

/// The schema over `services` (none: only to print the SDL).
pub fn schema(services: Option<Services>, limits: &Limits) -> KarteiSchema {
    finish(builder(limits), services)
}

/// The schema WebSocket operations run on: the same, but each execution
/// (each event of a subscription) gets its request's `graphql::batch::Fresh`
/// data anew. Apart from `schema` because a schema extension costs every
/// field of every request a detour, which HTTP requests need not pay.
pub fn live_schema(services: Services, limits: &Limits) -> KarteiSchema {
    finish(
        builder(limits).extension(crate::graphql::batch::PerExecution),
        Some(services),
    )
}

fn builder(limits: &Limits) -> SchemaBuilder<Query, Mutation, Subscription> {
    crate::graphql::bounded(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
        limits,
    )
}

fn finish(
    mut b: SchemaBuilder<Query, Mutation, Subscription>,
    services: Option<Services>,
) -> KarteiSchema {
    if let Some(s) = services {
        b = b
            .data(s.themes)
            .data(s.assignments)
            .data(s.binaries)
            .data(s.suggestions)
            .data(s.crawl);
    }
    b.finish()
}

/// The printed SDL, sorted, as kept in `schema.graphql`.
pub fn sdl() -> String {
    schema(None, &Limits::default()).sdl_with_options(
        SDLExportOptions::new()
            .sorted_fields()
            .sorted_arguments()
            .sorted_enum_items(),
    )
}

/// The running application: its store, services, schema and limits.
pub struct App {
    pub schema: KarteiSchema,
    /// The schema of WebSocket operations (`live_schema`).
    pub live_schema: KarteiSchema,
    /// What every request passes before the schema (persisted queries,
    /// bounds, deadlines): requests run through `gate.execute(&schema, ..)`.
    pub gate: crate::graphql::limits::Gate,
    pub auth: Arc<Auth>,
    pub store: DynStore,
    pub themes: Themes,
    pub assignments: Assignments,
    pub binaries: Binaries,
    pub suggestions: Suggestions,
    pub crawl: Crawl,
    pub limits: Limits,
    pub edge: EdgeArgs,
    /// WebSocket places (subscriptions): at most `--max-connections` in all
    /// (an upgraded connection no longer holds its HTTP connection's slot),
    /// bounded per client address and token subject.
    pub sockets: Arc<crate::http::sockets::Sockets>,
}

impl App {
    /// The services over `store` and the schema that serves them; starts the
    /// tail of the assignment change feed (so it needs a tokio runtime).
    pub fn new(
        store: DynStore,
        auth: Auth,
        limits: Limits,
        edge: EdgeArgs,
        binaries: Binaries,
        crawl: Crawl,
    ) -> Arc<Self> {
        let themes = Themes::new(store.clone())
            .with_max_category_depth(limits.vocabulary.max_category_depth.into());
        let suggestions = Suggestions::new(store.clone());
        let assignments = Assignments::new(store.clone()).with_feed(feed(&limits.feed));
        assignments.events().spawn_tail(Duration::from_millis(250));
        let services = Services {
            themes: themes.clone(),
            assignments: assignments.clone(),
            binaries: binaries.clone(),
            suggestions: suggestions.clone(),
            crawl: crawl.clone(),
        };
        let schema = schema(Some(services.clone()), &limits);
        let live_schema = live_schema(services, &limits);
        let sockets = crate::http::sockets::Sockets::new(
            crate::http::sockets::SocketLimits::from_limits(&limits),
        );
        Arc::new(App {
            gate: crate::graphql::gate(&limits),
            schema,
            live_schema,
            auth: Arc::new(auth),
            store,
            themes,
            assignments,
            binaries,
            suggestions,
            crawl,
            limits,
            edge,
            sockets,
        })
    }
}

impl FromRef<Arc<App>> for Suggestions {
    fn from_ref(app: &Arc<App>) -> Self {
        app.suggestions.clone()
    }
}

impl FromRef<Arc<App>> for Binaries {
    fn from_ref(app: &Arc<App>) -> Self {
        app.binaries.clone()
    }
}

/// The change feed's settings the flags describe.
fn feed(args: &crate::config::FeedArgs) -> crate::assignments::events::FeedConfig {
    crate::assignments::events::FeedConfig {
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
    Ok(Binaries::new(
        store.clone(),
        config,
        policy(args),
        Arc::new(Links::new(store)),
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

#[cfg(test)]
mod tests {
    use async_graphql::registry::{MetaType, Registry};
    use async_graphql::{OutputType, SubscriptionType};

    use super::*;

    /// Every field that returns a list (or a connection, whose `edges` and
    /// `nodes` are as long as its `first`) carries a weight: without one,
    /// async-graphql counts it as a single object, and aliases of it
    /// multiplied an answer past any bound (issue 30: `children`,
    /// `creators`, `objectAssignments` and more had none).
    #[test]
    fn every_list_field_carries_a_weight() {
        let mut registry = Registry::default();
        <Query as OutputType>::create_type_info(&mut registry);
        <Mutation as OutputType>::create_type_info(&mut registry);
        <Subscription as SubscriptionType>::create_type_info(&mut registry);
        let mut unweighted = Vec::new();
        for (type_name, ty) in &registry.types {
            let MetaType::Object { fields, .. } = ty else {
                continue;
            };
            // A connection's own lists: its field's weight counts their items.
            if type_name.ends_with("Connection")
                || type_name.starts_with("__")
                || type_name.contains("MergedObjectTail")
            {
                continue;
            }
            for (name, field) in fields {
                let many = field.ty.contains('[')
                    || field.ty.trim_end_matches('!').ends_with("Connection");
                if many && field.compute_complexity.is_none() {
                    unweighted.push(format!("{type_name}.{name}: {}", field.ty));
                }
            }
        }
        assert!(
            unweighted.is_empty(),
            "list fields without a weight:\n{}",
            unweighted.join("\n")
        );
    }
}
