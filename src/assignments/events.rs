//! The change feed of assignments: every status change or new assignment a
//! request makes, and every release run's end, is appended to
//! `assignment_events` (partitioned by minute, kept a day), and each server
//! instance tails that table into an in-process broadcast that GraphQL
//! subscriptions read. So a change made on any instance (or by an importer or
//! a release) reaches the subscribers of every instance, on both engines, and
//! a subscriber that reconnects with the last event id it saw resumes from
//! the table without a gap.
//!
//! Delivery is at least once: a tail and a resume read a few seconds behind
//! the newest event (`LAG`), so an event written late by a slow or skewed
//! instance is not skipped; an event can therefore come twice. Each event
//! carries the assignment's whole state, so applying it twice changes nothing.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, broadcast};

use super::model::{Assignment, AssignmentStatus, ReleaseRun};
use crate::common::Clock;
use crate::error::{ApiError, ApiResult};
use crate::store::ColumnType::{BigInt, Double, Text};
use crate::store::{
    Bound, DynStore, Keyspace, Mutation, Order, Row, Slice, StoreError, Table, col,
};

/// One minute of events; a partition holds what curators, releases and
/// import summaries write in a minute (see cql/README.md for the budget).
pub static ASSIGNMENT_EVENTS: Table = Table {
    keyspace: Keyspace::Target,
    name: "assignment_events",
    partition_key: &[col("minute", BigInt)],
    clustering: &[(col("id", Text), Order::Asc)],
    columns: &[
        col("kind", Text),
        col("actor", Text),
        col("top_level_category_id", Text),
        col("ddb_id", Text),
        col("keyword_id", Text),
        col("creator", Text),
        col("child_category_id", Text),
        col("status", Text),
        col("previous_status", Text),
        col("assignment_type", Text),
        col("created_at", Text),
        col("modified_at", Text),
        col("confidence_value", Double),
        col("count", BigInt),
        col("message", Text),
    ],
};

/// How long events are kept (a subscriber away longer resumes from the oldest kept).
pub const EVENT_TTL: u32 = 24 * 3600;
/// How far behind the newest event a tail or a resume reads again.
const LAG_MS: i64 = 5_000;
/// Rows read per slice of the feed.
const SLICE: usize = 1_000;
/// Events a resume replays at most; a subscriber further behind reloads.
pub const REPLAY_MAX: usize = 10_000;

/// Whether `id` has the form of an event id (`millis-random`: 13 digits, a
/// dash, 16 hex digits).
pub fn is_event_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 30
        && b[..13].iter().all(u8::is_ascii_digit)
        && b[13] == b'-'
        && b[14..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// An assignment was created or changed status; `previous` is None for a new one.
    Assignment {
        assignment: Assignment,
        previous: Option<AssignmentStatus>,
    },
    /// A release run of the portal ended.
    Release(ReleaseRun),
    /// An importer wrote `count` new assignments into the portal.
    Imported { portal_id: String, count: i64 },
}

/// One event of the feed: its id orders events by time (`millis-random`).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub id: String,
    /// The token subject who made the change (none for a release or import without one).
    pub actor: Option<String>,
    pub change: Change,
}

impl Event {
    pub fn portal_id(&self) -> &str {
        match &self.change {
            Change::Assignment { assignment, .. } => &assignment.key.portal_id,
            Change::Release(run) => &run.portal_id,
            Change::Imported { portal_id, .. } => portal_id,
        }
    }

    /// When it was written (ms since the epoch), from its id.
    pub fn millis(&self) -> i64 {
        millis_of(&self.id).unwrap_or(0)
    }

    fn row(&self) -> Row {
        let base = Row::new(&ASSIGNMENT_EVENTS)
            .set("minute", self.millis() / 60_000)
            .set("id", self.id.as_str())
            .set_opt("actor", self.actor.clone());
        match &self.change {
            Change::Assignment {
                assignment,
                previous,
            } => {
                // The assignment's cells, moved onto the event's key.
                let cells = assignment.row(&ASSIGNMENT_EVENTS_VIEW);
                let mut out = base.set("kind", "assignment");
                for c in ASSIGNMENT_EVENTS_VIEW.all_columns() {
                    if let Some(v) = cells.get(c.name).cloned() {
                        out = out.set(c.name, v);
                    }
                }
                out.set_opt("previous_status", previous.map(|p| p.as_str()))
            }
            Change::Release(run) => base
                .set("kind", "release")
                .set("top_level_category_id", run.portal_id.as_str())
                .set(
                    "status",
                    if run.successful {
                        "SUCCESSFUL"
                    } else {
                        "FAILED"
                    },
                )
                .set("modified_at", run.time.as_str())
                .set("count", run.published)
                .set_opt("message", run.message.clone()),
            Change::Imported { portal_id, count } => base
                .set("kind", "import")
                .set("top_level_category_id", portal_id.as_str())
                .set("count", *count),
        }
    }

    fn from_row(r: &Row) -> Option<Event> {
        let change = match r.text("kind")? {
            "assignment" => {
                let mut view = Row::new(&ASSIGNMENT_EVENTS_VIEW);
                for c in ASSIGNMENT_EVENTS_VIEW.all_columns() {
                    if let Some(v) = r.get(c.name).cloned() {
                        view = view.set(c.name, v);
                    }
                }
                Change::Assignment {
                    assignment: Assignment::from_row(&view)?,
                    previous: r.text("previous_status").and_then(AssignmentStatus::parse),
                }
            }
            "release" => Change::Release(ReleaseRun {
                portal_id: r.string("top_level_category_id"),
                successful: r.text("status") == Some("SUCCESSFUL"),
                time: r.string("modified_at"),
                published: r.bigint("count").unwrap_or(0),
                message: r.text("message").map(str::to_owned),
            }),
            "import" => Change::Imported {
                portal_id: r.string("top_level_category_id"),
                count: r.bigint("count").unwrap_or(0),
            },
            _ => return None,
        };
        Some(Event {
            id: r.string("id"),
            actor: r.text("actor").map(str::to_owned),
            change,
        })
    }
}

/// The assignment columns an event row carries, as a table shape that
/// `Assignment::row` and `from_row` understand (never stored itself).
static ASSIGNMENT_EVENTS_VIEW: Table = Table {
    keyspace: Keyspace::Target,
    name: "assignment_events",
    partition_key: &[col("top_level_category_id", Text)],
    clustering: &[
        (col("ddb_id", Text), Order::Asc),
        (col("keyword_id", Text), Order::Asc),
        (col("creator", Text), Order::Asc),
    ],
    columns: &[
        col("child_category_id", Text),
        col("status", Text),
        col("assignment_type", Text),
        col("created_at", Text),
        col("modified_at", Text),
        col("confidence_value", Double),
    ],
};

fn millis_of(id: &str) -> Option<i64> {
    id.split('-').next()?.parse().ok()
}

/// The first id at or after `millis`.
fn floor_id(millis: i64) -> String {
    format!("{:013}", millis.max(0))
}

struct Follow {
    events: Events,
    rx: broadcast::Receiver<Arc<Event>>,
    backlog: VecDeque<Arc<Event>>,
    sent: BTreeSet<String>,
    last: Option<String>,
}

/// Appends events and tails them: one per server process (cheap to clone).
#[derive(Clone)]
pub struct Events {
    store: DynStore,
    clock: Clock,
    tx: broadcast::Sender<Arc<Event>>,
    poke: Arc<Notify>,
}

impl Events {
    pub fn new(store: DynStore, clock: Clock) -> Self {
        let (tx, _) = broadcast::channel(4096);
        Events {
            store,
            clock,
            tx,
            poke: Arc::new(Notify::new()),
        }
    }

    /// Milliseconds since the epoch, by this feed's clock (event ids' time).
    fn now_ms(&self) -> i64 {
        (self.clock.now().unix_timestamp_nanos() / 1_000_000) as i64
    }

    /// Appends one event per change, as one write; the feed of this process
    /// is told at once (other instances see it at their next tail).
    pub async fn publish(
        &self,
        actor: Option<&str>,
        changes: Vec<Change>,
    ) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let millis = self.now_ms();
        let batch = changes
            .into_iter()
            .map(|change| {
                let mut random = [0u8; 8];
                let _ = getrandom::fill(&mut random);
                let event = Event {
                    id: format!("{millis:013}-{:016x}", u64::from_be_bytes(random)),
                    actor: actor.map(str::to_owned),
                    change,
                };
                Mutation::Upsert {
                    row: event.row(),
                    ttl: Some(EVENT_TTL),
                }
            })
            .collect();
        self.store.write_bulk(batch).await?;
        self.poke.notify_one();
        Ok(())
    }

    /// Publishes, logging a failure instead of returning it: the change itself
    /// is stored, and a subscriber catches up on its next reload.
    pub async fn publish_or_log(&self, actor: Option<&str>, changes: Vec<Change>) {
        if let Err(e) = self.publish(actor, changes).await {
            tracing::warn!(error = %e, "an assignment event was not written");
        }
    }

    /// Every event with an id after `after` (at least once: from `LAG` before
    /// it), oldest first, at most `limit`.
    pub async fn since(&self, after: &str, limit: usize) -> Result<Vec<Event>, StoreError> {
        let from = millis_of(after).unwrap_or(0) - LAG_MS;
        let now = self.now_ms();
        let from = from.max(now - i64::from(EVENT_TTL) * 1000);
        self.read(from, now, limit).await
    }

    /// Events from `from_ms` to `to_ms` (by id time), oldest first.
    async fn read(&self, from_ms: i64, to_ms: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::new();
        let mut minute = from_ms / 60_000;
        while minute <= to_ms / 60_000 && out.len() < limit {
            let mut cursor = None;
            loop {
                let slice = Slice::partition(vec![minute.into()])
                    .lower(Bound::Inclusive(floor_id(from_ms).into()))
                    .limit(SLICE)
                    .after(cursor);
                let page = self.store.slice(&ASSIGNMENT_EVENTS, &slice).await?;
                out.extend(page.rows.iter().filter_map(Event::from_row));
                cursor = page.next;
                if cursor.is_none() || out.len() >= limit {
                    break;
                }
            }
            minute += 1;
        }
        out.truncate(limit);
        Ok(out)
    }

    /// Every event from now on, or with `after` (an event id) from then on,
    /// without a gap and with no event twice in a row of the window: the
    /// receiver is taken before the replay is read, and a subscriber that
    /// falls behind the broadcast reads the table again from its last event.
    /// An `after` that is no event id is BAD_USER_INPUT; one further back
    /// than `REPLAY_MAX` events too (the client reloads instead).
    pub async fn follow(
        &self,
        after: Option<String>,
    ) -> ApiResult<impl futures::Stream<Item = Arc<Event>> + Send + 'static> {
        let rx = self.tx.subscribe();
        let backlog = match &after {
            Some(id) if !is_event_id(id) => {
                return Err(ApiError::bad_input("`after` is not an event id"));
            }
            Some(id) => {
                let replay = self.since(id, REPLAY_MAX + 1).await?;
                if replay.len() > REPLAY_MAX {
                    return Err(ApiError::bad_input(format!(
                        "more than {REPLAY_MAX} changes since that event: load the page again and subscribe without `after`"
                    )));
                }
                replay
            }
            None => Vec::new(),
        };
        let state = Follow {
            events: self.clone(),
            rx,
            backlog: backlog.into_iter().map(Arc::new).collect(),
            sent: BTreeSet::new(),
            last: after,
        };
        Ok(futures::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(e) = st.backlog.pop_front() {
                    if st.sent.insert(e.id.clone()) {
                        // Ids older than the window are never offered again.
                        let floor = floor_id(e.millis() - 2 * LAG_MS);
                        st.sent = st.sent.split_off(&floor);
                        st.last = Some(e.id.clone());
                        return Some((e, st));
                    }
                    continue;
                }
                match st.rx.recv().await {
                    Ok(e) => st.backlog.push_back(e),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let from = st
                            .last
                            .clone()
                            .unwrap_or_else(|| floor_id(st.events.now_ms()));
                        match st.events.since(&from, REPLAY_MAX + 1).await {
                            // Too far behind: the stream ends; a resume with
                            // the last id says so, and the client reloads.
                            Ok(v) if v.len() > REPLAY_MAX => return None,
                            Ok(v) => st.backlog.extend(v.into_iter().map(Arc::new)),
                            Err(e) => {
                                tracing::warn!(error = %e, "a subscriber could not catch up");
                                return None;
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }))
    }

    /// Tails the table while anyone listens: every `every`, or at once after a
    /// local publish, reads the last `LAG` of events and sends the ones not
    /// sent before, in id order.
    pub fn spawn_tail(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let events = self.clone();
        tokio::spawn(async move {
            // The ids sent that a later read of the window may find again.
            let mut sent: BTreeSet<String> = BTreeSet::new();
            loop {
                tokio::select! {
                    _ = events.poke.notified() => {}
                    _ = tokio::time::sleep(every) => {}
                }
                if events.tx.receiver_count() == 0 {
                    sent.clear();
                    continue;
                }
                let now = events.now_ms();
                let fresh = match events.read(now - LAG_MS, now + LAG_MS, 100_000).await {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(error = %e, "the assignment event tail could not read");
                        continue;
                    }
                };
                for event in fresh {
                    if sent.insert(event.id.clone()) {
                        let _ = events.tx.send(Arc::new(event));
                    }
                }
                // What is older than the window is never read again.
                sent = sent.split_off(&floor_id(now - 2 * LAG_MS));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignments::model::{AssignmentKey, AssignmentType};

    #[test]
    fn event_ids_are_recognised() {
        assert!(is_event_id("1767225600000-00000000000000ff"));
        for bad in [
            "",
            "garbage",
            "1767225600000",
            "1767225600000-00000000000000FF",
            "176722560000x-00000000000000ff",
        ] {
            assert!(!is_event_id(bad), "{bad}");
        }
    }

    #[test]
    fn an_event_row_reads_back_as_the_same_event() {
        let a = Assignment {
            key: AssignmentKey {
                portal_id: "p".into(),
                ddb_id: "d".into(),
                keyword_id: "k".into(),
                creator: "c".into(),
            },
            child_category_id: "cc".into(),
            assignment_type: AssignmentType::Machine,
            status: AssignmentStatus::Accepted,
            created_at: "2026-01-01T00:00:00Z".into(),
            modified_at: "2026-01-02T00:00:00Z".into(),
            confidence: Some(0.5),
        };
        for change in [
            Change::Assignment {
                assignment: a,
                previous: Some(AssignmentStatus::Suggested),
            },
            Change::Release(ReleaseRun {
                portal_id: "p".into(),
                successful: true,
                time: "t".into(),
                published: 3,
                message: None,
            }),
            Change::Imported {
                portal_id: "p".into(),
                count: 7,
            },
        ] {
            let e = Event {
                id: "1767225600000-00000000000000ff".into(),
                actor: Some("anna".into()),
                change,
            };
            assert_eq!(Event::from_row(&e.row()), Some(e.clone()));
            assert_eq!(e.row().bigint("minute"), Some(1767225600000 / 60_000));
        }
    }
}
