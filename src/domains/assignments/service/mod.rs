//! The assignment rules: who may suggest what, the status workflow under
//! lightweight transactions, query tables kept in step with the base rows, and
//! the release queue with its runs.
//!
//! Write order (a crash can stop a request between any two steps):
//! 1. the change's intent goes into the feed's outbox, so that a crash after
//!    the status change cannot lose its event;
//! 2. the base row changes under a lightweight transaction, the only point where
//!    concurrent writers are ordered (Cassandra cannot put an LWT and other
//!    tables in one batch);
//! 3. one logged batch writes the seven query tables, the change's event (and
//!    ends its intent) and, for a change that must reach the search index,
//!    the ddb id's release-queue row (only a change that applied is queued:
//!    a refused or conflicting one never is); then the base row is read
//!    again: if another writer changed it meanwhile, the query tables are
//!    written again from what is there now. On the embedded store 2 and 3
//!    are one transaction. On Cassandra a crash between them leaves stale
//!    query rows, no event and the id unqueued: the next write of that
//!    assignment, a retry of the same change (which finds it made, its
//!    status row not written, and queues the id), or `repair-views` heals
//!    the rows and the queue, and a drain of the outbox writes the event
//!    (`events`).

mod reads;
pub use reads::ExportFilter;
mod counts;
pub use counts::{CreatorFigures, by_status};
mod matching;
pub use matching::{MAX_MATCHING, Matching, MatchingReport};
mod approval;
mod release;
mod transition;

use std::collections::{BTreeMap, BTreeSet};

use super::events::{Change, Events, FeedConfig};
use super::model::*;
use crate::domains::themes::model::{Category, Keyword};
use crate::domains::themes::service::Themes;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::kernel::{Clock, bounded, check_id};
use crate::store::buckets::all_buckets;
use crate::store::{Bound, Cas, Condition, Cursor, DynStore, Listed, Mutation, Row, Slice, Value};

/// Keys one `transitionAssignments` call may name.
pub const MAX_KEYS: usize = 500;
/// Ids one `acknowledgeRelease` call may name.
pub const MAX_ACK: usize = 1_000;
/// Assignments of one object listed by `objectAssignments`.
pub const MAX_PER_OBJECT: usize = 1_000;
/// Rows per page of an export (`Assignments::export`).
pub const EXPORT_PAGE: usize = 1_000;
/// How long after a change its maker may undo it (`undo_many`).
pub const UNDO_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);
/// Creators listed by `creators`.
pub const MAX_CREATORS: usize = 1_000;
/// Concurrent writes inside one bulk request.
const WRITE_CONCURRENCY: usize = 16;
/// Rows per page read by a release run.
const RELEASE_PAGE: usize = 200;
/// Queue rows per batch.
const QUEUE_BATCH: usize = 50;

#[derive(Clone, Debug, Default)]
pub struct SuggestInput {
    pub portal_id: String,
    pub ddb_id: String,
    pub keyword_id: String,
    pub child_category_id: String,
    pub confidence: Option<f64>,
}

/// A page of assignments.
pub type AssignmentPage = Listed<Assignment>;

/// Who a suggestion is recorded as, from the caller's roles.
#[derive(Clone, Debug)]
pub struct Suggester {
    pub creator: String,
    pub assignment_type: AssignmentType,
    pub status: AssignmentStatus,
}

impl Suggester {
    /// machine: MACHINE + AUTOSUGGESTED; archive: ARCHIVE + SUGGESTED;
    /// contributor (and editor or admin, who can do what a contributor can):
    /// ANYBODY + SUGGESTED. The most specific role wins.
    pub fn of(who: &Principal) -> ApiResult<Suggester> {
        let Some(sub) = &who.sub else {
            return Err(ApiError::Unauthenticated);
        };
        let (assignment_type, status) = if who.roles.contains(&Role::Machine) {
            (AssignmentType::Machine, AssignmentStatus::Autosuggested)
        } else if who.roles.contains(&Role::Archive) {
            (AssignmentType::Archive, AssignmentStatus::Suggested)
        } else if [Role::Contributor, Role::Editor, Role::Admin]
            .iter()
            .any(|r| who.roles.contains(r))
        {
            (AssignmentType::Anybody, AssignmentStatus::Suggested)
        } else {
            return Err(ApiError::Forbidden("contributor"));
        };
        Ok(Suggester {
            creator: sub.clone(),
            assignment_type,
            status,
        })
    }

    /// The machine role, as `import-assignments` acts.
    pub fn machine(creator: &str) -> Suggester {
        Suggester {
            creator: creator.to_owned(),
            assignment_type: AssignmentType::Machine,
            status: AssignmentStatus::Autosuggested,
        }
    }
}

/// The workflow's transition table (README.md, "Assignments"). Returns the roles that may make the change:
/// INVALID_TRANSITION for a change the workflow does not have, FORBIDDEN for a
/// caller without one of the roles, UNAUTHENTICATED without a token.
pub fn check_transition(
    who: &Principal,
    from: AssignmentStatus,
    to: AssignmentStatus,
) -> ApiResult<()> {
    use AssignmentStatus::*;
    if who.sub.is_none() {
        return Err(ApiError::Unauthenticated);
    }
    let roles: &[Role] = match (from, to) {
        (Autosuggested | Suggested, Accepted | Rejected)
        | (Accepted, Rejected)
        | (Deletesuggested, Deleted | Published) => &[Role::Editor],
        (Published, Deletesuggested) => &[Role::Contributor, Role::Archive, Role::Editor],
        (Accepted, Published) => {
            return Err(ApiError::InvalidTransition(
                "ACCEPTED -> PUBLISHED is made by a release run (runRelease), not by a transition"
                    .into(),
            ));
        }
        _ => {
            return Err(ApiError::InvalidTransition(format!(
                "{} -> {} is not a transition of the workflow",
                from.as_str(),
                to.as_str()
            )));
        }
    };
    if roles.iter().any(|r| who.has(*r)) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(roles[0].name()))
    }
}

fn check_key(k: &AssignmentKey) -> ApiResult<()> {
    check_id("portal", &k.portal_id)?;
    check_id("ddb", &k.ddb_id)?;
    check_id("keyword", &k.keyword_id)?;
    check_id("creator", &k.creator)
}

/// The key and child category of a suggestion, checked.
fn suggestion_key(who: &Suggester, input: &SuggestInput) -> ApiResult<(AssignmentKey, String)> {
    let key = AssignmentKey {
        portal_id: input.portal_id.trim().to_owned(),
        ddb_id: input.ddb_id.trim().to_owned(),
        keyword_id: input.keyword_id.trim().to_owned(),
        creator: who.creator.clone(),
    };
    check_key(&key)?;
    let child_id = input.child_category_id.trim().to_owned();
    check_id("child category", &child_id)?;
    if let Some(c) = input.confidence
        && !(0.0..=1.0).contains(&c)
    {
        return Err(ApiError::bad_input(format!(
            "confidence must be between 0 and 1, got {c}"
        )));
    }
    Ok((key, child_id))
}

/// The vocabulary an import has looked up (including ids that do not exist),
/// so each id is read once per import. Bounded: past [`VOCABULARY_CACHE`]
/// entries it starts again. An import sees the vocabulary as it was when it
/// first needed an id, as a request that read it then would.
/// Per category its parent, per keyword the categories it is in or below:
/// all that the rules ask.
#[derive(Default)]
pub struct VocabularyCache {
    categories: std::sync::Mutex<Snapshot<Option<String>>>,
    keywords: std::sync::Mutex<Snapshot<Vec<String>>>,
}

/// Entries a [`VocabularyCache`] holds before it is emptied.
const VOCABULARY_CACHE: usize = 200_000;

type Snapshot<T> = std::collections::HashMap<String, Option<T>>;

impl VocabularyCache {
    async fn load(
        &self,
        themes: &Themes,
        categories: BTreeSet<String>,
        keywords: BTreeSet<String>,
    ) -> ApiResult<()> {
        let want_c = missing(&self.categories, categories);
        let want_k = missing(&self.keywords, keywords);
        let (found_c, found_k) = futures::try_join!(
            async {
                if want_c.is_empty() {
                    Ok(Default::default())
                } else {
                    themes.categories(&want_c).await
                }
            },
            async {
                if want_k.is_empty() {
                    Ok(Default::default())
                } else {
                    themes.keywords(&want_k).await
                }
            }
        )?;
        fill(
            &self.categories,
            want_c,
            found_c
                .into_iter()
                .map(|(id, c): (String, Category)| (id, c.parent_id))
                .collect(),
        );
        fill(
            &self.keywords,
            want_k,
            found_k
                .into_iter()
                .map(|(id, k): (String, Keyword)| (id, k.hierarchical_category_ids))
                .collect(),
        );
        Ok(())
    }
}

/// The ids of `ids` that `cache` has not looked up yet.
fn missing<T>(cache: &std::sync::Mutex<Snapshot<T>>, ids: BTreeSet<String>) -> Vec<String> {
    let c = cache.lock().expect("cache");
    ids.into_iter().filter(|i| !c.contains_key(i)).collect()
}

fn fill<T>(
    cache: &std::sync::Mutex<Snapshot<T>>,
    wanted: Vec<String>,
    mut found: std::collections::HashMap<String, T>,
) {
    let mut c = cache.lock().expect("cache");
    if c.len() + wanted.len() > VOCABULARY_CACHE {
        c.clear();
    }
    for id in wanted {
        let v = found.remove(&id);
        c.insert(id, v);
    }
}

/// Whether a status change goes on the change feed (as its own event, by
/// whom), or is reported another way (a release run's moves, as the run).
#[derive(Clone, Copy)]
enum Feed<'a> {
    By(Option<&'a str>),
    Silent,
}

fn conflict(current: &Assignment, what: &str) -> ApiError {
    ApiError::Conflict {
        message: format!("{what}; it is {} now", current.status.as_str()),
        current: Some(current.status.as_str().to_owned()),
    }
}

#[derive(Clone)]
pub struct Assignments {
    store: DynStore,
    themes: Themes,
    clock: Clock,
    events: Events,
}

impl Assignments {
    pub fn new(store: DynStore) -> Self {
        Assignments {
            themes: Themes::new(store.clone()),
            events: Events::new(store.clone(), Clock::system()),
            store,
            clock: Clock::system(),
        }
    }

    /// The same service reading time from `clock`.
    pub fn with_clock(self, clock: Clock) -> Self {
        Assignments {
            themes: self.themes.with_clock(clock.clone()),
            events: Events::with_config(
                self.store.clone(),
                clock.clone(),
                self.events.config().clone(),
            ),
            clock,
            ..self
        }
    }

    /// The same service with the change feed's settings.
    pub fn with_feed(self, config: FeedConfig) -> Self {
        Assignments {
            events: Events::with_config(self.store.clone(), self.clock.clone(), config),
            ..self
        }
    }

    /// The change feed this service writes to (subscriptions read it).
    pub fn events(&self) -> &Events {
        &self.events
    }

    pub fn store(&self) -> &DynStore {
        &self.store
    }

    /// Records a suggestion as `who` (creator, type and first status from the role).
    pub async fn suggest(&self, who: &Suggester, input: SuggestInput) -> ApiResult<Assignment> {
        let (key, child_id) = suggestion_key(who, &input)?;
        let category_ids = [key.portal_id.clone(), child_id.clone()];
        let (categories, keywords) = futures::try_join!(
            self.themes.categories(&category_ids),
            self.themes.keywords(std::slice::from_ref(&key.keyword_id))
        )?;
        let assignment = self.suggestion(
            who,
            key,
            child_id,
            &input,
            &|id| categories.get(id).map(|c| c.parent_id.clone()),
            &|id, portal| {
                keywords
                    .get(id)
                    .map(|k| k.hierarchical_category_ids.iter().any(|c| c == portal))
            },
        )?;
        let intent = self.events.intend(
            Some(&who.creator),
            &assignment.key,
            assignment.status,
            None,
            &assignment.modified_at,
        );
        self.store.apply(vec![intent.write()]).await?;
        let began = self.events.now_ms();
        let outcome = self
            .store
            .cas_then(
                Cas {
                    row: assignment.row(&OBJECTS_KEYWORDS),
                    condition: Condition::NotExists,
                    ttl: None,
                },
                self.events.with_event(
                    views_of(count_moves(&assignment.key, None, assignment.status)),
                    &intent,
                ),
            )
            .await?;
        if outcome.applied {
            let change = Change::Assignment {
                assignment: assignment.clone(),
                previous: None,
            };
            self.events
                .committed(began, Some(&who.creator), change)
                .await;
            self.settle_views(assignment.clone()).await?;
            return Ok(assignment);
        }
        self.events.abandon(&intent).await;
        let current = outcome.current.as_ref().and_then(Assignment::from_row);
        match current {
            Some(c) => {
                // A retry after a crash between the two writes lands here: heal.
                self.sync_views(c.clone()).await?;
                Err(conflict(&c, "this assignment exists already"))
            }
            None => Err(ApiError::Conflict {
                message: "this assignment exists already".into(),
                current: None,
            }),
        }
    }

    /// The assignment `who` suggests with `input`, checked against the
    /// vocabulary that `category` and `keyword` look up.
    fn suggestion(
        &self,
        who: &Suggester,
        key: AssignmentKey,
        child_id: String,
        input: &SuggestInput,
        // The parent of a category (`None` for an unknown one).
        category_parent: &dyn Fn(&str) -> Option<Option<String>>,
        // Is a keyword in a portal (`None` for an unknown keyword)?
        keyword_in: &dyn Fn(&str, &str) -> Option<bool>,
    ) -> ApiResult<Assignment> {
        match category_parent(&key.portal_id) {
            Some(None) => {}
            _ => {
                return Err(ApiError::bad_input(format!(
                    "unknown portal {}",
                    key.portal_id
                )));
            }
        }
        match category_parent(&child_id) {
            Some(Some(p)) if p == key.portal_id => {}
            _ => {
                return Err(ApiError::bad_input(format!(
                    "{child_id} is not a category directly under portal {}",
                    key.portal_id
                )));
            }
        }
        let Some(in_portal) = keyword_in(&key.keyword_id, &key.portal_id) else {
            return Err(ApiError::bad_input(format!(
                "unknown keyword {}",
                key.keyword_id
            )));
        };
        if !in_portal {
            return Err(ApiError::bad_input(format!(
                "keyword {} is not in portal {}",
                key.keyword_id, key.portal_id
            )));
        }
        let now = self.clock.rfc3339();
        Ok(Assignment {
            key,
            child_category_id: child_id,
            assignment_type: who.assignment_type,
            status: who.status,
            created_at: now.clone(),
            modified_at: now,
            confidence: input.confidence,
        })
    }

    /// Records many suggestions as `who`, for importers: the same rules and
    /// outcomes as [`Assignments::suggest`] one by one (an existing key is
    /// CONFLICT with its status, its query rows healed), in far fewer round
    /// trips. The vocabulary is read once per id through `vocabulary`; the new
    /// rows go to the store in one [`crate::store::Store::insert_new`] call.
    pub async fn suggest_many(
        &self,
        who: &Suggester,
        inputs: Vec<SuggestInput>,
        vocabulary: &VocabularyCache,
    ) -> ApiResult<Vec<ApiResult<Assignment>>> {
        let keyed: Vec<ApiResult<(AssignmentKey, String)>> =
            inputs.iter().map(|i| suggestion_key(who, i)).collect();
        let mut category_ids = BTreeSet::new();
        let mut keyword_ids = BTreeSet::new();
        for (key, child) in keyed.iter().flatten() {
            category_ids.insert(key.portal_id.clone());
            category_ids.insert(child.clone());
            keyword_ids.insert(key.keyword_id.clone());
        }
        vocabulary
            .load(&self.themes, category_ids, keyword_ids)
            .await?;
        let mut results: Vec<ApiResult<Assignment>> = {
            let categories = vocabulary.categories.lock().expect("cache");
            let keywords = vocabulary.keywords.lock().expect("cache");
            keyed
                .into_iter()
                .zip(&inputs)
                .map(|(k, input)| {
                    let (key, child) = k?;
                    self.suggestion(
                        who,
                        key,
                        child,
                        input,
                        &|id| categories.get(id).cloned().flatten(),
                        &|id, portal| {
                            keywords
                                .get(id)
                                .cloned()
                                .flatten()
                                .map(|portals| portals.iter().any(|p| p == portal))
                        },
                    )
                })
                .collect()
        };
        // Two lines with one key: the second is the existing one.
        let mut seen = std::collections::HashSet::new();
        let mut inserts = Vec::new();
        let mut slots = Vec::new();
        for (i, r) in results.iter_mut().enumerate() {
            if let Ok(a) = r {
                if !seen.insert(a.key.clone()) {
                    *r = Err(ApiError::Conflict {
                        message: "this assignment exists already (twice in this import)".into(),
                        current: Some(a.status.as_str().to_owned()),
                    });
                    continue;
                }
                let views = a
                    .view_rows()
                    .into_iter()
                    .map(Mutation::upsert)
                    .chain(count_moves(&a.key, None, a.status))
                    .collect();
                inserts.push((a.row(&OBJECTS_KEYWORDS), views));
                slots.push(i);
            }
        }
        if inserts.is_empty() {
            return Ok(results);
        }
        // A row that was there already may be one a killed import wrote
        // without its query rows: they are written again from it, as of the
        // read (a curator's later change wins). Only upserts: nothing an
        // import leaves behind needs a delete, and deletes here would leave a
        // tombstone per row in every status range on each re-import.
        let heal: crate::store::Heal = std::sync::Arc::new(|row: &Row| {
            Assignment::from_row(row)
                .map(|a| a.view_rows().into_iter().map(Mutation::upsert).collect())
                .unwrap_or_default()
        });
        let found = self.store.insert_new(inserts, heal).await?;
        let mut imported: BTreeMap<String, i64> = BTreeMap::new();
        for (i, f) in slots.into_iter().zip(found) {
            if let (None, Ok(a)) = (&f, &results[i]) {
                *imported.entry(a.key.portal_id.clone()).or_default() += 1;
            }
            if let Some(row) = f {
                results[i] = Err(match Assignment::from_row(&row) {
                    Some(a) => conflict(&a, "this assignment exists already"),
                    None => ApiError::Conflict {
                        message: "this assignment exists already".into(),
                        current: None,
                    },
                });
            }
        }
        // One event per portal and chunk, not per row: an import's rows reach
        // subscribers as a count (the feed's partitions stay small).
        let changes = imported
            .into_iter()
            .map(|(portal_id, count)| Change::Imported { portal_id, count })
            .collect();
        self.events
            .publish_or_log(Some(&who.creator), changes)
            .await;
        Ok(results)
    }
}

#[cfg(test)]
mod tests;

/// The query rows of the assignment a base row holds and the change's
/// `extra` writes (its history row, its count changes, the release-queue row
/// if the change must reach the search index), for
/// [`crate::store::Store::cas_then`]: written with the row (atomically on the
/// embedded engine), and only if its compare-and-set applied.
fn views_of(extra: Vec<Mutation>) -> crate::store::Heal {
    std::sync::Arc::new(move |row| {
        let mut writes = Assignment::from_row(row)
            .map(|a| a.view_batch())
            .unwrap_or_default();
        writes.extend(extra.iter().cloned());
        writes
    })
}
