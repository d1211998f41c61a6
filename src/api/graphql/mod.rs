//! What every GraphQL field shares: the schema builder with the engine's
//! limits and the gate in front of it (`gate`), list weights (`cost`), the
//! answer's budget (`budget`), batched loading (`batch`, `loader`) and the
//! one Relay connection builder (`connection`). The domains' root fields are
//! merged into one schema in `api::schema`.

pub mod batch;
pub mod budget;
pub mod connection;
pub mod cost;
pub mod gate;
pub mod loader;

use async_graphql::{ObjectType, Schema, SchemaBuilder, SubscriptionType};

use crate::kernel::limits::Limits;

/// A schema builder for `query` and `mutation` with the engine's limits:
/// complexity and the parser's recursion. The rest ([`gate::Gate`]:
/// expanded size and depth measured before validation, persisted queries,
/// execution deadlines) is applied by [`gate_for`] in front of the schema. The
/// depth is ours alone: async-graphql's counts introspection too, which would
/// refuse GraphiQL's schema query.
pub fn schema_builder<Q, M, S>(
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
pub fn gate_for(limits: &Limits) -> gate::Gate {
    gate::Gate::new(
        gate::QueryBounds {
            max_fields: limits.max_complexity as u64,
            max_depth: limits.max_depth as u64,
            max_query_bytes: limits.max_query_bytes,
            query_timeout: std::time::Duration::from_secs(limits.request_timeout),
            mutation_timeout: std::time::Duration::from_secs(limits.mutation_timeout),
            max_response_bytes: limits.max_response_bytes,
        },
        limits.apq_entries,
    )
}
