//! What the reconciliation service does, whatever the protocol version:
//! find and score keywords for a query, suggest keywords, types and
//! properties by prefix, and read properties of keywords for data extension.
//! The wire formats of 0.2 and 1.0 are in `wire.rs`.

use std::collections::{BTreeSet, HashMap};

use futures::StreamExt;

use super::score;
use crate::domains::themes::model::{Category, Keyword};
use crate::domains::themes::search::normalize;
use crate::domains::themes::service::Themes;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::limits::ReconcileLimits;

/// The type every keyword has (besides its categories).
pub const KEYWORD_TYPE: (&str, &str) = ("Keyword", "Keyword");

/// The properties of a keyword: id, name, and whether its values are
/// entities (categories) rather than texts.
pub const PROPERTIES: [(&str, &str); 8] = [
    ("gnd", "GND URI"),
    ("relatedGnd", "Related GND URIs"),
    ("synonym", "Synonyms"),
    ("category", "Categories"),
    ("categoryPath", "Category paths"),
    ("portal", "Portals"),
    ("note", "Scope note"),
    ("xtree", "xTree URI"),
];

/// A reconciliation query, as both versions say it.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub text: String,
    /// A type id: `Keyword` or a category's id (keywords in or below it).
    pub type_id: Option<String>,
    pub limit: usize,
    pub conditions: Vec<Condition>,
}

/// A property condition: the keyword's `property` values hold any, all or
/// none of `values` (`quantifier`); a `required` one (1.0) removes the
/// candidates that fail it. The property `id` is the keyword's id.
#[derive(Clone, Debug)]
pub struct Condition {
    pub property: String,
    pub values: Vec<String>,
    pub quantifier: Quantifier,
    pub required: bool,
}

/// How a condition with several values is met (1.0's `matchQuantifier`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Quantifier {
    #[default]
    Any,
    All,
    None,
}

impl Condition {
    fn met_by(&self, found: &[String]) -> bool {
        let mut each = self
            .values
            .iter()
            .map(|v| score::value_matches(&self.property, v, found));
        match self.quantifier {
            Quantifier::Any => each.any(|m| m),
            Quantifier::All => each.all(|m| m),
            Quantifier::None => !each.any(|m| m),
        }
    }
}

/// A scored keyword.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub types: Vec<(String, String)>,
    pub score: f64,
    pub matched: bool,
}

/// A property's values for one keyword: texts, or entities (id, name).
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    Entity(String, String),
}

/// The keywords of the service, all portals' or one's.
#[derive(Clone)]
pub struct Reconciler {
    pub themes: Themes,
    pub limits: ReconcileLimits,
}

/// Queries of one batch worked on at once.
const AT_ONCE: usize = 8;
/// Batches worked on at once in this process.
pub const BATCHES_AT_ONCE: usize = 2;
static BATCHES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(BATCHES_AT_ONCE);
/// Conditions one query may hold.
pub const MAX_CONDITIONS: usize = 16;
/// Portals searched at once for one term.
const PORTALS_AT_ONCE: usize = 4;
/// Keywords one search term reads at most.
const MAX_PER_TERM: usize = 60;
/// Words of a query searched each on its own (the longest).
const WORDS: usize = 4;
/// Categories a type suggestion reads at most.
const MAX_TYPES_READ: usize = 5_000;

impl Reconciler {
    /// The portals of a scope: the one named (NOT_FOUND unless it is a
    /// portal) or every portal.
    pub async fn portals(&self, scope: Option<&str>) -> ApiResult<Vec<Category>> {
        match scope {
            None => self.themes.portals().await,
            Some(p) => Ok(vec![self.themes.portal(p).await?]),
        }
    }

    /// Checks a batch against the limits before any work.
    pub fn check_batch(&self, queries: &[Query]) -> ApiResult<()> {
        let l = &self.limits;
        if queries.len() > l.max_queries {
            return Err(ApiError::bad_input(format!(
                "a batch holds at most {} queries (--reconcile-max-queries), not {}",
                l.max_queries,
                queries.len()
            )));
        }
        for q in queries {
            if q.conditions.len() > MAX_CONDITIONS {
                return Err(ApiError::bad_input(format!(
                    "a query holds at most {MAX_CONDITIONS} conditions"
                )));
            }
            if q.text.chars().count() > l.max_text {
                return Err(ApiError::bad_input(format!(
                    "a query's text is at most {} characters",
                    l.max_text
                )));
            }
            if q.limit > l.max_limit {
                return Err(ApiError::bad_input(format!(
                    "a query's limit is at most {}",
                    l.max_limit
                )));
            }
            if let Some(c) = q
                .conditions
                .iter()
                .find(|c| c.property != "id" && !is_property(&c.property))
            {
                return Err(ApiError::bad_input(format!(
                    "unknown property {:?}; the properties are {}",
                    c.property,
                    PROPERTIES.map(|p| p.0).join(", ")
                )));
            }
            let values = q.conditions.iter().flat_map(|c| &c.values);
            if values.clone().count() > l.max_limit
                || values.clone().any(|v| v.chars().count() > l.max_text)
            {
                return Err(ApiError::bad_input(format!(
                    "a query's conditions hold at most {} values of at most {} characters",
                    l.max_limit, l.max_text
                )));
            }
        }
        Ok(())
    }

    /// Candidates for each query, in the batch's order. At most
    /// [`BATCHES_AT_ONCE`] batches are worked on at once in a process; the
    /// others wait.
    pub async fn reconcile(
        &self,
        portals: &[Category],
        queries: Vec<Query>,
    ) -> ApiResult<Vec<Vec<Candidate>>> {
        self.check_batch(&queries)?;
        let _turn = BATCHES.acquire().await.map_err(|_| ApiError::Unavailable)?;
        let answers: Vec<ApiResult<Vec<Candidate>>> = futures::stream::iter(queries)
            .map(|q| async move { self.answer(portals, &q).await })
            .buffered(AT_ONCE)
            .collect()
            .await;
        answers.into_iter().collect()
    }

    async fn answer(&self, portals: &[Category], q: &Query) -> ApiResult<Vec<Candidate>> {
        let text = normalize(&q.text);
        let mut terms: Vec<String> = Vec::new();
        if !text.is_empty() {
            terms.push(text.clone());
        }
        let mut words: Vec<&str> = text.split(' ').filter(|w| w.chars().count() >= 3).collect();
        words.sort_by_key(|w| std::cmp::Reverse(w.len()));
        words.truncate(WORDS);
        // The start of each longer word finds labels with a typo further on.
        let starts: Vec<String> = words
            .iter()
            .filter(|w| w.chars().count() >= 4)
            .map(|w| w.chars().take(3).collect())
            .collect();
        terms.extend(words.into_iter().filter(|w| *w != text).map(str::to_owned));
        for s in starts {
            if !terms.contains(&s) {
                terms.push(s);
            }
        }
        let want = (q.limit.max(1) * 3).min(MAX_PER_TERM);
        // Keywords named by an `id` condition are candidates too.
        let named: Vec<String> = q
            .conditions
            .iter()
            .filter(|c| c.property == "id" && c.quantifier != Quantifier::None)
            .flat_map(|c| c.values.iter().cloned())
            .collect();
        let mut found: Vec<Keyword> = if named.is_empty() {
            Vec::new()
        } else {
            let by_id = self.themes.keywords(&named).await?;
            let mut in_scope: Vec<Keyword> = by_id.into_values().collect();
            in_scope.sort_by(|a, b| a.id.cmp(&b.id));
            in_scope
        };
        let mut seen: std::collections::HashSet<String> =
            found.iter().map(|k| k.id.clone()).collect();
        for term in &terms {
            for k in self.search(portals, term, want).await? {
                if seen.insert(k.id.clone()) {
                    found.push(k);
                }
            }
        }
        if let Some(t) = q.type_id.as_deref().filter(|t| *t != KEYWORD_TYPE.0) {
            found.retain(|k| k.hierarchical_category_ids.iter().any(|c| c == t));
        }
        let context = self.context_of(&found).await?;
        let mut scored: Vec<(Candidate, bool)> = Vec::new();
        for k in &found {
            let mut names: Vec<&str> = vec![k.label.as_str()];
            names.extend(k.synonyms.iter().map(String::as_str));
            let mut met = 0;
            let mut required_missed = false;
            for c in &q.conditions {
                let values: Vec<String> = cells(k, &c.property, &context)
                    .into_iter()
                    .flat_map(|cell| match cell {
                        Cell::Text(t) => vec![t],
                        Cell::Entity(id, name) => vec![id, name],
                    })
                    .collect();
                if c.met_by(&values) {
                    met += 1;
                } else if c.required {
                    required_missed = true;
                }
            }
            if required_missed || !context.in_scope(k, portals) {
                continue;
            }
            let all_met = met == q.conditions.len();
            let score = if text.is_empty() {
                // No name to compare: the share of conditions met.
                100.0 * met as f64 / q.conditions.len().max(1) as f64
            } else {
                score::combined(score::name_score(&text, &names), met, q.conditions.len())
            };
            scored.push((
                Candidate {
                    id: k.id.clone(),
                    name: k.label.clone(),
                    description: context.path_of(k),
                    types: context.types_of(k),
                    score: (score * 10.0).round() / 10.0,
                    matched: false,
                },
                all_met,
            ));
        }
        scored.sort_by(|a, b| {
            b.0.score
                .total_cmp(&a.0.score)
                .then_with(|| a.0.name.cmp(&b.0.name))
        });
        scored.retain(|(c, _)| c.score > 0.0);
        let flags: Vec<(f64, bool)> = scored.iter().map(|(c, m)| (c.score, *m)).collect();
        let top_matches = score::is_match(&flags);
        let mut out: Vec<Candidate> = scored
            .into_iter()
            .map(|(c, _)| c)
            .take(q.limit.max(1))
            .collect();
        if let Some(first) = out.first_mut() {
            first.matched = top_matches;
        }
        Ok(out)
    }

    /// The keywords of `portals` whose label or a synonym contains `term`.
    async fn search(
        &self,
        portals: &[Category],
        term: &str,
        want: usize,
    ) -> ApiResult<Vec<Keyword>> {
        if term.chars().count() < 2 {
            return Ok(Vec::new());
        }
        // Owned futures (a borrowed closure here trips the compiler's
        // Send check of the handlers).
        let ids: Vec<String> = portals.iter().map(|p| p.id.clone()).collect();
        let found: Vec<ApiResult<Vec<Keyword>>> = futures::stream::iter(ids)
            .map(|id| {
                let (themes, term) = (self.themes.clone(), term.to_owned());
                async move { themes.search(&id, &term, want).await }
            })
            .buffered(PORTALS_AT_ONCE)
            .collect()
            .await;
        let mut out = Vec::new();
        for f in found {
            out.extend(f?);
        }
        Ok(out)
    }

    /// Keywords whose label or a synonym contains `prefix` (as the
    /// vocabulary search finds them), `limit` after `cursor`.
    pub async fn suggest_entities(
        &self,
        portals: &[Category],
        prefix: &str,
        cursor: usize,
        limit: usize,
    ) -> ApiResult<Vec<Candidate>> {
        self.check_text(prefix)?;
        let q = Query {
            text: prefix.to_owned(),
            limit: cursor.saturating_add(limit).min(self.limits.max_limit),
            ..Default::default()
        };
        let all = self.answer(portals, &q).await?;
        Ok(all.into_iter().skip(cursor).take(limit).collect())
    }

    /// The types whose name contains `prefix`: `Keyword` and the categories
    /// of the scope (read level by level, at most 5,000).
    pub async fn suggest_types(
        &self,
        portals: &[Category],
        prefix: &str,
        limit: usize,
    ) -> ApiResult<Vec<(String, String, Option<String>)>> {
        self.check_text(prefix)?;
        let p = normalize(prefix);
        let mut out = Vec::new();
        if normalize(KEYWORD_TYPE.1).contains(&p) {
            out.push((KEYWORD_TYPE.0.to_owned(), KEYWORD_TYPE.1.to_owned(), None));
        }
        let mut level: Vec<(Category, String)> = portals
            .iter()
            .map(|c| (c.clone(), c.label.clone()))
            .collect();
        let mut read = level.len();
        while !level.is_empty() && out.len() < limit {
            for (c, path) in &level {
                if normalize(&c.label).contains(&p) && out.len() < limit {
                    out.push((c.id.clone(), c.label.clone(), Some(path.clone())));
                }
            }
            if read >= MAX_TYPES_READ {
                break;
            }
            let ids: Vec<String> = level.iter().map(|(c, _)| c.id.clone()).collect();
            let mut next = Vec::new();
            // A few parents at a time, until the allowance is read.
            for chunk in ids.chunks(16) {
                if read >= MAX_TYPES_READ {
                    break;
                }
                let children = self.themes.children_of(chunk).await?;
                for (c, path) in level.iter().filter(|(c, _)| chunk.contains(&c.id)) {
                    for child in children.get(&c.id).into_iter().flatten() {
                        if read < MAX_TYPES_READ {
                            read += 1;
                            next.push((child.clone(), format!("{path} › {}", child.label)));
                        }
                    }
                }
            }
            level = next;
        }
        Ok(out)
    }

    /// The properties whose id or name contains `prefix`.
    pub fn suggest_properties(&self, prefix: &str) -> Vec<(&'static str, &'static str)> {
        let p = normalize(prefix);
        PROPERTIES
            .into_iter()
            .filter(|(id, name)| normalize(id).contains(&p) || normalize(name).contains(&p))
            .collect()
    }

    fn check_text(&self, text: &str) -> ApiResult<()> {
        if text.chars().count() > self.limits.max_text {
            return Err(ApiError::bad_input(format!(
                "a prefix is at most {} characters",
                self.limits.max_text
            )));
        }
        Ok(())
    }

    /// The keywords of `ids` that exist, in order, with what their
    /// properties name.
    pub async fn keywords(&self, ids: &[String]) -> ApiResult<(Vec<Keyword>, Context)> {
        if ids.len() > self.limits.max_extend_ids {
            return Err(ApiError::bad_input(format!(
                "at most {} ids at a time (--reconcile-max-extend-ids), not {}",
                self.limits.max_extend_ids,
                ids.len()
            )));
        }
        let found = self.themes.keywords(ids).await?;
        let list: Vec<Keyword> = ids.iter().filter_map(|i| found.get(i).cloned()).collect();
        let context = self.context_of(&list).await?;
        Ok((list, context))
    }

    /// The categories (with their ancestors) the keywords are in.
    async fn context_of(&self, keywords: &[Keyword]) -> ApiResult<Context> {
        let direct: BTreeSet<String> = keywords
            .iter()
            .flat_map(|k| k.category_ids.iter().cloned())
            .collect();
        let direct: Vec<String> = direct.into_iter().collect();
        let mut categories = self.themes.categories(&direct).await?;
        let above: BTreeSet<String> = categories
            .values()
            .flat_map(|c| c.ancestor_ids.iter().cloned())
            .filter(|a| !categories.contains_key(a))
            .collect();
        let above: Vec<String> = above.into_iter().collect();
        categories.extend(self.themes.categories(&above).await?);
        Ok(Context { categories })
    }
}

/// Whether `id` names one of [`PROPERTIES`].
pub fn is_property(id: &str) -> bool {
    PROPERTIES.iter().any(|p| p.0 == id)
}

/// The categories keywords are in, with their ancestors.
pub struct Context {
    categories: HashMap<String, Category>,
}

impl Context {
    fn label(&self, id: &str) -> String {
        self.categories
            .get(id)
            .map_or_else(|| id.to_owned(), |c| c.label.clone())
    }

    /// The path of a category from its portal: `Portal › Orte › Städte`.
    fn path(&self, c: &Category) -> String {
        let mut parts: Vec<String> = c.ancestor_ids.iter().map(|a| self.label(a)).collect();
        parts.push(c.label.clone());
        parts.join(" › ")
    }

    /// Whether a keyword is in one of `portals`.
    fn in_scope(&self, k: &Keyword, portals: &[Category]) -> bool {
        k.category_ids
            .iter()
            .filter_map(|c| self.categories.get(c))
            .any(|c| portals.iter().any(|p| p.id == c.portal_id()))
    }

    /// The path of a keyword's first category, as its description.
    pub fn path_of(&self, k: &Keyword) -> Option<String> {
        k.category_ids
            .iter()
            .find_map(|c| self.categories.get(c))
            .map(|c| self.path(c))
    }

    /// `Keyword` and the keyword's categories.
    pub fn types_of(&self, k: &Keyword) -> Vec<(String, String)> {
        let mut out = vec![(KEYWORD_TYPE.0.to_owned(), KEYWORD_TYPE.1.to_owned())];
        out.extend(k.category_ids.iter().map(|c| (c.clone(), self.label(c))));
        out
    }
}

/// A keyword's values of one property (empty for an unknown property).
pub fn cells(k: &Keyword, property: &str, context: &Context) -> Vec<Cell> {
    let texts = |v: &[String]| v.iter().cloned().map(Cell::Text).collect();
    match property {
        "gnd" => k.primary_gnd_uri.iter().cloned().map(Cell::Text).collect(),
        "relatedGnd" => texts(&k.related_gnd_uris),
        "synonym" => texts(&k.synonyms),
        "category" => k
            .category_ids
            .iter()
            .map(|c| Cell::Entity(c.clone(), context.label(c)))
            .collect(),
        "categoryPath" => k
            .category_ids
            .iter()
            .filter_map(|c| context.categories.get(c))
            .map(|c| Cell::Text(context.path(c)))
            .collect(),
        "portal" => {
            let portals: BTreeSet<&str> = k
                .category_ids
                .iter()
                .filter_map(|c| context.categories.get(c))
                .map(Category::portal_id)
                .collect();
            portals
                .into_iter()
                .map(|p| Cell::Entity(p.to_owned(), context.label(p)))
                .collect()
        }
        "note" => k.note.iter().cloned().map(Cell::Text).collect(),
        "xtree" => k.xtree_uri.iter().cloned().map(Cell::Text).collect(),
        "id" => vec![Cell::Text(k.id.clone())],
        _ => Vec::new(),
    }
}
