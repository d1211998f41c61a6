//! Four eyes on a release (GraphQL): a portal's setting and the request
//! waiting, asking, approving and withdrawing (`Assignments`'
//! `approval.rs`).

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use crate::api::assignments::{ReleaseRun, assignments};
use crate::api::caller::caller;
use crate::domains::assignments::model;

/// Whether a portal's releases need a second editor, and the request that
/// waits for one.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct ReleaseApproval {
    portal_id: ID,
    /// A release is asked for by one editor (requestRelease) and run by
    /// another (approveRelease); runRelease is refused.
    required: bool,
    /// When the waiting request was made (RFC 3339, UTC).
    requested_at: Option<String>,
    #[graphql(skip)]
    requested_by: Option<String>,
}

#[async_graphql::ComplexObject]
impl ReleaseApproval {
    /// Who asked for the release that waits (callers with a token only).
    async fn requested_by(&self, ctx: &Context<'_>) -> Option<&str> {
        self.requested_by
            .as_deref()
            .filter(|_| caller(ctx).signed_in())
    }
}

impl From<model::ReleaseApproval> for ReleaseApproval {
    fn from(a: model::ReleaseApproval) -> Self {
        ReleaseApproval {
            portal_id: ID(a.portal_id),
            required: a.required,
            requested_at: a.requested_at,
            requested_by: a.requested_by,
        }
    }
}

#[derive(Default)]
pub struct ReleaseApprovalQuery;

#[Object]
impl ReleaseApprovalQuery {
    /// The portal's four-eyes setting and the release request waiting.
    async fn release_approval(&self, ctx: &Context<'_>, portal_id: ID) -> Result<ReleaseApproval> {
        Ok(assignments(ctx).release_approval(&portal_id).await?.into())
    }
}

#[derive(Default)]
pub struct ReleaseApprovalMutation;

#[Object]
impl ReleaseApprovalMutation {
    /// Requires (or not) a second editor for the portal's releases (admin).
    /// Turning it off withdraws a request that waits.
    async fn set_release_approval(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        required: bool,
    ) -> Result<ReleaseApproval> {
        let a = assignments(ctx)
            .set_release_approval(caller(ctx), &portal_id, required)
            .await?;
        Ok(a.into())
    }

    /// Asks for a release of the portal, for another editor to approve
    /// (editor; four eyes on). NOTHING_TO_RELEASE with nothing ACCEPTED,
    /// CONFLICT when a request waits already, APPROVAL_NOT_REQUIRED when
    /// four eyes are off.
    async fn request_release(&self, ctx: &Context<'_>, portal_id: ID) -> Result<ReleaseApproval> {
        let a = assignments(ctx)
            .request_release(caller(ctx), &portal_id)
            .await?;
        Ok(a.into())
    }

    /// Approves the release that waits and runs it (an editor other than
    /// who asked; OWN_REQUEST for them). The run is the approver's; its
    /// message names who asked.
    async fn approve_release(&self, ctx: &Context<'_>, portal_id: ID) -> Result<ReleaseRun> {
        let run = assignments(ctx)
            .approve_release(caller(ctx), &portal_id)
            .await?;
        Ok(run.into())
    }

    /// Withdraws (or, as another editor, declines) the release request
    /// that waits.
    async fn withdraw_release_request(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
    ) -> Result<ReleaseApproval> {
        let a = assignments(ctx)
            .withdraw_release_request(caller(ctx), &portal_id)
            .await?;
        Ok(a.into())
    }
}
