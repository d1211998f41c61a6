//! Whole-filter actions (GraphQL): `transitionMatching` checks a filter
//! against the count the curator saw and moves its assignments on the
//! server as a job (`Assignments`' `matching.rs`), which `job(id)` and
//! `jobProgress(id)` follow. Merged into the assignments' mutation root.

use async_graphql::{Context, ID, InputObject, Object, Result};
use tokio::sync::Semaphore;

use crate::api::assignments::assignments;
use crate::api::caller::caller;
use crate::api::jobs::Job;
use crate::domains::assignments::model::AssignmentStatus;
use crate::domains::assignments::service::Matching;
use crate::domains::jobs::model::JobState;
use crate::domains::jobs::service::Jobs;
use crate::kernel::error::ApiError;

/// Whole-filter actions that run at once on one server; one more is
/// TOO_MANY_JOBS.
pub const MATCHING_JOBS: usize = 2;
static RUNNING: Semaphore = Semaphore::const_new(MATCHING_JOBS);

/// The assignments a whole-filter action moves: a portal's in one status,
/// of one creator when named.
#[derive(InputObject)]
pub struct MatchingFilter {
    portal_id: ID,
    status: AssignmentStatus,
    creator: Option<String>,
}

#[derive(Default)]
pub struct AssignmentJobsMutation;

#[Object]
impl AssignmentJobsMutation {
    /// Moves every assignment the filter matches to `to`, on the server, as
    /// a job (kind `transition-matching`; `bytesRead` of `bytesTotal` are
    /// the assignments handled so far, `result` says how many changed,
    /// `errors` the ones that failed). Refused before anything changes
    /// unless the filter matches exactly `expectedCount` assignments now,
    /// the number the curator was shown (MATCH_COUNT_CHANGED; NOTHING_MATCHES
    /// for none). Each assignment is a transition from `filter.status` like
    /// any other: the roles of `transitionAssignments`, CONFLICT (counted,
    /// not changed) for one someone else changed first. At most
    /// 100,000 assignments; TOO_MANY_JOBS while two run already.
    async fn transition_matching(
        &self,
        ctx: &Context<'_>,
        filter: MatchingFilter,
        expected_count: i32,
        to: AssignmentStatus,
    ) -> Result<Job> {
        let who = caller(ctx).clone();
        let service = assignments(ctx).clone();
        let jobs = ctx.data_unchecked::<Jobs>().clone();
        let m = Matching {
            portal_id: filter.portal_id.0,
            status: filter.status,
            creator: filter.creator,
        };
        let expected = i64::from(expected_count);
        service.check_matching(&who, &m, to, expected).await?;
        let permit = RUNNING.try_acquire().map_err(|_| {
            ApiError::limit(
                "TOO_MANY_JOBS",
                429,
                format!(
                    "{MATCHING_JOBS} whole-filter actions are running already: try again when one has ended"
                ),
            )
        })?;
        let started_by = who.sub.clone().unwrap_or_default();
        let tracked = jobs
            .begin(
                "transition-matching",
                &started_by,
                Some(m.describe(to)),
                u64::try_from(expected).ok(),
            )
            .await
            .map_err(ApiError::from)?;
        let record = jobs
            .get(&tracked.id())
            .await
            .map_err(ApiError::from)?
            .ok_or(ApiError::Internal)?;
        tokio::spawn(async move {
            let _permit = permit;
            let done = tracked.bytes();
            let limit = u64::try_from(expected).unwrap_or(0);
            let outcome = service
                .transition_matching(&who, &m, to, limit, &done, &|line| tracked.bad_line(line))
                .await;
            let (state, exit_code) = match &outcome {
                Ok(report) => {
                    tracked.said(&report.summary());
                    (JobState::Done, Some(i32::from(report.failed > 0)))
                }
                Err(e) => {
                    tracked.said(&e.message());
                    (JobState::Failed, None)
                }
            };
            if let Err(e) = tracked.end(state, exit_code).await {
                tracing::warn!(error = %e, "a whole-filter action's end was not recorded");
            }
        });
        Ok(Job(record))
    }
}
