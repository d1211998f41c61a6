//! The schema: every domain's root fields merged into one Query, Mutation
//! and Subscription, built with the engine's limits; the schema WebSocket
//! operations run on; the printed SDL kept in `schema.graphql`.

use async_graphql::{MergedSubscription, SDLExportOptions, Schema, SchemaBuilder};

pub use crate::api::{Mutation, Query, Services};
use crate::kernel::limits::Limits;

// Every domain's subscriptions.
#[derive(MergedSubscription, Default)]
pub struct Subscription(
    crate::api::assignment_events::AssignmentsSubscription,
    crate::api::jobs::JobsSubscription,
);

pub type KarteiSchema = Schema<Query, Mutation, Subscription>;

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
        builder(limits).extension(crate::api::graphql::batch::PerExecution),
        Some(services),
    )
}

fn builder(limits: &Limits) -> SchemaBuilder<Query, Mutation, Subscription> {
    crate::api::graphql::schema_builder(
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
        b = s.into_data(b);
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
