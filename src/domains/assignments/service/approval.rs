//! Four eyes on a release: an admin requires, per portal, that a release be
//! asked for by one editor and run by another. The request is one row per
//! portal (`release_approvals`), moved by compare-and-sets, so two editors
//! can neither both ask nor both approve.

use super::*;

impl Assignments {
    /// The portal's four-eyes setting and the request waiting, if any.
    pub async fn release_approval(&self, portal_id: &str) -> ApiResult<ReleaseApproval> {
        let row = self
            .store
            .get(&RELEASE_APPROVALS, &[portal_id.into()])
            .await?;
        Ok(row.as_ref().map(ReleaseApproval::from_row).unwrap_or(ReleaseApproval {
            portal_id: portal_id.to_owned(),
            ..ReleaseApproval::default()
        }))
    }

    /// Turns four eyes on or off for a portal (admin). Turning it off
    /// withdraws a request that waits (a release is then run directly).
    pub async fn set_release_approval(
        &self,
        who: &Principal,
        portal_id: &str,
        required: bool,
    ) -> ApiResult<ReleaseApproval> {
        who.require(Role::Admin)?;
        self.check_portal(portal_id).await?;
        let now = self.release_approval(portal_id).await?;
        if required && now.required {
            // On already: a request that waits stays.
            return Ok(now);
        }
        let setting = ReleaseApproval {
            portal_id: portal_id.to_owned(),
            required,
            requested_by: None,
            requested_at: None,
        };
        self.store.apply(vec![Mutation::upsert(setting.row())]).await?;
        Ok(setting)
    }

    /// Asks for a release of the portal (editor), for another editor to
    /// approve. Refused when four eyes are off (APPROVAL_NOT_REQUIRED: run
    /// it), when nothing is ACCEPTED (NOTHING_TO_RELEASE), and when a
    /// request waits already (CONFLICT, naming who asked).
    pub async fn request_release(
        &self,
        who: &Principal,
        portal_id: &str,
    ) -> ApiResult<ReleaseApproval> {
        let me = who.require(Role::Editor)?.to_owned();
        self.check_portal(portal_id).await?;
        if !self.release_approval(portal_id).await?.required {
            return Err(not_required(portal_id));
        }
        let accepted = self
            .list(portal_id, Some(AssignmentStatus::Accepted), None, 1, None)
            .await?;
        if accepted.items.is_empty() {
            return Err(ApiError::Refused {
                code: "NOTHING_TO_RELEASE",
                message: format!(
                    "nothing in portal {portal_id} is ACCEPTED, so there is nothing to ask a release for"
                ),
            });
        }
        let asked = ReleaseApproval {
            portal_id: portal_id.to_owned(),
            required: true,
            requested_by: Some(me),
            requested_at: Some(self.clock.rfc3339()),
        };
        let outcome = self
            .store
            .cas(Cas {
                row: asked.row(),
                condition: Condition::Equals(vec![
                    ("required", Some(Value::Int(1))),
                    ("requested_by", None),
                ]),
                ttl: None,
            })
            .await?;
        if outcome.applied {
            return Ok(asked);
        }
        let now = outcome
            .current
            .as_ref()
            .map(ReleaseApproval::from_row)
            .unwrap_or_default();
        Err(match now.requested_by {
            Some(by) if now.required => ApiError::Conflict {
                message: format!(
                    "{by} asked for a release of portal {portal_id} at {} already; it waits for approval",
                    now.requested_at.unwrap_or_default()
                ),
                current: None,
            },
            _ => not_required(portal_id),
        })
    }

    /// Approves the release that waits and runs it (an editor other than
    /// who asked): the run is recorded as the approver's, its message
    /// names who asked. NOT_FOUND when nothing waits; OWN_REQUEST for who
    /// asked; CONFLICT when another editor approved or it was withdrawn
    /// meanwhile.
    pub async fn approve_release(&self, who: &Principal, portal_id: &str) -> ApiResult<ReleaseRun> {
        let me = who.require(Role::Editor)?.to_owned();
        self.check_portal(portal_id).await?;
        let waiting = self.waiting(portal_id).await?;
        let (by, at) = (
            waiting.requested_by.clone().unwrap_or_default(),
            waiting.requested_at.clone().unwrap_or_default(),
        );
        if by == me {
            return Err(ApiError::Refused {
                code: "OWN_REQUEST",
                message: "a release you asked for needs another editor's approval".into(),
            });
        }
        self.take(&waiting).await?;
        self.release(who, portal_id, Some(format!("asked for by {by} at {at}")))
            .await
    }

    /// Withdraws the request that waits (who asked, or another editor who
    /// declines it).
    pub async fn withdraw_release_request(
        &self,
        who: &Principal,
        portal_id: &str,
    ) -> ApiResult<ReleaseApproval> {
        who.require(Role::Editor)?;
        let waiting = self.waiting(portal_id).await?;
        self.take(&waiting).await
    }

    /// The request that waits in the portal, or NOT_FOUND.
    async fn waiting(&self, portal_id: &str) -> ApiResult<ReleaseApproval> {
        let now = self.release_approval(portal_id).await?;
        if !now.required {
            return Err(not_required(portal_id));
        }
        if now.requested_by.is_none() {
            return Err(ApiError::NotFound(format!(
                "a release request in portal {portal_id}"
            )));
        }
        Ok(now)
    }

    /// Ends the request `waiting` (a compare-and-set on who asked and when):
    /// CONFLICT when it was taken or replaced meanwhile.
    async fn take(&self, waiting: &ReleaseApproval) -> ApiResult<ReleaseApproval> {
        let cleared = ReleaseApproval {
            requested_by: None,
            requested_at: None,
            ..waiting.clone()
        };
        let outcome = self
            .store
            .cas(Cas {
                row: cleared.row(),
                condition: Condition::Replaces(vec![
                    ("requested_by", waiting.requested_by.as_deref().map(Into::into)),
                    ("requested_at", waiting.requested_at.as_deref().map(Into::into)),
                ]),
                ttl: None,
            })
            .await?;
        if outcome.applied {
            Ok(cleared)
        } else {
            Err(ApiError::Conflict {
                message: format!(
                    "the release request in portal {} was approved or withdrawn meanwhile",
                    waiting.portal_id
                ),
                current: None,
            })
        }
    }
}

fn not_required(portal_id: &str) -> ApiError {
    ApiError::Refused {
        code: "APPROVAL_NOT_REQUIRED",
        message: format!(
            "a release of portal {portal_id} needs no approval: run it with runRelease"
        ),
    }
}
