//! A portal's assignment counts (GraphQL): by status, by creator and
//! status, and per creator the figures an editor judges a suggestion
//! algorithm by (`Assignments`' `counts.rs`). Merged into the assignments'
//! query root.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use crate::api::assignments::assignments;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::cost;
use crate::domains::assignments::model::{AssignmentStatus, CreatorCount};
use crate::domains::assignments::service::{CreatorFigures, by_status};

/// What a portal's lists by creator are weighed as: about this many rows
/// (one a creator and status).
const COUNTS_WEIGHT: usize = 50;

fn int(n: i64) -> i32 {
    n.clamp(0, i64::from(i32::MAX)) as i32
}

/// How many of a portal's assignments have one status.
#[derive(SimpleObject)]
pub struct StatusCount {
    status: AssignmentStatus,
    count: i32,
}

/// How many of a portal's assignments by one creator have one status.
#[derive(SimpleObject)]
pub struct CreatorStatusCount {
    creator: String,
    status: AssignmentStatus,
    count: i32,
}

/// One creator's assignments in a portal, as an editor judges the
/// algorithm (or the person) behind them.
#[derive(SimpleObject)]
pub struct CreatorFigure {
    creator: String,
    /// All its assignments in the portal.
    total: i32,
    /// Waiting for a decision: AUTOSUGGESTED or SUGGESTED.
    open: i32,
    /// Accepted, then or since: ACCEPTED, PUBLISHED, DELETESUGGESTED or
    /// DELETED.
    accepted: i32,
    /// REJECTED.
    rejected: i32,
    /// accepted / (accepted + rejected), from 0 to 1; null before the first
    /// decision.
    acceptance_rate: Option<f64>,
}

/// A portal's assignments counted: exact, kept with every change (the
/// counts move with each suggestion, transition, undo and release run).
pub struct AssignmentCounts {
    portal_id: String,
    counts: Vec<CreatorCount>,
}

#[Object]
impl AssignmentCounts {
    async fn portal_id(&self) -> ID {
        ID(self.portal_id.clone())
    }
    /// All the portal's assignments, in any status.
    async fn total(&self) -> i32 {
        int(self.counts.iter().map(|c| c.count).sum())
    }
    /// Every status, in the workflow's order (zero where none).
    #[graphql(complexity = "cost::list(AssignmentStatus::ALL.len(), child_complexity)")]
    async fn by_status(&self) -> Metered<Vec<StatusCount>> {
        Metered(
            by_status(&self.counts)
                .into_iter()
                .map(|(status, n)| StatusCount {
                    status,
                    count: int(n),
                })
                .collect(),
        )
    }
    /// Per creator and status, in creator order (only counts above zero).
    #[graphql(complexity = "cost::list(COUNTS_WEIGHT, child_complexity)")]
    async fn by_creator(&self) -> Metered<Vec<CreatorStatusCount>> {
        Metered(
            self.counts
                .iter()
                .map(|c| CreatorStatusCount {
                    creator: c.creator.clone(),
                    status: c.status,
                    count: int(c.count),
                })
                .collect(),
        )
    }
    /// Per creator: totals and acceptance rate, in creator order.
    #[graphql(complexity = "cost::list(COUNTS_WEIGHT, child_complexity)")]
    async fn creators(&self) -> Metered<Vec<CreatorFigure>> {
        Metered(
            CreatorFigures::of(&self.counts)
                .into_iter()
                .map(|f| CreatorFigure {
                    acceptance_rate: f.acceptance_rate(),
                    creator: f.creator,
                    total: int(f.total),
                    open: int(f.open),
                    accepted: int(f.accepted),
                    rejected: int(f.rejected),
                })
                .collect(),
        )
    }
}

#[derive(Default)]
pub struct AssignmentCountsQuery;

#[Object]
impl AssignmentCountsQuery {
    /// How many assignments a portal has, by status and by creator, with
    /// each creator's acceptance rate: one small read, however many
    /// assignments there are. BAD_USER_INPUT for an id that is not a
    /// portal's.
    async fn assignment_counts(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
    ) -> Result<Metered<AssignmentCounts>> {
        let counts = assignments(ctx).counts(&portal_id).await?;
        Ok(Metered(AssignmentCounts {
            portal_id: portal_id.0,
            counts,
        }))
    }
}
