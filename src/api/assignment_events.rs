//! The assignments domain's GraphQL subscriptions (`graphql-transport-ws` at
//! `/graphql/ws`): `assignmentChanged` and `releaseRunFinished`, read from
//! the change feed (`events`). Anonymous readers may subscribe, as they may
//! query; every stream counts against one process-wide bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_graphql::{Context, Enum, ID, Object, Result, Subscription};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

use crate::api::assignments::{Assignment, ReleaseRun};
use crate::domains::assignments::events::{Change, Event};
use crate::domains::assignments::model::AssignmentStatus;
use crate::domains::assignments::service::Assignments;
use crate::kernel::error::ApiError;
use crate::kernel::roles::Principal;

/// Streams open at once in this process, at most.
pub const MAX_STREAMS: usize = 10_000;
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// Holds one of the `MAX_STREAMS` places while its stream lives (every
/// subscription's stream holds one).
pub(crate) struct Place;

impl Place {
    pub(crate) fn take() -> Result<Place, ApiError> {
        if OPEN.fetch_add(1, Ordering::SeqCst) >= MAX_STREAMS {
            OPEN.fetch_sub(1, Ordering::SeqCst);
            return Err(ApiError::Unavailable);
        }
        Ok(Place)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What an assignment event says happened.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentEventKind {
    /// An assignment was created or changed its status.
    Changed,
    /// An importer wrote new assignments (`imported` of them); reload to see them.
    Imported,
}

pub struct AssignmentEvent(Arc<Event>);

#[Object]
impl AssignmentEvent {
    /// The event's id, ordered by time: pass the last one seen as `after`
    /// when subscribing again, to get what happened in between.
    async fn id(&self) -> &str {
        &self.0.id
    }
    /// When it was written (RFC 3339, UTC).
    async fn time(&self) -> String {
        rfc3339(self.0.millis())
    }
    /// The token subject who made the change (null for a subscriber
    /// without a token).
    async fn actor(&self, ctx: &Context<'_>) -> Option<&str> {
        shown_actor(ctx, &self.0)
    }
    async fn kind(&self) -> AssignmentEventKind {
        match self.0.change {
            Change::Imported { .. } => AssignmentEventKind::Imported,
            _ => AssignmentEventKind::Changed,
        }
    }
    async fn portal_id(&self) -> ID {
        ID(self.0.portal_id().to_owned())
    }
    /// The assignment as the change left it (null for an import).
    async fn assignment(&self) -> Option<Assignment> {
        match &self.0.change {
            Change::Assignment { assignment, .. } => Some(Assignment(assignment.clone())),
            _ => None,
        }
    }
    /// Its status before the change (null for a new assignment or an import).
    async fn previous_status(&self) -> Option<AssignmentStatus> {
        match &self.0.change {
            Change::Assignment { previous, .. } => *previous,
            _ => None,
        }
    }
    /// For an import: how many new assignments it wrote in this portal.
    async fn imported(&self) -> Option<f64> {
        match &self.0.change {
            Change::Imported { count, .. } => Some(*count as f64),
            _ => None,
        }
    }
}

pub struct ReleaseRunEvent(Arc<Event>);

#[Object]
impl ReleaseRunEvent {
    async fn id(&self) -> &str {
        &self.0.id
    }
    /// The token subject who ran the release (null for a subscriber without
    /// a token).
    async fn actor(&self, ctx: &Context<'_>) -> Option<&str> {
        shown_actor(ctx, &self.0)
    }
    async fn run(&self) -> Option<ReleaseRun> {
        match &self.0.change {
            Change::Release(run) => Some(ReleaseRun::from(run.clone())),
            _ => None,
        }
    }
}

/// An event's actor, for subscribers with a token only: subjects are
/// users' names or e-mail addresses, not for anonymous readers. The caller is
/// the socket's (`connection_init`), in the session's data.
fn shown_actor<'a>(ctx: &Context<'_>, e: &'a Event) -> Option<&'a str> {
    let signed_in = ctx
        .data_opt::<Principal>()
        .is_some_and(Principal::signed_in);
    e.actor.as_deref().filter(|_| signed_in)
}

fn rfc3339(millis: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// The feed from `after` (or from now): the events `wanted` keeps, each as
/// `item` makes it. The stream ends after an error (REPLAY_BUSY).
fn follow<T: Send + 'static>(
    ctx: &Context<'_>,
    after: Option<String>,
    wanted: impl Fn(&Event) -> bool + Send + Sync + 'static,
    item: fn(Arc<Event>) -> T,
) -> Result<BoxStream<'static, Result<T>>> {
    let place = Place::take()?;
    let events = ctx.data_unchecked::<Assignments>().events();
    let feed = events.follow(after, wanted)?;
    Ok(feed
        .map(move |e| {
            let _held = &place;
            e.map(item).map_err(async_graphql::Error::from)
        })
        .boxed())
}

#[derive(Default)]
pub struct AssignmentsSubscription;

#[Subscription]
impl AssignmentsSubscription {
    /// Every change of the portal's assignments as it happens, from any
    /// server instance: new assignments, status changes (with `status`, only
    /// those into or out of it), and import counts. With `after` (an event
    /// id), first what happened since then; an event may come twice after a
    /// reconnect, never not at all while the feed keeps it (a day).
    async fn assignment_changed(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        status: Option<AssignmentStatus>,
        after: Option<String>,
    ) -> Result<impl Stream<Item = Result<AssignmentEvent>>> {
        let wanted = move |e: &Event| {
            e.portal_id() == portal_id.as_str()
                && match (&e.change, status) {
                    (Change::Release(_), _) => false,
                    (_, None) => true,
                    (
                        Change::Assignment {
                            assignment,
                            previous,
                        },
                        Some(s),
                    ) => assignment.status == s || *previous == Some(s),
                    (Change::Imported { .. }, Some(s)) => {
                        matches!(
                            s,
                            AssignmentStatus::Autosuggested | AssignmentStatus::Suggested
                        )
                    }
                }
        };
        follow(ctx, after, wanted, AssignmentEvent)
    }

    /// The end of every release run of the portal (successful or not).
    async fn release_run_finished(
        &self,
        ctx: &Context<'_>,
        portal_id: ID,
        after: Option<String>,
    ) -> Result<impl Stream<Item = Result<ReleaseRunEvent>>> {
        let wanted = move |e: &Event| {
            matches!(e.change, Change::Release(_)) && e.portal_id() == portal_id.as_str()
        };
        follow(ctx, after, wanted, ReleaseRunEvent)
    }
}
