//! The feed's outbox: a change about to be made is recorded before its
//! compare-and-set, and the batch that writes its event removes the record.
//! A record left behind means a change whose event was lost between the two
//! (a process that died, a batch that failed, on Cassandra where they are
//! not one transaction); a drain, on an instance's first tail pass with a
//! subscriber and every 10 s while it has any, writes that event if the change applied
//! (once the record is 30 s old: younger, its writer may still write it), or drops the
//! record once it cannot apply any more.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::{Change, Events, event_writes, millis_of, minute_of, new_id};
use crate::domains::assignments::model::{Assignment, AssignmentKey, AssignmentStatus};
use crate::store::table;
use crate::store::{Bound, Heal, Mutation, Row, Slice, StoreError};

table! {
    /// Changes about to be made, one minute per partition: written before a
    /// change's compare-and-set, deleted in the batch that writes its event. One
    /// still there after its change applied is a lost event, which a drain writes.
    pub ASSIGNMENT_EVENT_OUTBOX: Target.assignment_event_outbox
        partition(minute: BigInt)
        clustering(id: Text Asc)
        columns(
            actor: Text, top_level_category_id: Text, ddb_id: Text, keyword_id: Text,
            creator: Text, status: Text, previous_status: Text, modified_at: Text
        )
}

/// How far back a drain looks for changes without their event (a restart
/// after a longer outage leaves older ones out; the intents expire).
const OUTBOX_HORIZON_MS: i64 = 3600 * 1000;
/// An intent whose change has not applied after this long never will.
const ABANDONED_AFTER_MS: i64 = 10 * 60 * 1000;
/// An intent younger than this may still be on its way to its event (its
/// writer between the compare-and-set and the batch that writes the event,
/// each bounded by the store's 15 s request timeout): a drain leaves it, or
/// the event would be written twice (once by the drain, once by the writer).
const IN_FLIGHT_MS: i64 = 30 * 1000;
/// How often an instance with subscribers drains the outbox.
pub(super) const DRAIN_EVERY: Duration = Duration::from_secs(10);
/// Intents a drain reads per slice.
const DRAIN_PAGE: usize = 256;
/// Outbox minutes read at once by a drain.
const DRAIN_CONCURRENCY: usize = 8;

/// A change about to be made, as the outbox records it: enough to tell,
/// later, whether it applied (its status and its own `modified_at`).
pub struct Intent {
    minute: i64,
    id: String,
    actor: Option<String>,
    key: AssignmentKey,
    status: AssignmentStatus,
    previous: Option<AssignmentStatus>,
    modified_at: String,
}

impl Intent {
    /// The outbox row, to be written before the change.
    pub fn write(&self) -> Mutation {
        Mutation::Upsert {
            row: Row::new(&ASSIGNMENT_EVENT_OUTBOX)
                .set("minute", self.minute)
                .set("id", self.id.as_str())
                .set_opt("actor", self.actor.as_deref())
                .set("top_level_category_id", self.key.portal_id.as_str())
                .set("ddb_id", self.key.ddb_id.as_str())
                .set("keyword_id", self.key.keyword_id.as_str())
                .set("creator", self.key.creator.as_str())
                .set("status", self.status.as_str())
                .set_opt("previous_status", self.previous.map(|p| p.as_str()))
                .set("modified_at", self.modified_at.as_str()),
            // A drain after a longer outage no longer looks for it.
            ttl: Some(2 * (OUTBOX_HORIZON_MS / 1000) as u32),
        }
    }

    fn done(&self) -> Mutation {
        Mutation::delete(
            &ASSIGNMENT_EVENT_OUTBOX,
            vec![self.minute.into(), self.id.as_str().into()],
        )
    }

    fn from_row(r: &Row) -> Option<Intent> {
        Some(Intent {
            minute: r.bigint("minute")?,
            id: r.string("id"),
            actor: r.text("actor").map(str::to_owned),
            key: AssignmentKey {
                portal_id: r.text("top_level_category_id")?.to_owned(),
                ddb_id: r.text("ddb_id")?.to_owned(),
                keyword_id: r.text("keyword_id")?.to_owned(),
                creator: r.text("creator")?.to_owned(),
            },
            status: AssignmentStatus::parse(r.text("status")?)?,
            previous: r.text("previous_status").and_then(AssignmentStatus::parse),
            modified_at: r.text("modified_at")?.to_owned(),
        })
    }

    /// Whether `a` is what this change made (`modified_at` is the change's
    /// own: to the nanosecond for a transition).
    fn made(&self, a: &Assignment) -> bool {
        a.status == self.status && a.modified_at == self.modified_at
    }
}

impl Events {
    /// The intent of a change of `key` to `status` stamped `modified_at`:
    /// write it ([`Intent::write`]) before the change, and make the change
    /// with [`Events::with_event`].
    pub fn intend(
        &self,
        actor: Option<&str>,
        key: &AssignmentKey,
        status: AssignmentStatus,
        previous: Option<AssignmentStatus>,
        modified_at: &str,
    ) -> Intent {
        let now = self.now_ms();
        Intent {
            minute: minute_of(now),
            id: new_id(now),
            actor: actor.map(str::to_owned),
            key: key.clone(),
            status,
            previous,
            modified_at: modified_at.to_owned(),
        }
    }

    /// `views` and, from the row as written, the change's event (stamped
    /// then: after the compare-and-set that orders it) and the end of its
    /// intent: one batch, one transaction on the embedded engine.
    pub fn with_event(&self, views: Heal, intent: &Intent) -> Heal {
        let clock = self.clock.clone();
        let actor = intent.actor.clone();
        let previous = intent.previous;
        let done = intent.done();
        Arc::new(move |row: &Row| {
            let mut writes = views(row);
            if let Some(assignment) = Assignment::from_row(row) {
                writes.extend(event_writes(
                    &clock,
                    actor.as_deref(),
                    vec![Change::Assignment {
                        assignment,
                        previous,
                    }],
                ));
            }
            writes.push(done.clone());
            writes
        })
    }

    /// After a change whose event went into its batch (see
    /// [`Events::with_event`], [`Events::writes`]) applied, begun at `began`
    /// (ms, this feed's clock). The local tail reads at once. An
    /// event that took more than half the lag to be written may have become
    /// visible after every tail's window passed its id: it goes out again
    /// with a fresh id (a subscriber may see it twice, never not at all).
    pub async fn committed(&self, began: i64, actor: Option<&str>, change: Change) {
        if self.now_ms() - began > self.lag_ms() / 2 {
            self.publish_or_log(actor, vec![change]).await;
        } else {
            self.poke.notify_one();
        }
    }

    /// A change that did not apply: its intent goes (a drain would remove it
    /// later anyway).
    pub async fn abandon(&self, intent: &Intent) {
        if let Err(e) = self.store.apply(vec![intent.done()]).await {
            tracing::info!(error = %e, "an outbox intent stays until a drain");
        }
    }

    pub(super) async fn drain_or_log(&self, drained: &mut Drained) {
        match self.drain(drained).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                events = n,
                "wrote the events of changes whose own write was lost"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "the assignment event outbox could not be drained")
            }
        }
    }

    /// Writes the event of every change in the outbox of the last hour that
    /// applied without one, and removes intents that never applied. Returns
    /// how many events it wrote.
    async fn drain(&self, drained: &mut Drained) -> Result<usize, StoreError> {
        let now = self.now_ms();
        let first = minute_of(now - OUTBOX_HORIZON_MS);
        let settled = minute_of(now - ABANDONED_AFTER_MS);
        drained.empty = drained.empty.split_off(&first);
        let minutes: Vec<i64> = (first..=minute_of(now))
            .filter(|m| !drained.empty.contains(m))
            .collect();
        let mut written = 0;
        for chunk in minutes.chunks(DRAIN_CONCURRENCY) {
            let slices: Vec<Slice> = chunk
                .iter()
                .map(|m| Slice::partition(vec![(*m).into()]).limit(DRAIN_PAGE))
                .collect();
            let pages = self
                .store
                .slice_many(&ASSIGNMENT_EVENT_OUTBOX, &slices)
                .await?;
            for (minute, page) in chunk.iter().zip(pages) {
                if page.rows.is_empty() && *minute < settled {
                    drained.empty.insert(*minute);
                }
                let mut rows = page.rows;
                let mut more = page.next.is_some();
                loop {
                    for intent in rows.iter().filter_map(Intent::from_row) {
                        written += usize::from(self.settle(intent, now).await?);
                    }
                    let Some(last) = rows.last().filter(|_| more) else {
                        break;
                    };
                    let slice = Slice::partition(vec![(*minute).into()])
                        .lower(Bound::Exclusive(last.string("id").into()))
                        .limit(DRAIN_PAGE);
                    let page = self.store.slice(&ASSIGNMENT_EVENT_OUTBOX, &slice).await?;
                    more = page.next.is_some();
                    rows = page.rows;
                }
            }
        }
        if written > 0 {
            self.poke.notify_one();
        }
        Ok(written)
    }

    /// One intent: its event when its change is what the row holds (stamped
    /// now, so that live subscribers get it), its removal when it is old and
    /// never applied (or was overwritten since: the later change reports the
    /// state), nothing while its change may still be under way.
    async fn settle(&self, intent: Intent, now: i64) -> Result<bool, StoreError> {
        let age = now - millis_of(&intent.id).unwrap_or(0);
        if age < IN_FLIGHT_MS {
            return Ok(false);
        }
        let current = Assignment::stored(&self.store, &intent.key).await?;
        match current {
            Some(assignment) if intent.made(&assignment) => {
                let mut writes = self.writes(
                    intent.actor.as_deref(),
                    vec![Change::Assignment {
                        assignment,
                        previous: intent.previous,
                    }],
                );
                writes.push(intent.done());
                self.store.apply(writes).await?;
                Ok(true)
            }
            _ if age > ABANDONED_AFTER_MS => {
                self.store.apply(vec![intent.done()]).await?;
                Ok(false)
            }
            _ => Ok(false),
        }
    }
}

/// Outbox minutes a drain found empty and too old to receive intents.
#[derive(Default)]
pub(super) struct Drained {
    empty: BTreeSet<i64>,
}
