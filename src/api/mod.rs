//! The API: every GraphQL type and root field, the DataLoaders, and the REST
//! handlers, over the domains' services. Edges between domains (an
//! assignment's keyword, a binary's crawl history) live here, so the domains
//! never see each other's types. `graphql` holds what every field shares:
//! weights, the answer budget, the gate, batching, connections.

pub mod assignment_events;
pub mod assignments;
pub mod binaries;
pub mod binaries_rest;
pub mod caller;
pub mod crawl;
pub mod graphql;
pub mod iiif_rest;
pub mod rest;
pub mod schema;
pub mod suggestion_loaders;
pub mod suggestions;
pub mod suggestions_rest;
pub mod theme_loaders;
pub mod themes;
pub mod viewer;
pub mod workers;
