//! The jobs (batch commands) for editors and admins: `jobs` (the recent
//! ones, newest first), `job(id)`, and `jobProgress(id)`, which follows one
//! until it ends. Read from the store, so a job run by another instance or
//! by the command line on its own shows the same.

use std::time::Duration;

use async_graphql::{Context, ID, Object, Result, Subscription};
use futures::Stream;

use crate::api::caller::caller;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::cost;
use crate::domains::jobs::model::{JobRecord, JobState, MAX_KEPT_LINES};
use crate::domains::jobs::service::{Jobs, MAX_LISTED};
use crate::kernel::error::ApiError;
use crate::kernel::roles::Role;

/// How often `jobProgress` looks at its job (its process writes every 2 s).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// Jobs `jobs` lists when `first` is not given.
const DEFAULT_LISTED: i32 = 20;

/// A batch command: an import, a dataset switch, a maintenance pass.
pub struct Job(pub JobRecord);

#[Object]
impl Job {
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }

    /// The command, e.g. `import-suggestions`, `repair-views`.
    async fn kind(&self) -> &str {
        &self.0.kind
    }

    async fn state(&self) -> JobState {
        self.0.state
    }

    /// Who started it: the token's subject, or `local:<user>` for a command
    /// run on the server's machine.
    async fn started_by(&self) -> &str {
        &self.0.started_by
    }

    /// Its input as the operator named it (none for maintenance).
    async fn input(&self) -> Option<&str> {
        self.0.input.as_deref()
    }

    /// RFC 3339.
    async fn started_at(&self) -> &str {
        &self.0.started_at
    }

    /// RFC 3339; none while it runs.
    async fn ended_at(&self) -> Option<&str> {
        self.0.ended_at.as_deref()
    }

    /// Bytes of its input read so far.
    async fn bytes_read(&self) -> f64 {
        self.0.bytes_read as f64
    }

    /// Its input's size, when it was a file.
    async fn bytes_total(&self) -> Option<f64> {
        self.0.bytes_total.map(|b| b as f64)
    }

    /// The share of its input read, from 0 to 1, when its size is known.
    async fn progress(&self) -> Option<f64> {
        let total = self.0.bytes_total.filter(|t| *t > 0)?;
        Some((self.0.bytes_read as f64 / total as f64).clamp(0.0, 1.0))
    }

    /// Bad lines of its input so far.
    async fn error_count(&self) -> f64 {
        self.0.error_count as f64
    }

    /// The first bad lines (20 at most), `input:line: reason`.
    #[graphql(complexity = "cost::list(MAX_KEPT_LINES, child_complexity)")]
    async fn errors(&self) -> &[String] {
        &self.0.errors
    }

    /// The last lines it said (20 at most): its summary, or what it listed.
    #[graphql(complexity = "cost::list(MAX_KEPT_LINES, child_complexity)")]
    async fn result(&self) -> &[String] {
        &self.0.result
    }

    /// The exit status the command ended with (0 done, 1 done with bad
    /// lines or not published); none while it runs or when it failed
    /// with an error.
    async fn exit_code(&self) -> Option<i32> {
        self.0.exit_code
    }
}

fn jobs<'a>(ctx: &Context<'a>) -> Result<&'a Jobs> {
    caller(ctx).require(Role::Editor)?;
    Ok(ctx.data_unchecked::<Jobs>())
}

#[derive(Default)]
pub struct JobsQuery;

#[Object]
impl JobsQuery {
    /// The recent batch commands, newest first, from this month and the
    /// last (editor or admin; `first` from 1 to 100, default 20).
    #[graphql(complexity = "cost::counted(first, DEFAULT_LISTED as usize, MAX_LISTED, child_complexity)")]
    async fn jobs(&self, ctx: &Context<'_>, first: Option<i32>) -> Result<Vec<Metered<Job>>> {
        let jobs = jobs(ctx)?;
        let first = first.unwrap_or(DEFAULT_LISTED);
        let Some(first) = usize::try_from(first).ok().filter(|n| (1..=MAX_LISTED).contains(n))
        else {
            return Err(ApiError::BadUserInput(format!("first must be between 1 and {MAX_LISTED}")).into());
        };
        Ok(jobs
            .list(first)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(|j| Metered(Job(j)))
            .collect())
    }

    /// One batch command (editor or admin).
    async fn job(&self, ctx: &Context<'_>, id: ID) -> Result<Option<Job>> {
        Ok(jobs(ctx)?.get(&id).await.map_err(ApiError::from)?.map(Job))
    }
}

#[derive(Default)]
pub struct JobsSubscription;

#[Subscription]
impl JobsSubscription {
    /// The job now and each time it moves on (about every 2 s while it
    /// runs), until it has ended: the last item is its end (editor or
    /// admin). An unknown id is NOT_FOUND.
    async fn job_progress(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> Result<impl Stream<Item = Result<Job>> + use<>> {
        let jobs = jobs(ctx)?.clone();
        let place = crate::api::assignment_events::Place::take()?;
        let Some(first) = jobs.get(&id).await.map_err(ApiError::from)? else {
            return Err(ApiError::NotFound(format!("job {}", id.as_str())).into());
        };
        Ok(futures::stream::unfold(
            (Some(first), None::<JobRecord>, place),
            move |(next, last, place)| {
                let jobs = jobs.clone();
                async move {
                    let mut next = next;
                    loop {
                        if let Some(job) = next.take()
                            && last.as_ref() != Some(&job)
                        {
                            return Some((Ok(Job(job.clone())), (None, Some(job), place)));
                        }
                        if last.as_ref().is_some_and(|j| j.state != JobState::Running) {
                            return None;
                        }
                        tokio::time::sleep(PROGRESS_EVERY).await;
                        match jobs.get(&last.as_ref()?.id).await {
                            Ok(Some(job)) => next = Some(job),
                            Ok(None) => return None,
                            Err(e) => {
                                return Some((Err(ApiError::from(e).into()), (None, None, place)));
                            }
                        }
                    }
                }
            },
        ))
    }
}
