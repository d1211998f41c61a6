//! Schema assembly: the domains' root fields merged into one schema, with the
//! depth and complexity limits, and the helpers every resolver shares.

pub mod connection;
pub mod limits;

use async_graphql::{EmptySubscription, MergedObject, SDLExportOptions, Schema};

use crate::assignments::graphql::{AssignmentsMutation, AssignmentsQuery};
use crate::assignments::service::Assignments;
use crate::binaries::graphql::{BinariesMutation, BinariesQuery};
use crate::binaries::service::Binaries;
use crate::config::Limits;
use crate::themes::graphql::{ThemesMutation, ThemesQuery};
use crate::themes::service::Themes;

#[derive(MergedObject, Default)]
pub struct Query(ThemesQuery, AssignmentsQuery, BinariesQuery);

#[derive(MergedObject, Default)]
pub struct Mutation(ThemesMutation, AssignmentsMutation, BinariesMutation);

pub type KarteiSchema = Schema<Query, Mutation, EmptySubscription>;

/// The domain services the resolvers use.
pub struct Services {
    pub themes: Themes,
    pub assignments: Assignments,
    pub binaries: Binaries,
}

pub fn build(services: Option<Services>, limits: &Limits) -> KarteiSchema {
    let mut b = Schema::build(Query::default(), Mutation::default(), EmptySubscription)
        .limit_depth(limits.max_depth)
        .limit_complexity(limits.max_complexity)
        .limit_recursive_depth(64)
        .extension(limits::QueryBounds {
            max_fields: limits.max_complexity as u64,
            max_depth: limits.max_depth as u64,
            query_timeout: std::time::Duration::from_secs(limits.request_timeout),
            mutation_timeout: std::time::Duration::from_secs(limits.mutation_timeout),
        });
    if let Some(s) = services {
        b = b.data(s.themes).data(s.assignments).data(s.binaries);
    }
    b.finish()
}

/// The printed SDL, sorted, as kept in `schema.graphql`.
pub fn sdl() -> String {
    build(None, &Limits::default()).sdl_with_options(
        SDLExportOptions::new()
            .sorted_fields()
            .sorted_arguments()
            .sorted_enum_items(),
    )
}
