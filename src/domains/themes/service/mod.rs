//! The vocabulary rules: validation, derived hierarchy ids, index rows, and
//! the one logged batch that writes a base row with everything derived from it.

use std::collections::{BTreeSet, HashMap};

use super::model::*;
use super::search;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::kernel::{Clock, check_id};
use crate::store::{
    Bound, Cas, Condition, Cursor, DynStore, Listed, Mutation, Row, Slice, Table, Value,
};

mod keywords;

const MAX_TEXT: usize = 2_000;
const MAX_LIST: usize = 100;
/// Keyword batches a bulk upsert keeps in flight.
pub const BULK_WRITES: usize = 1000;
/// Children of a category are listed in one read of at most this many rows.
pub const MAX_CHILDREN: usize = 1_000;

/// Lost rounds of a keyword write before it is CONFLICT; also the rounds a
/// writer re-reads a keyword it wrote to put its index rows right.
const KEYWORD_TRIES: usize = 8;

/// A category as a caller writes it (its ancestors are the server's).
#[derive(Clone, Debug, Default)]
pub struct CategoryInput {
    pub id: String,
    /// An existing category, at most `max_category_depth` deep; none makes
    /// a portal.
    pub parent_id: Option<String>,
    pub label: String,
    pub notation: Option<String>,
    pub xtree_uri: Option<String>,
}

/// A keyword as a caller writes it (its hierarchy and index rows are the
/// server's).
#[derive(Clone, Debug, Default)]
pub struct KeywordInput {
    pub id: String,
    pub label: String,
    /// At most `MAX_LIST`.
    pub synonyms: Vec<String>,
    pub note: Option<String>,
    pub primary_gnd_uri: Option<String>,
    /// At most `MAX_LIST`.
    pub related_gnd_uris: Vec<String>,
    /// An existing GND entity type.
    pub gnd_entity_id: Option<String>,
    /// Existing categories (it is indexed under each of their portals).
    pub category_ids: Vec<String>,
    pub xtree_uri: Option<String>,
    /// Only importers set this; otherwise the first write's time is kept.
    pub created_at: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct GndEntityInput {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

fn check_text(what: &str, s: &str) -> ApiResult<()> {
    if s.len() > MAX_TEXT {
        return Err(ApiError::bad_input(format!(
            "{what} is longer than {MAX_TEXT} bytes"
        )));
    }
    Ok(())
}

fn clean_opt(what: &str, s: Option<String>) -> ApiResult<Option<String>> {
    match s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()) {
        Some(s) => {
            check_text(what, &s)?;
            Ok(Some(s))
        }
        None => Ok(None),
    }
}

fn clean_label(what: &str, raw: &str) -> ApiResult<String> {
    let label = search::strip_label(raw);
    if label.is_empty() {
        return Err(ApiError::bad_input(format!(
            "{what} label must not be empty"
        )));
    }
    check_text(what, &label)?;
    Ok(label)
}

fn clean_list(what: &str, items: Vec<String>, labels: bool) -> ApiResult<Vec<String>> {
    if items.len() > MAX_LIST {
        return Err(ApiError::bad_input(format!("at most {MAX_LIST} {what}")));
    }
    let mut out: Vec<String> = Vec::new();
    for i in items {
        let v = if labels {
            search::strip_label(&i)
        } else {
            i.trim().to_owned()
        };
        check_text(what, &v)?;
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

/// How deep a category may be (a portal is level 1) unless configured
/// otherwise (`--max-category-depth`): a category stores its ancestors and a
/// keyword a row in each of its categories' ancestors, so the store grows
/// with depth × items.
pub const DEFAULT_MAX_CATEGORY_DEPTH: usize = 16;

#[derive(Clone)]
pub struct Themes {
    store: DynStore,
    clock: Clock,
    max_category_depth: usize,
}

impl Themes {
    pub fn new(store: DynStore) -> Self {
        Themes {
            store,
            clock: Clock::system(),
            max_category_depth: DEFAULT_MAX_CATEGORY_DEPTH,
        }
    }

    /// The same service refusing categories deeper than `levels` (a portal is level 1).
    pub fn with_max_category_depth(self, levels: usize) -> Self {
        Themes {
            max_category_depth: levels.max(1),
            ..self
        }
    }

    /// The same service reading time from `clock`.
    pub fn with_clock(self, clock: Clock) -> Self {
        Themes { clock, ..self }
    }

    pub fn store(&self) -> &DynStore {
        &self.store
    }

    pub async fn category(&self, id: &str) -> ApiResult<Option<Category>> {
        Ok(self
            .store
            .get(&CATEGORIES, &[id.into()])
            .await?
            .map(Category::from_owned))
    }

    /// Rows of `table` by id (keys built by `key`), as a map from the requested id.
    async fn by_ids<T>(
        &self,
        table: &'static Table,
        ids: &[String],
        key: impl Fn(&String) -> Vec<Value>,
        from_row: fn(Row) -> T,
    ) -> ApiResult<HashMap<String, T>> {
        let keys: Vec<Vec<Value>> = ids.iter().map(key).collect();
        let rows = self.store.get_many(table, &keys).await?;
        Ok(ids
            .iter()
            .zip(rows)
            .filter_map(|(id, row)| Some((id.clone(), from_row(row?))))
            .collect())
    }

    /// The portal `id`: NOT_FOUND when there is no such category,
    /// BAD_USER_INPUT when it is a category inside a portal.
    pub async fn portal(&self, id: &str) -> ApiResult<Category> {
        match self.category(id).await? {
            Some(c) if c.parent_id.is_none() => Ok(c),
            Some(_) => Err(ApiError::bad_input(format!(
                "{id:?} is a category inside a portal, not a portal"
            ))),
            None => Err(ApiError::NotFound(format!("portal {id:?}"))),
        }
    }

    pub async fn categories(&self, ids: &[String]) -> ApiResult<HashMap<String, Category>> {
        self.by_ids(&CATEGORIES, ids, |i| vec![i.into()], Category::from_owned)
            .await
    }

    pub async fn keywords(&self, ids: &[String]) -> ApiResult<HashMap<String, Keyword>> {
        self.by_ids(&KEYWORDS, ids, |i| vec![i.into()], Keyword::from_owned)
            .await
    }

    pub async fn gnd_entities_by_id(
        &self,
        ids: &[String],
    ) -> ApiResult<HashMap<String, GndEntity>> {
        self.by_ids(
            &GND_ENTITIES,
            ids,
            |i| vec![GND_TYPE.into(), i.into()],
            GndEntity::from_owned,
        )
        .await
    }

    pub async fn portals(&self) -> ApiResult<Vec<Category>> {
        let rows = self
            .store
            .partition_rows(&PORTALS, PORTAL_TYPE.into(), MAX_CHILDREN)
            .await?;
        Ok(rows.iter().map(listed_category(None)).collect())
    }

    pub async fn gnd_entities(&self) -> ApiResult<Vec<GndEntity>> {
        let rows = self
            .store
            .partition_rows(&GND_ENTITIES, GND_TYPE.into(), 10_000)
            .await?;
        Ok(rows.iter().map(GndEntity::from_row).collect())
    }

    /// The children of many categories (concurrent single-partition reads,
    /// for a loader), each as listed in its parent's query table: their
    /// `ancestor_ids` are the caller's to fill in from the parent.
    pub async fn children_of(
        &self,
        parent_ids: &[String],
    ) -> ApiResult<HashMap<String, Vec<Category>>> {
        let slices: Vec<Slice> = parent_ids
            .iter()
            .map(|p| Slice::partition(vec![p.as_str().into()]).limit(MAX_CHILDREN))
            .collect();
        let pages = self.store.slice_many(&CATEGORIES_PARENTS, &slices).await?;
        let no_ancestors = Vec::new();
        Ok(parent_ids
            .iter()
            .zip(pages)
            .map(|(p, page)| {
                let listed = page
                    .rows
                    .iter()
                    .map(listed_category(Some((p, &no_ancestors))));
                (p.clone(), listed.collect())
            })
            .collect())
    }

    /// A page of keyword ids in a category (directly, or anywhere below it).
    pub async fn category_keyword_ids(
        &self,
        category_id: &str,
        include_descendants: bool,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<Listed<String>> {
        let table = if include_descendants {
            &KEYWORDS_HIERARCHIES
        } else {
            &KEYWORDS_CATEGORIES
        };
        let page = self
            .store
            .slice(
                table,
                &Slice::partition(vec![category_id.into()])
                    .limit(first)
                    .after(after),
            )
            .await?;
        Ok(page.listed(|r| Some(r.string("keyword_id"))))
    }

    /// Creates or replaces a GND entity type (admin).
    pub async fn upsert_gnd_entity(
        &self,
        who: &Principal,
        input: GndEntityInput,
    ) -> ApiResult<GndEntity> {
        who.require(Role::Admin)?;
        check_id("GND entity", &input.id)?;
        let name = input.name.trim().to_owned();
        if name.is_empty() {
            return Err(ApiError::bad_input("a GND entity needs a name"));
        }
        check_text("name", &name)?;
        let g = GndEntity {
            id: input.id,
            name,
            description: clean_opt("description", input.description)?,
        };
        self.store.apply(vec![Mutation::upsert(g.to_row())]).await?;
        Ok(g)
    }

    /// Creates or replaces a category (admin).
    pub async fn upsert_category(
        &self,
        who: &Principal,
        input: CategoryInput,
    ) -> ApiResult<Category> {
        who.require(Role::Admin)?;
        check_id("category", &input.id)?;
        let label = clean_label("category", &input.label)?;
        let parent_id = input
            .parent_id
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty());
        let ancestor_ids = match &parent_id {
            None => Vec::new(),
            Some(p) if *p == input.id => {
                return Err(ApiError::bad_input("a category cannot be its own parent"));
            }
            Some(p) => {
                let parent = self
                    .category(p)
                    .await?
                    .ok_or_else(|| ApiError::bad_input(format!("unknown parent category {p}")))?;
                if parent.ancestor_ids.contains(&input.id) {
                    return Err(ApiError::bad_input(
                        "a category cannot be moved below its own descendant",
                    ));
                }
                let mut a = parent.ancestor_ids;
                a.push(parent.id);
                a
            }
        };
        let depth = ancestor_ids.len() + 1;
        if depth > self.max_category_depth {
            return Err(ApiError::bad_input(format!(
                "category {} would be at level {depth} (a portal is level 1); the maximum category depth is {} (setting --max-category-depth, KARTEI_MAX_CATEGORY_DEPTH)",
                input.id, self.max_category_depth
            )));
        }
        let category = Category {
            id: input.id,
            parent_id,
            label,
            notation: clean_opt("notation", input.notation)?,
            xtree_uri: clean_opt("xtreeUri", input.xtree_uri)?,
            ancestor_ids,
        };
        let mut batch = Vec::new();
        if let Some(old) = self.category(&category.id).await? {
            if old == category {
                return Ok(category);
            }
            if old.parent_id != category.parent_id {
                // Moving would change the derived ids of everything below it.
                if self.has_children_or_keywords(&old.id).await? {
                    return Err(ApiError::bad_input(
                        "a category with children or keywords cannot be moved; move or delete its contents first",
                    ));
                }
                batch.push(listing_delete(&old));
            }
        }
        batch.push(Mutation::upsert(category.to_row()));
        batch.push(Mutation::upsert(category.listing_row()));
        self.store.apply(batch).await?;
        Ok(category)
    }

    async fn has_children_or_keywords(&self, id: &str) -> ApiResult<bool> {
        let one = Slice::partition(vec![id.into()]).limit(1);
        let (children, keywords) = futures::try_join!(
            self.store.slice(&CATEGORIES_PARENTS, &one),
            self.store.slice(&KEYWORDS_HIERARCHIES, &one)
        )?;
        Ok(!children.rows.is_empty() || !keywords.rows.is_empty())
    }

    /// Deletes an empty category (admin).
    pub async fn delete_category(&self, who: &Principal, id: &str) -> ApiResult<String> {
        who.require(Role::Admin)?;
        let old = self
            .category(id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("category {id}")))?;
        if self.has_children_or_keywords(id).await? {
            return Err(ApiError::bad_input(
                "the category still has children or keywords",
            ));
        }
        self.store
            .apply(vec![
                Mutation::delete(&CATEGORIES, vec![id.into()]),
                listing_delete(&old),
            ])
            .await?;
        Ok(id.to_owned())
    }

    /// Adds the categories of `ids` that `categories` lacks.
    async fn load_categories(
        &self,
        ids: Vec<String>,
        categories: &mut HashMap<String, Category>,
    ) -> ApiResult<()> {
        let missing: Vec<String> = ids
            .into_iter()
            .filter(|c| !c.is_empty() && !categories.contains_key(c))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !missing.is_empty() {
            categories.extend(self.categories(&missing).await?);
        }
        Ok(())
    }

    /// Keywords of a portal whose label or a synonym contains `text`, best first.
    pub async fn search(
        &self,
        portal_id: &str,
        text: &str,
        first: usize,
    ) -> ApiResult<Vec<Keyword>> {
        let q = search::normalize(text);
        if q.chars().count() < 2 {
            return Err(ApiError::bad_input(
                "a search needs at least two characters",
            ));
        }
        let qt: String = q.chars().take(search::SEARCH_CHARS).collect();
        let bucket = search::bucket(&qt);
        let mut candidates: Vec<String> = Vec::new();
        // Read in ranking order; stop once enough distinct keywords are found.
        let page_rows = (first * 4).clamp(50, 1_000);
        'kinds: for kind in [
            search::KIND_LABEL_START,
            search::KIND_WORD_START,
            search::KIND_INFIX,
        ] {
            let mut after = None;
            for _ in 0..5 {
                let slice = Slice::partition(vec![portal_id.into(), bucket.as_str().into()])
                    .prefix(vec![Value::Int(kind)])
                    .lower(Bound::Inclusive(qt.as_str().into()))
                    .upper(Bound::Exclusive(format!("{qt}\u{10FFFF}").into()))
                    .limit(page_rows)
                    .after(after);
                let page = self.store.slice(&KEYWORDS_SEARCH, &slice).await?;
                for r in &page.rows {
                    let id = r.string("keyword_id");
                    if !candidates.contains(&id) {
                        candidates.push(id);
                    }
                }
                // Rows come in ranking order, so the first `first` are the best, unless
                // the query is longer than the index and some may not match in full.
                let wanted = if q.chars().count() > search::SEARCH_CHARS {
                    first * 2
                } else {
                    first
                };
                if candidates.len() >= wanted {
                    break 'kinds;
                }
                match page.next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
        }
        let keywords = self.keywords(&candidates).await?;
        let mut ranked: Vec<(u8, usize, Keyword)> = candidates
            .iter()
            .enumerate()
            .filter_map(|(i, id)| {
                let k = keywords.get(id)?;
                let mut labels = vec![k.label.clone()];
                labels.extend(k.synonyms.iter().cloned());
                search::rank(&q, &labels).map(|r| (r, i, k.clone()))
            })
            .collect();
        ranked.sort_by_key(|r| (r.0, r.1));
        Ok(ranked.into_iter().take(first).map(|(_, _, k)| k).collect())
    }
}

/// The row that lists a category under its parent (or among the portals), as a delete.
fn listing_delete(c: &Category) -> Mutation {
    match &c.parent_id {
        Some(p) => Mutation::delete(&CATEGORIES_PARENTS, vec![p.into(), c.id.as_str().into()]),
        None => Mutation::delete(&PORTALS, vec![PORTAL_TYPE.into(), c.id.as_str().into()]),
    }
}

/// Builds a category from a listing row (children or portals).
fn listed_category(parent: Option<(&String, &Vec<String>)>) -> impl Fn(&Row) -> Category {
    move |r| Category {
        id: r.string("id"),
        parent_id: parent.map(|p| p.0.clone()),
        label: r.string("label"),
        notation: r.text("notation").map(str::to_owned),
        xtree_uri: r.text("xtree_uri").map(str::to_owned),
        ancestor_ids: parent.map(|p| p.1.clone()).unwrap_or_default(),
    }
}
