//! `backgroundWorkers` (admin): every background loop of this process, its
//! state, how often it ran and failed, and its last error, so an operator
//! sees a stuck collector or a failing tail without reading logs.

use async_graphql::{Context, Object, Result, SimpleObject};

use crate::api::caller::caller;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::cost;
use crate::domains::assignments::service::Assignments;
use crate::domains::binaries::service::Binaries;
use crate::domains::crawl::service::Crawl;
use crate::domains::suggestions::service::Suggestions;
use crate::kernel::roles::Role;
use crate::kernel::worker::WorkerStatus;

/// One background loop of the process that answers.
#[derive(SimpleObject)]
pub struct BackgroundWorker {
    name: String,
    /// `busy`, `idle`, `failing` (its last pass failed) or `done`.
    state: String,
    /// Passes run since the process started.
    runs: i64,
    /// Passes that failed.
    errors: i64,
    last_error: Option<String>,
    /// When the last pass failed (RFC 3339).
    last_error_at: Option<String>,
}

impl From<WorkerStatus> for BackgroundWorker {
    fn from(s: WorkerStatus) -> Self {
        BackgroundWorker {
            name: s.name,
            state: s.state.to_owned(),
            runs: i64::try_from(s.runs).unwrap_or(i64::MAX),
            errors: i64::try_from(s.errors).unwrap_or(i64::MAX),
            last_error: s.last_error,
            last_error_at: s.last_error_at,
        }
    }
}

/// Background loops a process runs: a handful; a list of them weighs this.
const WORKERS_WEIGHT: usize = 10;

#[derive(Default)]
pub struct WorkersQuery;

#[Object]
impl WorkersQuery {
    /// The background loops of the server instance that answers (admin).
    #[graphql(complexity = "cost::list(WORKERS_WEIGHT, child_complexity)")]
    async fn background_workers(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Vec<Metered<BackgroundWorker>>> {
        caller(ctx).require(Role::Admin)?;
        let mut all = Vec::new();
        if let Ok(b) = ctx.data::<Binaries>() {
            all.extend(b.workers().statuses());
        }
        if let Ok(a) = ctx.data::<Assignments>() {
            all.extend(a.events().workers().statuses());
        }
        if let Ok(s) = ctx.data::<Suggestions>() {
            all.extend(s.workers().statuses());
        }
        if let Ok(c) = ctx.data::<Crawl>() {
            all.extend(c.workers().statuses());
        }
        Ok(all.into_iter().map(|s| Metered(s.into())).collect())
    }
}
