//! The change feed of assignments: every status change or new assignment a
//! request makes, and every release run's end, is appended to
//! `assignment_events` (partitioned by minute, kept a day), and each server
//! instance tails that table into an in-process broadcast that GraphQL
//! subscriptions read. So a change made on any instance (or by an importer or
//! a release) reaches the subscribers of every instance, on both engines, and
//! a subscriber that reconnects with the last event id it saw resumes from
//! the table without a gap.
//!
//! Delivery is at least once: a tail and a resume read `lag` behind the
//! newest event, so an event written late by a slow or skewed instance is not
//! skipped; an event can therefore come twice. Each event carries the
//! assignment's whole state, so applying it twice changes nothing.
//!
//! An assignment's event is written with its change: in the batch that
//! follows the compare-and-set (one transaction on the embedded engine). So
//! that a process that dies between the two on Cassandra (or a follow-up
//! batch that fails) loses no event, the change is first recorded in
//! `assignment_event_outbox`, and every instance drains that outbox once it
//! has a subscriber (after a restart: as soon as clients reconnect) and
//! every 10 s while it has any.
//!
//! Resumes read lazily, a page of a minute at a time, under one byte budget
//! for the whole process, and skip empty minutes through
//! `assignment_event_minutes`; resumes that need the same page at once (every
//! subscriber after a burst too large for the broadcast) share one read.

mod outbox;
mod replay;
mod tail;

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

pub use self::outbox::{ASSIGNMENT_EVENT_OUTBOX, Intent};
use self::outbox::{DRAIN_EVERY, Drained};
use self::replay::{Budget, EventPage, Kept, Lower, Shared};
use super::model::{Assignment, AssignmentStatus, ReleaseRun};
use crate::kernel::Clock;
use crate::kernel::error::ApiResult;
use crate::kernel::worker::{Worker, WorkerState, Workers};
use crate::store::table;
use crate::store::{Bound, DynStore, Mutation, Row, Slice, StoreError, Table};

table! {
    /// One minute of events; a partition holds what curators, releases and
    /// import summaries write in a minute (see cql/README.md for the budget).
    pub ASSIGNMENT_EVENTS: Target.assignment_events
        partition(minute: BigInt)
        clustering(id: Text Asc)
        columns(
            kind: Text, actor: Text, top_level_category_id: Text, ddb_id: Text, keyword_id: Text,
            creator: Text, child_category_id: Text, status: Text, previous_status: Text,
            assignment_type: Text, created_at: Text, modified_at: Text, confidence_value: Double,
            count: BigInt, message: Text
        )
}

table! {
    /// The minutes of `assignment_events` that hold events, an hour per
    /// partition (at most 60 rows), written with every event: a resume lists an
    /// hour's busy minutes in one read instead of reading sixty partitions.
    pub ASSIGNMENT_EVENT_MINUTES: Target.assignment_event_minutes
        partition(hour: BigInt)
        clustering(minute: BigInt Asc)
}

/// The tables of the feed.
pub static TABLES: &[&Table] = &[
    &ASSIGNMENT_EVENTS,
    &ASSIGNMENT_EVENT_MINUTES,
    &ASSIGNMENT_EVENT_OUTBOX,
];

/// How long events are kept (and so the longest replay window).
pub const EVENT_TTL: u32 = 24 * 3600;
/// Events the broadcast holds for its slowest subscriber; one that falls
/// further behind resumes from the table.
pub const BROADCAST: usize = 4096;
/// Rows a tail reads per slice.
const TAIL_SLICE: usize = 1_000;

/// The feed's settings (`--replay-window`, `--replay-budget-bytes`, `--feed-lag`).
#[derive(Clone, Debug)]
pub struct FeedConfig {
    /// How far behind the newest event a tail or a resume reads again, and
    /// so how late an event may become visible and still be sent live.
    pub lag: Duration,
    /// How far back an `after` may be; older ones are REPLAY_TOO_OLD.
    pub replay_window: Duration,
    /// Bytes of replayed events all resumes of the process may hold at once.
    pub replay_budget_bytes: usize,
    /// How long a resume waits for budget before it is REPLAY_BUSY.
    pub replay_wait: Duration,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig {
            lag: Duration::from_secs(5),
            replay_window: Duration::from_secs(3600),
            replay_budget_bytes: 64 << 20,
            replay_wait: Duration::from_secs(5),
        }
    }
}

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

/// A new id at `millis` (`millis-random`): ids sort by time.
fn new_id(millis: i64) -> String {
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    format!("{:013}-{:016x}", millis.max(0), u64::from_be_bytes(random))
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

    /// About what the event takes in memory (its strings and the structs
    /// around them): what the replay budget counts.
    fn bytes(&self) -> usize {
        let text = match &self.change {
            Change::Assignment { assignment: a, .. } => {
                a.key.portal_id.len()
                    + a.key.ddb_id.len()
                    + a.key.keyword_id.len()
                    + a.key.creator.len()
                    + a.child_category_id.len()
                    + a.created_at.len()
                    + a.modified_at.len()
            }
            Change::Release(run) => {
                run.portal_id.len() + run.time.len() + run.message.as_ref().map_or(0, String::len)
            }
            Change::Imported { portal_id, .. } => portal_id.len(),
        };
        // The Arc's counts, and an allocator's header per string.
        std::mem::size_of::<Event>()
            + 16
            + 9 * 16
            + self.id.len()
            + text
            + self.actor.as_ref().map_or(0, String::len)
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
                actor: r.text("actor").map(str::to_owned),
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

table! {
    /// The assignment columns an event row carries, as a table shape that
    /// `Assignment::row` and `from_row` understand (never stored itself).
    ASSIGNMENT_EVENTS_VIEW: Target.assignment_events
        partition(top_level_category_id: Text)
        clustering(ddb_id: Text Asc, keyword_id: Text Asc, creator: Text Asc)
        columns(
            child_category_id: Text, status: Text, assignment_type: Text, created_at: Text,
            modified_at: Text, confidence_value: Double
        )
}

fn millis_of(id: &str) -> Option<i64> {
    id.split('-').next()?.parse().ok()
}

/// The first id at or after `millis`.
fn floor_id(millis: i64) -> String {
    format!("{:013}", millis.max(0))
}

fn minute_of(millis: i64) -> i64 {
    millis.div_euclid(60_000)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The writes that append `changes` as events at `clock`'s now, with the
/// minute index row they need.
fn event_writes(clock: &Clock, actor: Option<&str>, changes: Vec<Change>) -> Vec<Mutation> {
    let now = (clock.now().unix_timestamp_nanos() / 1_000_000) as i64;
    let mut writes: Vec<Mutation> = changes
        .into_iter()
        .map(|change| {
            let event = Event {
                id: new_id(now),
                actor: actor.map(str::to_owned),
                change,
            };
            Mutation::Upsert {
                row: event.row(),
                ttl: Some(EVENT_TTL),
            }
        })
        .collect();
    if !writes.is_empty() {
        let minute = minute_of(now);
        writes.push(Mutation::Upsert {
            row: Row::new(&ASSIGNMENT_EVENT_MINUTES)
                .set("hour", minute.div_euclid(60))
                .set("minute", minute),
            ttl: Some(EVENT_TTL),
        });
    }
    writes
}

/// What the tail sent in one pass: a subscriber that missed events of it
/// reads them from the table as of after `read_at`, from `window_from`, up to
/// `upto`.
struct Pass {
    read_at: Instant,
    window_from: i64,
    upto: String,
}

#[derive(Clone)]
struct Live {
    event: Arc<Event>,
    pass: Arc<Pass>,
}

/// Appends events and tails them: one per server process (cheap to clone).
#[derive(Clone)]
pub struct Events {
    store: DynStore,
    clock: Clock,
    config: FeedConfig,
    tx: broadcast::Sender<Live>,
    poke: Arc<Notify>,
    budget: Budget,
    pages: Arc<Shared<(i64, Lower), EventPage>>,
    /// Pages kept after their readers moved on (see `KEEP_FOR`).
    kept: Arc<Kept>,
    hours: Arc<Shared<i64, Vec<i64>>>,
    /// The tail, once started.
    workers: Workers,
}

impl Events {
    pub fn new(store: DynStore, clock: Clock) -> Self {
        Self::with_config(store, clock, FeedConfig::default())
    }

    pub fn with_config(store: DynStore, clock: Clock, config: FeedConfig) -> Self {
        let (tx, _) = broadcast::channel(BROADCAST);
        Events {
            store,
            clock,
            budget: Budget::new(config.replay_budget_bytes),
            config,
            tx,
            poke: Arc::new(Notify::new()),
            pages: Arc::new(Shared::new()),
            kept: Arc::new(Mutex::new(VecDeque::new())),
            hours: Arc::new(Shared::new()),
            workers: Workers::default(),
        }
    }

    pub fn config(&self) -> &FeedConfig {
        &self.config
    }

    /// Milliseconds since the epoch, by this feed's clock (event ids' time).
    pub fn now_ms(&self) -> i64 {
        (self.clock.now().unix_timestamp_nanos() / 1_000_000) as i64
    }

    fn lag_ms(&self) -> i64 {
        millis(self.config.lag)
    }

    /// The writes that append `changes` (to go into the batch of the change
    /// they report).
    pub fn writes(&self, actor: Option<&str>, changes: Vec<Change>) -> Vec<Mutation> {
        event_writes(&self.clock, actor, changes)
    }

    /// Appends one event per change; the feed of this process is told at
    /// once (other instances see it at their next tail).
    pub async fn publish(
        &self,
        actor: Option<&str>,
        changes: Vec<Change>,
    ) -> Result<(), StoreError> {
        let writes = self.writes(actor, changes);
        if writes.is_empty() {
            return Ok(());
        }
        self.store.write_bulk(writes).await?;
        self.poke.notify_one();
        Ok(())
    }

    /// Publishes, logging a failure instead of returning it: for an import's
    /// counts, written after its rows (a subscriber sees them on its next reload).
    pub async fn publish_or_log(&self, actor: Option<&str>, changes: Vec<Change>) {
        if let Err(e) = self.publish(actor, changes).await {
            tracing::warn!(error = %e, "an assignment event was not written");
        }
    }

    /// Events from `from_ms` to `to_ms` (by id time), oldest first: the tail's read.
    async fn read(&self, from_ms: i64, to_ms: i64) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::new();
        for minute in minute_of(from_ms)..=minute_of(to_ms) {
            let mut lower = Bound::Inclusive(floor_id(from_ms).into());
            loop {
                let slice = Slice::partition(vec![minute.into()])
                    .lower(lower)
                    .limit(TAIL_SLICE);
                let page = self.store.slice(&ASSIGNMENT_EVENTS, &slice).await?;
                out.extend(page.rows.iter().filter_map(Event::from_row));
                match (page.next, page.rows.last()) {
                    (Some(_), Some(last)) => lower = Bound::Exclusive(last.string("id").into()),
                    _ => break,
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domains::assignments::model::{AssignmentKey, AssignmentType};

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
                // A run's actor is its event's.
                actor: Some("anna".into()),
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
