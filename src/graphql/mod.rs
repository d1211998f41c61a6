//! What every domain's GraphQL shares: the limits a schema is built with
//! (`limits`), the one Relay connection builder (`connection`), and `viewer`
//! (who the token says the caller is). The
//! domains' root fields are merged into one schema in `app`.

pub mod batch;
pub mod connection;
pub mod limits;
pub mod loader;
pub mod viewer;

use async_graphql::{ObjectType, Schema, SchemaBuilder, SubscriptionType};

use crate::config::Limits;

/// A schema builder for `query` and `mutation` with the engine's limits:
/// complexity and the parser's recursion. The rest ([`limits::Gate`]:
/// expanded size and depth measured before validation, persisted queries,
/// execution deadlines) is applied by [`gate`] in front of the schema. The
/// depth is ours alone: async-graphql's counts introspection too, which would
/// refuse GraphiQL's schema query.
pub fn bounded<Q, M, S>(
    query: Q,
    mutation: M,
    subscription: S,
    limits: &Limits,
) -> SchemaBuilder<Q, M, S>
where
    Q: ObjectType + 'static,
    M: ObjectType + 'static,
    S: SubscriptionType + 'static,
{
    Schema::build(query, mutation, subscription)
        .limit_complexity(limits.max_complexity)
        .limit_recursive_depth(64)
}

/// The gate every request passes before the schema `bounded` builds.
pub fn gate(limits: &Limits) -> limits::Gate {
    limits::Gate::new(
        limits::QueryBounds {
            max_fields: limits.max_complexity as u64,
            max_depth: limits.max_depth as u64,
            max_query_bytes: limits.max_query_bytes,
            query_timeout: std::time::Duration::from_secs(limits.request_timeout),
            mutation_timeout: std::time::Duration::from_secs(limits.mutation_timeout),
        },
        limits.apq_entries,
    )
}
