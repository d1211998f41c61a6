//! GraphQL types and root fields of the assignments domain. Every relation
//! (portal, child category, keyword) goes through the request's DataLoaders.

use async_graphql::connection::{ConnectionNameType, EdgeNameType};
use async_graphql::{Context, ID, InputObject, Object, OutputType, Result, SimpleObject};

use crate::api::caller::caller;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::connection::{self, Page, connection};
use crate::api::graphql::cost;
use crate::api::themes::{Category, Keyword, loaders};
use crate::domains::assignments::model::{
    self, AssignmentKey, AssignmentOrder, AssignmentStatus, AssignmentType,
};
use crate::domains::assignments::service::{AssignmentPage, Assignments, SuggestInput, Suggester};

/// What the assignments of one object are weighed as (up to
/// `MAX_PER_OBJECT` are read; the answer's size budget bounds the rest).
const PER_OBJECT_WEIGHT: usize = 50;
/// A portal's release runs: the last good and the last failed one.
const RELEASE_RUNS_WEIGHT: usize = 2;
/// Runs `releaseLog` gives without `first`, and at most.
const RELEASE_LOG_DEFAULT: usize = 20;
const RELEASE_LOG_MAX: usize = 100;

pub(crate) fn assignments<'a>(ctx: &Context<'a>) -> &'a Assignments {
    ctx.data_unchecked::<Assignments>()
}

async fn category(ctx: &Context<'_>, id: &str) -> Result<Option<Metered<Category>>> {
    Ok(loaders(ctx)
        .categories
        .load_one(id.to_owned())
        .await?
        .map(Category::metered))
}

/// A keyword assigned to a catalogue object (by its ddb id) within a portal.
pub struct Assignment(pub model::Assignment);

impl Assignment {
    /// As the schema returns it: counted against the answer's budget.
    pub fn metered(a: model::Assignment) -> Metered<Assignment> {
        Metered(Assignment(a))
    }
}

#[Object]
impl Assignment {
    async fn portal_id(&self) -> ID {
        ID(self.0.key.portal_id.clone())
    }
    /// The portal (top-level category); null if it was deleted since.
    async fn portal(&self, ctx: &Context<'_>) -> Result<Option<Metered<Category>>> {
        category(ctx, &self.0.key.portal_id).await
    }
    async fn child_category_id(&self) -> ID {
        ID(self.0.child_category_id.clone())
    }
    /// The category directly under the portal; null if it was deleted since.
    async fn child_category(&self, ctx: &Context<'_>) -> Result<Option<Metered<Category>>> {
        category(ctx, &self.0.child_category_id).await
    }
    async fn ddb_id(&self) -> ID {
        ID(self.0.key.ddb_id.clone())
    }
    async fn keyword_id(&self) -> ID {
        ID(self.0.key.keyword_id.clone())
    }
    /// The keyword; null if it was deleted since.
    async fn keyword(&self, ctx: &Context<'_>) -> Result<Option<Metered<Keyword>>> {
        Ok(loaders(ctx)
            .keywords
            .load_one(self.0.key.keyword_id.clone())
            .await?
            .map(Keyword::metered))
    }
    /// What the catalogue says of the object (`kartei import-objects`);
    /// null when no import named it.
    async fn object(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Option<Metered<crate::api::objects::CatalogueObject>>> {
        crate::api::objects::object(ctx, &self.0.key.ddb_id).await
    }
    /// The subject of the token that made the suggestion.
    async fn creator(&self) -> &str {
        &self.0.key.creator
    }
    async fn assignment_type(&self) -> AssignmentType {
        self.0.assignment_type
    }
    async fn status(&self) -> AssignmentStatus {
        self.0.status
    }
    /// RFC 3339, UTC.
    async fn created_at(&self) -> &str {
        &self.0.created_at
    }
    /// RFC 3339, UTC; changes with every status change.
    async fn modified_at(&self) -> &str {
        &self.0.modified_at
    }
    /// Between 0 and 1 (machine suggestions); null when not given.
    async fn confidence(&self) -> Option<f64> {
        self.0.confidence
    }
    /// Its status changes, oldest first (the latest 50); its creation is
    /// `createdAt` by `creator`. Who made each change is shown to editors.
    #[graphql(complexity = "cost::list(model::MAX_HISTORY, child_complexity)")]
    async fn history(&self, ctx: &Context<'_>) -> Result<Vec<Metered<AssignmentChange>>> {
        let editor = caller(ctx).has(crate::kernel::roles::Role::Editor);
        Ok(assignments(ctx)
            .history(&self.0.key)
            .await?
            .into_iter()
            .map(|c| {
                Metered(AssignmentChange {
                    at: c.at,
                    actor: c.actor.filter(|_| editor),
                    from: c.from,
                    to: c.to,
                })
            })
            .collect())
    }
}

/// One status change of an assignment.
#[derive(SimpleObject)]
pub struct AssignmentChange {
    /// When (RFC 3339, UTC).
    at: String,
    /// Who made it (the token's subject), for editors; null for others and
    /// for a release run's publication.
    actor: Option<String>,
    from: AssignmentStatus,
    to: AssignmentStatus,
}

pub type AssignmentConnection = Page<Metered<Assignment>>;

/// When the query asks for the page's keywords (`edges { node { keyword } }`
/// or `nodes { keyword }`), loads them together before the rows resolve:
/// each row's `keyword` then finds its value loaded, and the page resolves
/// in one pass instead of 50 loads that wait for a second one. A failed
/// read is not answered here: the rows' loads get its error, as before.
async fn prime_keywords(ctx: &Context<'_>, page: &AssignmentPage) {
    let ahead = ctx.look_ahead();
    let asked = ahead.field("edges").field("node").field("keyword").exists()
        || ahead.field("nodes").field("keyword").exists();
    if asked && !page.items.is_empty() {
        let ids = page.items.iter().map(|(_, a)| a.key.keyword_id.clone());
        loaders(ctx).keywords.prime(ids).await;
    }
}

fn assignment_page(page: AssignmentPage, after: bool) -> AssignmentConnection {
    connection(page.map(Assignment::metered), after)
}

/// `Keyword.assignments`, resolved here so the themes domain stays unaware of assignments.
pub async fn keyword_assignments(
    ctx: &Context<'_>,
    keyword_id: &str,
    portal_id: Option<ID>,
    first: Option<i32>,
    after: Option<String>,
) -> Result<AssignmentConnection> {
    let (first, after, has_previous) = connection::window(first, after)?;
    let page = assignments(ctx)
        .of_keyword(
            keyword_id,
            portal_id.as_ref().map(|p| p.as_str()),
            first,
            after,
        )
        .await?;
    Ok(assignment_page(page, has_previous))
}

pub struct ReleaseQueueName;
impl ConnectionNameType for ReleaseQueueName {
    fn type_name<T: OutputType>() -> String {
        "ReleaseQueueConnection".into()
    }
}
pub struct ReleaseQueueEdgeName;
impl EdgeNameType for ReleaseQueueEdgeName {
    fn type_name<T: OutputType>() -> String {
        "ReleaseQueueEdge".into()
    }
}

/// The ddb ids waiting for the reindexer.
pub type ReleaseQueueConnection = Page<ID, ReleaseQueueName, ReleaseQueueEdgeName>;

/// One release run of a portal.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct ReleaseRun {
    portal_id: ID,
    successful: bool,
    /// When the run ended (RFC 3339, UTC).
    time: String,
    /// Assignments the run moved from ACCEPTED to PUBLISHED.
    published: i64,
    /// Why a failed run failed; for a run a second editor approved, who
    /// asked for it and when.
    message: Option<String>,
    #[graphql(skip)]
    actor: Option<String>,
}

#[async_graphql::ComplexObject]
impl ReleaseRun {
    /// Who ran it (the token's subject), for callers with a token; in
    /// `releaseLog` and the run's event, not in `releaseRuns`.
    async fn actor(&self, ctx: &Context<'_>) -> Option<&str> {
        self.actor.as_deref().filter(|_| caller(ctx).signed_in())
    }
}

impl From<model::ReleaseRun> for ReleaseRun {
    fn from(r: model::ReleaseRun) -> Self {
        ReleaseRun {
            portal_id: ID(r.portal_id),
            successful: r.successful,
            time: r.time,
            published: r.published,
            message: r.message,
            actor: r.actor,
        }
    }
}

/// The key of an assignment.
#[derive(SimpleObject, InputObject, Clone)]
#[graphql(name = "AssignmentKey", input_name = "AssignmentKeyInput")]
pub struct AssignmentKeyValue {
    portal_id: ID,
    ddb_id: ID,
    keyword_id: ID,
    creator: String,
}

impl From<AssignmentKeyValue> for AssignmentKey {
    fn from(k: AssignmentKeyValue) -> Self {
        AssignmentKey {
            portal_id: k.portal_id.0,
            ddb_id: k.ddb_id.0,
            keyword_id: k.keyword_id.0,
            creator: k.creator,
        }
    }
}

impl From<AssignmentKey> for AssignmentKeyValue {
    fn from(k: AssignmentKey) -> Self {
        AssignmentKeyValue {
            portal_id: ID(k.portal_id),
            ddb_id: ID(k.ddb_id),
            keyword_id: ID(k.keyword_id),
            creator: k.creator,
        }
    }
}

/// Why one key of a bulk transition was not changed.
#[derive(SimpleObject)]
pub struct TransitionError {
    /// The same codes as `extensions.code` (CONFLICT, NOT_FOUND, BAD_USER_INPUT, ...).
    code: String,
    message: String,
    /// For CONFLICT: the status the assignment has now.
    current_status: Option<AssignmentStatus>,
}

/// The outcome for one key of `transitionAssignments`.
#[derive(SimpleObject)]
pub struct TransitionResult {
    key: AssignmentKeyValue,
    applied: bool,
    /// The assignment after the change (null when not applied).
    assignment: Option<Metered<Assignment>>,
    error: Option<TransitionError>,
}

#[derive(InputObject)]
pub struct SuggestAssignmentInput {
    portal_id: ID,
    ddb_id: ID,
    keyword_id: ID,
    /// A category directly under the portal.
    child_category_id: ID,
    /// Between 0 and 1.
    confidence: Option<f64>,
}

/// The assignments' root fields: the reads here, four eyes on releases in
/// `assignment_release`.
#[derive(async_graphql::MergedObject, Default)]
pub struct AssignmentsQuery(
    AssignmentReads,
    crate::api::assignment_release::ReleaseApprovalQuery,
    crate::api::assignment_counts::AssignmentCountsQuery,
);

#[derive(Default)]
pub struct AssignmentReads;

#[Object]
impl AssignmentReads {
    /// A portal's assignments, optionally only those with a status and/or by a
    /// creator, ordered by ddb id, keyword id and creator; or, with a status
    /// and no creator, by confidence (highest first) or age (oldest first).
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    #[allow(clippy::too_many_arguments)]
    async fn assignments(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        status: Option<AssignmentStatus>,
        creator: Option<String>,
        #[graphql(default)] order_by: AssignmentOrder,
        first: Option<i32>,
        after: Option<String>,
    ) -> Result<AssignmentConnection> {
        let (first, after, has_previous) = connection::window(first, after)?;
        let page = assignments(ctx)
            .list_in_order(&portal_id, status, creator.as_deref(), order_by, first, after)
            .await?;
        prime_keywords(ctx, &page).await;
        Ok(assignment_page(page, has_previous))
    }

    /// Every assignment of one object (optionally only in one portal).
    #[graphql(complexity = "cost::list(PER_OBJECT_WEIGHT, child_complexity)")]
    async fn object_assignments(
        &self,
        ctx: &Context<'_>,
        ddb_id: ID,
        portal_id: Option<ID>,
    ) -> Result<Vec<Metered<Assignment>>> {
        Ok(assignments(ctx)
            .of_object(&ddb_id, portal_id.as_ref().map(|p| p.as_str()))
            .await?
            .into_iter()
            .map(Assignment::metered)
            .collect())
    }

    /// The assignments of one keyword, ordered by portal, ddb id and creator.
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    async fn keyword_assignments(
        &self,
        ctx: &Context<'_>,
        keyword_id: ID,
        portal_id: Option<ID>,
        first: Option<i32>,
        after: Option<String>,
    ) -> Result<AssignmentConnection> {
        keyword_assignments(ctx, &keyword_id, portal_id, first, after).await
    }

    /// The creators of a portal's assignments that have `status`, sorted (at most 1,000).
    // Each creator found costs a read per bucket: it weighs all 1,000.
    #[graphql(
        complexity = "cost::list(crate::domains::assignments::service::MAX_CREATORS, child_complexity)"
    )]
    async fn creators(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        status: AssignmentStatus,
    ) -> Result<Metered<Vec<String>>> {
        Ok(Metered(
            assignments(ctx).creators(&portal_id, status).await?,
        ))
    }

    /// The ddb ids whose assignments changed in a way the search index must see,
    /// waiting for the reindexer (which removes them with `acknowledgeRelease`).
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    async fn release_queue(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> Result<ReleaseQueueConnection> {
        let (first, after, has_previous) = connection::window(first, after)?;
        let page = assignments(ctx).release_queue(first, after).await?;
        Ok(connection(page.map(ID), has_previous))
    }

    /// The portal's last successful and last failed release run.
    #[graphql(complexity = "cost::list(RELEASE_RUNS_WEIGHT, child_complexity)")]
    async fn release_runs(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
    ) -> Result<Vec<Metered<ReleaseRun>>> {
        Ok(assignments(ctx)
            .release_runs(&portal_id)
            .await?
            .into_iter()
            .map(|r| Metered(ReleaseRun::from(r)))
            .collect())
    }

    /// The portal's release runs, newest first, with who ran each (`first`
    /// from 1 to 100, default 20; kept 400 days). A refused run (nothing
    /// ACCEPTED) is not one.
    #[graphql(complexity = "cost::counted(first, RELEASE_LOG_DEFAULT, RELEASE_LOG_MAX, child_complexity)")]
    async fn release_log(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        first: Option<i32>,
    ) -> Result<Vec<Metered<ReleaseRun>>> {
        let first = first.unwrap_or(RELEASE_LOG_DEFAULT as i32);
        let Some(first) = usize::try_from(first)
            .ok()
            .filter(|n| (1..=RELEASE_LOG_MAX).contains(n))
        else {
            return Err(crate::kernel::error::ApiError::bad_input(format!(
                "first must be between 1 and {RELEASE_LOG_MAX}"
            ))
            .into());
        };
        Ok(assignments(ctx)
            .release_log(&portal_id, first)
            .await?
            .into_iter()
            .map(|r| Metered(ReleaseRun::from(r)))
            .collect())
    }
}

/// The assignments' mutations: these, four eyes on releases in
/// `assignment_release`, whole-filter actions in `assignment_jobs`.
#[derive(async_graphql::MergedObject, Default)]
pub struct AssignmentsMutation(
    AssignmentWrites,
    crate::api::assignment_release::ReleaseApprovalMutation,
    crate::api::assignment_jobs::AssignmentJobsMutation,
);

#[derive(Default)]
pub struct AssignmentWrites;

#[Object]
impl AssignmentWrites {
    /// Suggests a keyword for an object. The creator is the token's subject; the
    /// type and first status come from its role (machine: MACHINE, AUTOSUGGESTED;
    /// archive: ARCHIVE, SUGGESTED; contributor or editor: ANYBODY, SUGGESTED).
    async fn suggest_assignment(
        &self,
        ctx: &Context<'_>,
        input: SuggestAssignmentInput,
    ) -> Result<Metered<Assignment>> {
        let who = Suggester::of(caller(ctx))?;
        let a = assignments(ctx)
            .suggest(
                &who,
                SuggestInput {
                    portal_id: input.portal_id.0,
                    ddb_id: input.ddb_id.0,
                    keyword_id: input.keyword_id.0,
                    child_category_id: input.child_category_id.0,
                    confidence: input.confidence,
                },
            )
            .await?;
        Ok(Assignment::metered(a))
    }

    /// Moves one assignment from `expected` to `to`. CONFLICT (with
    /// `extensions.currentStatus`) when it is no longer `expected`.
    async fn transition_assignment(
        &self,
        ctx: &Context<'_>,
        key: AssignmentKeyValue,
        expected: AssignmentStatus,
        to: AssignmentStatus,
    ) -> Result<Metered<Assignment>> {
        let a = assignments(ctx)
            .transition(caller(ctx), &key.into(), expected, to)
            .await?;
        Ok(Assignment::metered(a))
    }

    /// Moves many assignments; one result per key, each applied or not on its own.
    #[graphql(complexity = "cost::per_argument_item(keys.len(), 1, child_complexity)")]
    async fn transition_assignments(
        &self,
        ctx: &Context<'_>,
        keys: Vec<AssignmentKeyValue>,
        expected: AssignmentStatus,
        to: AssignmentStatus,
    ) -> Result<Vec<Metered<TransitionResult>>> {
        let results = assignments(ctx)
            .transition_many(
                caller(ctx),
                keys.into_iter().map(Into::into).collect(),
                expected,
                to,
            )
            .await?;
        Ok(transition_results(results))
    }

    /// Takes back the caller's own latest change of each assignment, made
    /// in the last 10 minutes, while it is still `expected` as that change
    /// left it: back to the status before, recorded in its history. Accept,
    /// reject, a deletion proposal, delete and keep can each be undone so.
    /// INVALID_TRANSITION when the latest change is another's, too old, or
    /// not a change; CONFLICT when the assignment moved on. One result per
    /// key.
    #[graphql(complexity = "cost::per_argument_item(keys.len(), 1, child_complexity)")]
    async fn undo_transitions(
        &self,
        ctx: &Context<'_>,
        keys: Vec<AssignmentKeyValue>,
        expected: AssignmentStatus,
    ) -> Result<Vec<Metered<TransitionResult>>> {
        let results = assignments(ctx)
            .undo_many(
                caller(ctx),
                keys.into_iter().map(Into::into).collect(),
                expected,
            )
            .await?;
        Ok(transition_results(results))
    }

    /// Publishes the portal's ACCEPTED assignments and queues their objects for
    /// the reindexer (editor). Safe to run again after a failure.
    async fn run_release(&self, ctx: &Context<'_>, portal_id: ID) -> Result<ReleaseRun> {
        Ok(assignments(ctx)
            .run_release(caller(ctx), &portal_id)
            .await?
            .into())
    }

    /// Removes ddb ids from the release queue once reindexed (machine or admin);
    /// returns how many of them were queued.
    async fn acknowledge_release(&self, ctx: &Context<'_>, ddb_ids: Vec<ID>) -> Result<i32> {
        Ok(assignments(ctx)
            .acknowledge(caller(ctx), ddb_ids.into_iter().map(|i| i.0).collect())
            .await?)
    }
}

/// One GraphQL result per key of a bulk change (applied, or why not).
fn transition_results(
    results: Vec<(AssignmentKey, crate::kernel::error::ApiResult<crate::domains::assignments::model::Assignment>)>,
) -> Vec<Metered<TransitionResult>> {
    results
        .into_iter()
        .map(|(key, r)| match r {
            Ok(a) => Metered(TransitionResult {
                key: key.into(),
                applied: true,
                assignment: Some(Assignment::metered(a)),
                error: None,
            }),
            Err(e) => {
                let current_status = match &e {
                    crate::kernel::error::ApiError::Conflict { current, .. } => {
                        current.as_deref().and_then(AssignmentStatus::parse)
                    }
                    _ => None,
                };
                Metered(TransitionResult {
                    key: key.into(),
                    applied: false,
                    assignment: None,
                    error: Some(TransitionError {
                        code: e.code().into(),
                        message: e.message(),
                        current_status,
                    }),
                })
            }
        })
        .collect()
}
