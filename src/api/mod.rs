//! The API: every GraphQL type and root field, the DataLoaders, and the REST
//! handlers, over the domains' services. Edges between domains (an
//! assignment's keyword, a binary's crawl history) live here, so the domains
//! never see each other's types. `graphql` holds what every field shares:
//! weights, the answer budget, the gate, batching, connections.

pub mod assignment_counts;
pub mod assignment_events;
pub mod assignment_jobs;
pub mod assignment_release;
pub mod assignments_rest;
pub mod binaries_rest;
pub mod caller;
pub mod federation;
pub mod graphql;
pub mod iiif_presentation;
pub mod iiif_rest;
pub mod reconcile;
pub mod rest;
pub mod schema;
pub mod skos;
pub mod suggestion_loaders;
pub mod suggestions_rest;
pub mod theme_loaders;
pub mod viewer;
pub mod workers;

/// Every domain's API, once: its module here, its service (resolvers find it
/// in the schema's data) and its root fields, merged into one `Query` and
/// one `Mutation`. A new domain is one more line.
macro_rules! domain_apis {
    ($($name:ident: $service:ty => $query:ident $(, $mutation:ident)?;)*) => {
        $(pub mod $name;)*

        /// The domain services the resolvers use (from the request's schema data).
        #[derive(Clone)]
        pub struct Services {
            $(pub $name: $service,)*
        }

        impl Services {
            /// Each service as schema data.
            pub fn into_data<Q, M, S>(
                self,
                b: async_graphql::SchemaBuilder<Q, M, S>,
            ) -> async_graphql::SchemaBuilder<Q, M, S> {
                b$(.data(self.$name))*
            }
        }

        // Every domain's root query fields (a doc comment would become a schema description).
        #[derive(async_graphql::MergedObject, Default)]
        pub struct Query(viewer::ViewerQuery, workers::WorkersQuery, $($name::$query,)*);

        // The same, with the federation entity lookups (their presence
        // alone makes async-graphql add `_service` and `_entities`, so they
        // live only in the subgraph's root; see `schema::KarteiSchema`).
        #[derive(async_graphql::MergedObject, Default)]
        #[graphql(name = "Query")]
        pub struct FederatedQuery(
            viewer::ViewerQuery,
            workers::WorkersQuery,
            federation::FederationQuery,
            $($name::$query,)*
        );

        // Every domain's mutations.
        #[derive(async_graphql::MergedObject, Default)]
        pub struct Mutation($($($name::$mutation,)?)*);
    };
}

use crate::domains;

domain_apis! {
    themes: domains::themes::service::Themes => ThemesQuery, ThemesMutation;
    assignments: domains::assignments::service::Assignments => AssignmentsQuery, AssignmentsMutation;
    binaries: domains::binaries::service::Binaries => BinariesQuery, BinariesMutation;
    suggestions: domains::suggestions::service::Suggestions => SuggestionsQuery, SuggestionsMutation;
    crawl: domains::crawl::service::Crawl => CrawlQuery, CrawlMutation;
    jobs: domains::jobs::service::Jobs => JobsQuery;
    objects: domains::objects::service::Objects => ObjectsQuery;
}
