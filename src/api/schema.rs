//! The schema: every domain's root fields merged into one Query, Mutation
//! and Subscription, built with the engine's limits; the schema WebSocket
//! operations run on; the printed SDL kept in `schema.graphql`.

use std::sync::Arc;

use async_graphql::{
    Data, Executor, MergedSubscription, Request, Response, SDLExportOptions, Schema, SchemaBuilder,
};
use futures::stream::BoxStream;

pub use crate::api::{FederatedQuery, Mutation, Query, Services};
use crate::kernel::limits::Limits;

// Every domain's subscriptions.
#[derive(MergedSubscription, Default)]
pub struct Subscription(
    crate::api::assignment_events::AssignmentsSubscription,
    crate::api::jobs::JobsSubscription,
);

/// The schema the server runs: the plain one, or with `--federation` a
/// federation subgraph; both execute through [`Executor`].
#[derive(Clone)]
pub enum KarteiSchema {
    Plain(Schema<Query, Mutation, Subscription>),
    Federated(Schema<FederatedQuery, Mutation, Subscription>),
}

impl Executor for KarteiSchema {
    async fn execute(&self, request: Request) -> Response {
        match self {
            KarteiSchema::Plain(s) => s.execute(request).await,
            KarteiSchema::Federated(s) => s.execute(request).await,
        }
    }

    fn execute_stream(
        &self,
        request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        match self {
            KarteiSchema::Plain(s) => Executor::execute_stream(s, request, session_data),
            KarteiSchema::Federated(s) => Executor::execute_stream(s, request, session_data),
        }
    }
}

impl KarteiSchema {
    /// The SDL as `options` print it.
    pub fn sdl_with_options(&self, options: SDLExportOptions) -> String {
        match self {
            KarteiSchema::Plain(s) => s.sdl_with_options(options),
            KarteiSchema::Federated(s) => s.sdl_with_options(options),
        }
    }
}

/// The schema over `services` (none: only to print the SDL); with
/// `federation`, an Apollo Federation 2 subgraph (`_service`, `_entities`,
/// `@key` on the entities of `api::federation`).
pub fn schema(services: Option<Services>, limits: &Limits, federation: bool) -> KarteiSchema {
    built(services, limits, federation, false)
}

/// The schema WebSocket operations run on: the same, but each execution
/// (each event of a subscription) gets its request's `graphql::batch::Fresh`
/// data anew. Apart from `schema` because a schema extension costs every
/// field of every request a detour, which HTTP requests need not pay.
pub fn live_schema(services: Services, limits: &Limits, federation: bool) -> KarteiSchema {
    built(Some(services), limits, federation, true)
}

fn built(
    services: Option<Services>,
    limits: &Limits,
    federation: bool,
    live: bool,
) -> KarteiSchema {
    if federation {
        KarteiSchema::Federated(finish(
            builder(FederatedQuery::default(), limits, live),
            services,
        ))
    } else {
        KarteiSchema::Plain(finish(builder(Query::default(), limits, live), services))
    }
}

fn builder<Q: async_graphql::ObjectType + 'static>(
    query: Q,
    limits: &Limits,
    live: bool,
) -> SchemaBuilder<Q, Mutation, Subscription> {
    let b = crate::api::graphql::schema_builder(
        query,
        Mutation::default(),
        Subscription::default(),
        limits,
    );
    if live {
        b.extension(crate::api::graphql::batch::PerExecution)
    } else {
        b
    }
}

fn finish<Q: async_graphql::ObjectType + 'static>(
    mut b: SchemaBuilder<Q, Mutation, Subscription>,
    services: Option<Services>,
) -> Schema<Q, Mutation, Subscription> {
    if let Some(s) = services {
        b = s.into_data(b);
    }
    b.finish()
}

/// The printed SDL, sorted, as kept in `schema.graphql`.
pub fn sdl() -> String {
    printed(false)
}

/// The subgraph SDL a federation gateway composes (what `_service { sdl }`
/// answers with `--federation`).
pub fn subgraph_sdl() -> String {
    printed(true)
}

fn printed(federation: bool) -> String {
    let options = SDLExportOptions::new()
        .sorted_fields()
        .sorted_arguments()
        .sorted_enum_items();
    schema(None, &Limits::default(), federation).sdl_with_options(if federation {
        options.federation()
    } else {
        options
    })
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
