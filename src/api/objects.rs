//! Catalogue objects in GraphQL: `catalogueObject(ddbId)`,
//! `catalogueObjects(ddbIds)` and `Assignment.object` (through the
//! request's [`ObjectLoader`]), each with the link to the object's page and
//! its image as a `Binary`.

use std::sync::Arc;
use std::time::Duration;

use async_graphql::{Context, ID, Object, Result};
use futures::FutureExt;

use crate::api::binaries::{Binary, load};
use crate::api::graphql::batch::Batches;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::cost;
use crate::api::graphql::loader::BatchLoader;
use crate::domains::objects::model::CatalogueObject as Stored;
use crate::domains::objects::service::Objects;
use crate::kernel::error::ApiError;

/// Ids `catalogueObjects` takes at a time.
pub const MAX_OBJECTS: usize = 100;

/// What the catalogue says of an object.
pub struct CatalogueObject(pub Stored);

#[Object]
impl CatalogueObject {
    async fn ddb_id(&self) -> ID {
        ID(self.0.ddb_id.clone())
    }
    async fn title(&self) -> &str {
        &self.0.title
    }
    /// The institution that holds it.
    async fn institution(&self) -> Option<&str> {
        self.0.institution.as_deref()
    }
    /// The link to the object's page on the portal (the server's
    /// `--object-url-pattern`, in `portalId`'s portal when it names one).
    async fn url(&self, ctx: &Context<'_>, portal_id: Option<ID>) -> Result<String> {
        Ok(ctx
            .data::<Objects>()?
            .page_url(&self.0.ddb_id, portal_id.as_ref().map(|p| p.as_str())))
    }
    /// The image URL the catalogue gave (registered as a binary under the ddb id).
    async fn image_url(&self) -> Option<&str> {
        self.0.image_url.as_deref()
    }
    /// That image as a binary (status, size, derivatives, IIIF); null when
    /// none was given or it has been deleted.
    async fn image(&self, ctx: &Context<'_>) -> Result<Option<Metered<Binary>>> {
        match &self.0.image_reference_id {
            Some(id) => load(ctx, id).await,
            None => Ok(None),
        }
    }
    /// When an import last changed it (RFC 3339).
    async fn updated_at(&self) -> &str {
        &self.0.updated_at
    }
}

/// The objects of one request, read together (see `graphql::loader`).
pub struct ObjectLoader(BatchLoader<Stored>);

impl ObjectLoader {
    pub fn new(objects: &Objects, window: Duration, batches: &Batches) -> Self {
        let objects = objects.clone();
        let fetch = Arc::new(move |ids: Vec<String>| {
            let objects = objects.clone();
            async move { Ok(objects.get_many(&ids).await?) }.boxed()
        });
        ObjectLoader(BatchLoader::new(fetch, window, batches))
    }
}

/// The object `ddb_id` through the request's loader; null when unknown.
pub async fn object(ctx: &Context<'_>, ddb_id: &str) -> Result<Option<Metered<CatalogueObject>>> {
    Ok(ctx
        .data::<ObjectLoader>()?
        .0
        .load_one(ddb_id.to_owned())
        .await?
        .map(|o| Metered(CatalogueObject(std::sync::Arc::unwrap_or_clone(o)))))
}

#[derive(Default)]
pub struct ObjectsQuery;

#[Object]
impl ObjectsQuery {
    /// What the catalogue says of an object (`kartei import-objects`); null
    /// for an id no import named.
    async fn catalogue_object(
        &self,
        ctx: &Context<'_>,
        ddb_id: ID,
    ) -> Result<Option<Metered<CatalogueObject>>> {
        crate::kernel::check_id("ddb", &ddb_id)?;
        object(ctx, &ddb_id).await
    }

    /// The known ones of up to 100 objects, in the order asked (unknown ids
    /// are left out).
    #[graphql(complexity = "cost::list(ddb_ids.len(), child_complexity)")]
    async fn catalogue_objects(
        &self,
        ctx: &Context<'_>,
        ddb_ids: Vec<ID>,
    ) -> Result<Vec<Metered<CatalogueObject>>> {
        if ddb_ids.len() > MAX_OBJECTS {
            return Err(ApiError::bad_input(format!("at most {MAX_OBJECTS} ddbIds at a time")).into());
        }
        let found =
            futures::future::try_join_all(ddb_ids.iter().map(|id| object(ctx, id))).await?;
        Ok(found.into_iter().flatten().collect())
    }
}
