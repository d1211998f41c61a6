//! GraphQL types and root fields of the themes domain.

use std::sync::Arc;

use async_graphql::{Context, ID, InputObject, Object, Result};

use crate::api::caller::caller;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::connection::{self, Page, connection};
use crate::api::graphql::cost;
use crate::api::theme_loaders::ThemeLoaders;
use crate::domains::themes::model;
use crate::domains::themes::service::{CategoryInput, GndEntityInput, KeywordInput, Themes};
use crate::kernel::error::ApiError;
use crate::kernel::page_size;

fn themes<'a>(ctx: &Context<'a>) -> &'a Themes {
    ctx.data_unchecked::<Themes>()
}

pub(crate) fn loaders<'a>(ctx: &Context<'a>) -> &'a ThemeLoaders {
    ctx.data_unchecked::<ThemeLoaders>()
}

async fn load_categories(ctx: &Context<'_>, ids: &[String]) -> Result<Vec<Metered<Category>>> {
    let found = loaders(ctx)
        .categories
        .load_many(ids.iter().cloned())
        .await?;
    Ok(ids
        .iter()
        .filter_map(|id| found.get(id).cloned().map(Category::metered))
        .collect())
}

/// What a category's list fields are weighed as: the children, portals or
/// categories of a keyword a vocabulary usually has (the answer's size
/// budget bounds a vocabulary that has more).
const CATEGORIES_WEIGHT: usize = 20;
/// The ancestors of a category: at most the default maximum depth.
const ANCESTORS_WEIGHT: usize = 16;
/// The synonyms or GND links of a keyword (at most 100 are stored).
const TEXTS_WEIGHT: usize = 10;

/// A category of the vocabulary; a top-level category is a portal.
pub struct Category(pub Arc<model::Category>);

impl Category {
    /// As the schema returns it: counted against the answer's budget.
    pub fn metered(c: impl Into<Arc<model::Category>>) -> Metered<Category> {
        Metered(Category(c.into()))
    }
}

#[Object]
impl Category {
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    async fn parent_id(&self) -> Option<ID> {
        self.0.parent_id.clone().map(ID)
    }
    async fn label(&self) -> &str {
        &self.0.label
    }
    async fn notation(&self) -> Option<&str> {
        self.0.notation.as_deref()
    }
    async fn xtree_uri(&self) -> Option<&str> {
        self.0.xtree_uri.as_deref()
    }
    async fn parent(&self, ctx: &Context<'_>) -> Result<Option<Metered<Category>>> {
        match &self.0.parent_id {
            Some(p) => Ok(loaders(ctx)
                .categories
                .load_one(p.clone())
                .await?
                .map(Category::metered)),
            None => Ok(None),
        }
    }
    /// The direct children, in id order.
    #[graphql(complexity = "cost::list(CATEGORIES_WEIGHT, child_complexity)")]
    async fn children(&self, ctx: &Context<'_>) -> Result<Vec<Metered<Category>>> {
        let listed = loaders(ctx)
            .children
            .load_one(self.0.id.clone())
            .await?
            .unwrap_or_default();
        let mut ancestors = self.0.ancestor_ids.clone();
        ancestors.push(self.0.id.clone());
        Ok(listed
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.ancestor_ids.clone_from(&ancestors);
                Category::metered(c)
            })
            .collect())
    }
    /// Every category above this one, root (the portal) first, without itself.
    #[graphql(complexity = "cost::list(ANCESTORS_WEIGHT, child_complexity)")]
    async fn ancestors(&self, ctx: &Context<'_>) -> Result<Vec<Metered<Category>>> {
        load_categories(ctx, &self.0.ancestor_ids).await
    }
    /// The top-level category this one belongs to (itself for a portal).
    async fn portal(&self, ctx: &Context<'_>) -> Result<Metered<Category>> {
        match self.0.ancestor_ids.first() {
            None => Ok(Category::metered(self.0.clone())),
            Some(root) => loaders(ctx)
                .categories
                .load_one(root.clone())
                .await?
                .map(Category::metered)
                .ok_or_else(|| ApiError::NotFound(format!("portal {root}")).into()),
        }
    }
    /// Keywords in this category (or, with `includeDescendants`, anywhere below it), in id order.
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    async fn keywords(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        #[graphql(default = false)] include_descendants: bool,
    ) -> Result<Page<Metered<Keyword>>> {
        let (first, after, has_previous) = connection::window(first, after)?;
        let page = themes(ctx)
            .category_keyword_ids(&self.0.id, include_descendants, first, after)
            .await?;
        let found = loaders(ctx)
            .keywords
            .load_many(page.items.iter().map(|(_, id)| id.clone()))
            .await?;
        let keywords = page.filter_map(|id| Some(Keyword::metered(found.get(&id)?.clone())));
        Ok(connection(keywords, has_previous))
    }
}

/// A keyword (Schlagwort), linked to GND authority records.
pub struct Keyword(pub Arc<model::Keyword>);

impl Keyword {
    /// As the schema returns it: counted against the answer's budget.
    pub fn metered(k: impl Into<Arc<model::Keyword>>) -> Metered<Keyword> {
        Metered(Keyword(k.into()))
    }
}

#[Object]
impl Keyword {
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    async fn label(&self) -> &str {
        &self.0.label
    }
    #[graphql(complexity = "cost::list(TEXTS_WEIGHT, child_complexity)")]
    async fn synonyms(&self) -> &[String] {
        &self.0.synonyms
    }
    async fn note(&self) -> Option<&str> {
        self.0.note.as_deref()
    }
    /// RFC 3339.
    async fn created_at(&self) -> &str {
        &self.0.created_at
    }
    async fn primary_gnd_uri(&self) -> Option<&str> {
        self.0.primary_gnd_uri.as_deref()
    }
    #[graphql(complexity = "cost::list(TEXTS_WEIGHT, child_complexity)")]
    async fn related_gnd_uris(&self) -> &[String] {
        &self.0.related_gnd_uris
    }
    async fn gnd_entity(&self, ctx: &Context<'_>) -> Result<Option<Metered<GndEntity>>> {
        match &self.0.gnd_entity_id {
            Some(id) => Ok(loaders(ctx)
                .gnd_entities
                .load_one(id.clone())
                .await?
                .map(|g| Metered(GndEntity(Arc::unwrap_or_clone(g))))),
            None => Ok(None),
        }
    }
    async fn xtree_uri(&self) -> Option<&str> {
        self.0.xtree_uri.as_deref()
    }
    /// The categories the keyword is directly in.
    #[graphql(complexity = "cost::list(CATEGORIES_WEIGHT, child_complexity)")]
    async fn categories(&self, ctx: &Context<'_>) -> Result<Vec<Metered<Category>>> {
        load_categories(ctx, &self.0.category_ids).await
    }
    /// Every category above the keyword (its categories and all their ancestors).
    #[graphql(complexity = "cost::list(CATEGORIES_WEIGHT, child_complexity)")]
    async fn hierarchical_categories(&self, ctx: &Context<'_>) -> Result<Vec<Metered<Category>>> {
        load_categories(ctx, &self.0.hierarchical_category_ids).await
    }
    /// The objects this keyword is assigned to (optionally only in one portal),
    /// ordered by portal, ddb id and creator.
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    async fn assignments(
        &self,
        ctx: &Context<'_>,
        portal_id: Option<ID>,
        first: Option<i32>,
        after: Option<String>,
    ) -> Result<crate::api::assignments::AssignmentConnection> {
        crate::api::assignments::keyword_assignments(ctx, &self.0.id, portal_id, first, after).await
    }
}

/// A GND entity type, such as `gndo:HistoricSingleEventOrEra`.
pub struct GndEntity(pub model::GndEntity);

#[Object]
impl GndEntity {
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn description(&self) -> Option<&str> {
        self.0.description.as_deref()
    }
}

#[derive(Default)]
pub struct ThemesQuery;

#[Object]
impl ThemesQuery {
    /// The top-level categories (thematic portals), in id order.
    #[graphql(complexity = "cost::list(CATEGORIES_WEIGHT, child_complexity)")]
    async fn portals(&self, ctx: &Context<'_>) -> Result<Vec<Metered<Category>>> {
        Ok(themes(ctx)
            .portals()
            .await?
            .into_iter()
            .map(Category::metered)
            .collect())
    }
    pub(crate) async fn category(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> Result<Option<Metered<Category>>> {
        Ok(loaders(ctx)
            .categories
            .load_one(id.0)
            .await?
            .map(Category::metered))
    }
    pub(crate) async fn keyword(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> Result<Option<Metered<Keyword>>> {
        Ok(loaders(ctx)
            .keywords
            .load_one(id.0)
            .await?
            .map(Keyword::metered))
    }
    /// Keywords of a portal whose label or a synonym contains `text` (case and
    /// diacritics ignored), exact matches first, then prefix, word and infix matches.
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    async fn search_keywords(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        text: String,
        first: Option<i32>,
    ) -> Result<Vec<Metered<Keyword>>> {
        let first = page_size(first)?;
        Ok(themes(ctx)
            .search(&portal_id, &text, first)
            .await?
            .into_iter()
            .map(Keyword::metered)
            .collect())
    }
    /// All GND entity types, in id order.
    #[graphql(complexity = "cost::list(CATEGORIES_WEIGHT, child_complexity)")]
    async fn gnd_entities(&self, ctx: &Context<'_>) -> Result<Vec<Metered<GndEntity>>> {
        Ok(themes(ctx)
            .gnd_entities()
            .await?
            .into_iter()
            .map(|g| Metered(GndEntity(g)))
            .collect())
    }
}

#[derive(InputObject)]
pub struct UpsertCategoryInput {
    pub id: ID,
    /// Absent or null for a top-level category (a portal).
    pub parent_id: Option<ID>,
    pub label: String,
    pub notation: Option<String>,
    pub xtree_uri: Option<String>,
}

#[derive(InputObject)]
pub struct UpsertKeywordInput {
    pub id: ID,
    pub label: String,
    #[graphql(default)]
    pub synonyms: Vec<String>,
    pub note: Option<String>,
    pub primary_gnd_uri: Option<String>,
    #[graphql(default)]
    pub related_gnd_uris: Vec<String>,
    pub gnd_entity_id: Option<ID>,
    /// The categories the keyword is directly in (at least one).
    pub category_ids: Vec<ID>,
    pub xtree_uri: Option<String>,
}

#[derive(InputObject)]
pub struct UpsertGndEntityInput {
    pub id: ID,
    pub name: String,
    pub description: Option<String>,
}

#[derive(Default)]
pub struct ThemesMutation;

#[Object]
impl ThemesMutation {
    /// Creates or replaces a category (admin). Moving a category that has
    /// children or keywords is refused, and so is a category deeper than the
    /// server's maximum category depth (a portal is level 1; 16 by default).
    async fn upsert_category(
        &self,
        ctx: &Context<'_>,
        input: UpsertCategoryInput,
    ) -> Result<Metered<Category>> {
        let c = themes(ctx)
            .upsert_category(
                caller(ctx),
                CategoryInput {
                    id: input.id.0,
                    parent_id: input.parent_id.map(|p| p.0),
                    label: input.label,
                    notation: input.notation,
                    xtree_uri: input.xtree_uri,
                },
            )
            .await?;
        Ok(Category::metered(c))
    }
    /// Deletes an empty category (admin); returns its id.
    async fn delete_category(&self, ctx: &Context<'_>, id: ID) -> Result<ID> {
        Ok(ID(themes(ctx).delete_category(caller(ctx), &id).await?))
    }
    /// Creates or replaces a keyword (admin). Its hierarchy and index rows are derived by the server.
    /// Two calls for one keyword at once never mix: one is written whole after the other (the
    /// one that finds the keyword changed writes again over it); CONFLICT only if it keeps
    /// changing meanwhile.
    async fn upsert_keyword(
        &self,
        ctx: &Context<'_>,
        input: UpsertKeywordInput,
    ) -> Result<Metered<Keyword>> {
        let k = themes(ctx)
            .upsert_keyword(
                caller(ctx),
                KeywordInput {
                    id: input.id.0,
                    label: input.label,
                    synonyms: input.synonyms,
                    note: input.note,
                    primary_gnd_uri: input.primary_gnd_uri,
                    related_gnd_uris: input.related_gnd_uris,
                    gnd_entity_id: input.gnd_entity_id.map(|g| g.0),
                    category_ids: input.category_ids.into_iter().map(|c| c.0).collect(),
                    xtree_uri: input.xtree_uri,
                    created_at: None,
                },
            )
            .await?;
        Ok(Keyword::metered(k))
    }
    /// Deletes a keyword and its index rows (admin); returns its id.
    async fn delete_keyword(&self, ctx: &Context<'_>, id: ID) -> Result<ID> {
        Ok(ID(themes(ctx).delete_keyword(caller(ctx), &id).await?))
    }
    /// Creates or replaces a GND entity type (admin).
    async fn upsert_gnd_entity(
        &self,
        ctx: &Context<'_>,
        input: UpsertGndEntityInput,
    ) -> Result<Metered<GndEntity>> {
        let g = themes(ctx)
            .upsert_gnd_entity(
                caller(ctx),
                GndEntityInput {
                    id: input.id.0,
                    name: input.name,
                    description: input.description,
                },
            )
            .await?;
        Ok(Metered(GndEntity(g)))
    }
}

