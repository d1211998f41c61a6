//! Apollo Federation 2, behind `--federation`: kartei as a subgraph of a
//! supergraph. The entities other subgraphs can extend, by their keys:
//! `Keyword @key(fields: "id")`, `Category @key(fields: "id")`,
//! `Binary @key(fields: "referenceId")` and `Assignment @key(fields:
//! "portalId ddbId keywordId creator")`. Each lookup goes through the same
//! services, loaders and answer budget as the ordinary root fields; an
//! unknown key resolves to null.

use async_graphql::{Context, ID, Object, Result};

use crate::api::assignments::Assignment;
use crate::api::binaries::Binary;
use crate::api::graphql::budget::Metered;
use crate::api::themes::{Category, Keyword, ThemesQuery};
use crate::domains::assignments::model::AssignmentKey;
use crate::domains::assignments::service::Assignments;

#[derive(Default)]
pub struct FederationQuery;

#[Object]
impl FederationQuery {
    #[graphql(entity)]
    async fn find_keyword_by_id(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> Result<Option<Metered<Keyword>>> {
        ThemesQuery.keyword(ctx, id).await
    }

    #[graphql(entity)]
    async fn find_category_by_id(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> Result<Option<Metered<Category>>> {
        ThemesQuery.category(ctx, id).await
    }

    #[graphql(entity)]
    async fn find_binary_by_reference_id(
        &self,
        ctx: &Context<'_>,
        reference_id: ID,
    ) -> Result<Option<Metered<Binary>>> {
        crate::api::binaries::load(ctx, &reference_id).await
    }

    #[graphql(entity)]
    async fn find_assignment_by_key(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        ddb_id: ID,
        keyword_id: ID,
        creator: String,
    ) -> Result<Option<Metered<Assignment>>> {
        let key = AssignmentKey {
            portal_id: portal_id.0,
            ddb_id: ddb_id.0,
            keyword_id: keyword_id.0,
            creator,
        };
        Ok(ctx
            .data_unchecked::<Assignments>()
            .get(&key)
            .await?
            .map(Assignment::metered))
    }
}
