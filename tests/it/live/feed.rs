//! The change feed under the subscriptions, at the service: a bounded replay,
//! shared catching up after a burst, and no committed change lost when its
//! event is written late or not at all.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kartei::domains::assignments::events::{
    ASSIGNMENT_EVENTS, BROADCAST, Change, Event, Events, FeedConfig,
};
use kartei::domains::assignments::model::{AssignmentKey, AssignmentStatus};
use kartei::domains::assignments::service::{Assignments, SuggestInput, Suggester};
use kartei::kernel::Clock;
use kartei::kernel::roles::{Principal, Role};
use kartei::store::{Counted, DynStore, Mutation, Slice};

use crate::both_engines;
use crate::support::{Engine, Faulty, Vocabulary, round_trips, store, uid, vocabulary};

/// A clock a test moves by hand (ms since the epoch), far from now, so that
/// the feed's minutes it writes are its own on a shared keyspace too.
#[derive(Clone)]
struct HandClock(Arc<AtomicI64>);

impl HandClock {
    /// Half a minute into a random minute of 2030.
    fn new() -> Self {
        let minute = i64::from_str_radix(&uid()[..6], 16).unwrap() % 500_000;
        HandClock(Arc::new(AtomicI64::new(
            1_900_000_000_000 + minute * 60_000 + 30_000,
        )))
    }
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
    fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
    fn clock(&self) -> Clock {
        let ms = self.0.clone();
        Clock::from_fn(move || {
            time::OffsetDateTime::from_unix_timestamp_nanos(
                i128::from(ms.load(Ordering::SeqCst)) * 1_000_000,
            )
            .unwrap()
        })
    }
}

/// `n` import counts for `portal` (the smallest events).
fn imports(portal: &str, n: usize) -> Vec<Change> {
    (0..n)
        .map(|i| Change::Imported {
            portal_id: portal.to_owned(),
            count: i as i64,
        })
        .collect()
}

fn of_portal(portal: &str) -> impl Fn(&Event) -> bool + Send + Sync + 'static {
    let portal = portal.to_owned();
    move |e| e.portal_id() == portal
}

fn id_at(ms: i64) -> String {
    format!("{ms:013}-0000000000000000")
}

/// An AUTOSUGGESTED assignment of `ddb` in portal P by the machine "bot",
/// made through `service`: its key.
async fn machine_suggestion(service: &Assignments, v: &Vocabulary, ddb: &str) -> AssignmentKey {
    let input = SuggestInput {
        portal_id: v.p.clone(),
        ddb_id: ddb.into(),
        keyword_id: v.k1.clone(),
        child_category_id: v.c1.clone(),
        confidence: None,
    };
    let a = service
        .suggest(&Suggester::machine("bot"), input)
        .await
        .unwrap();
    a.key
}

/// The editor "erik" accepts `k` through `service`.
async fn accept(service: &Assignments, k: &AssignmentKey) {
    service
        .transition(
            &Principal::local("erik", &[Role::Editor]),
            k,
            AssignmentStatus::Autosuggested,
            AssignmentStatus::Accepted,
        )
        .await
        .expect("the compare-and-set applied, so the transition is acknowledged");
}

/// The replay is bounded (issue 30): an `after` older than the replay window
/// is refused with REPLAY_TOO_OLD before anything is read; a resume reads
/// the minute index and the minutes that hold events, a page at a time, not
/// every minute partition since `after`; and every resume of the process
/// draws from one byte budget: one that cannot get its share in time ends
/// with REPLAY_BUSY, naming the setting, and succeeds once the budget is free.
async fn a_replay_reads_only_the_busy_minutes_of_its_window_under_one_budget(engine: Engine) {
    let ts = store(engine).await;
    let counted: DynStore = Arc::new(Counted::over(ts.store.clone()));
    let hand = HandClock::new();
    let t0 = hand.now();
    let events = Events::with_config(
        counted.clone(),
        hand.clock(),
        FeedConfig {
            replay_window: Duration::from_secs(3600),
            replay_budget_bytes: 8 << 10,
            replay_wait: Duration::from_millis(200),
            ..Default::default()
        },
    );
    let portal = format!("p-{}", uid());
    // Three busy minutes in the last hour: 3 events, 300 (two pages), 1.
    for (ago, n) in [(50 * 60_000, 3), (20 * 60_000, 300), (1_000, 1)] {
        hand.set(t0 - ago);
        events.publish(None, imports(&portal, n)).await.unwrap();
    }
    hand.set(t0);

    let (calls, refused) = round_trips(&counted, async {
        events.follow(Some(id_at(0)), of_portal(&portal)).err()
    })
    .await;
    let refused = refused.expect("an `after` of 1970 is refused");
    assert_eq!(refused.code(), "REPLAY_TOO_OLD");
    assert!(refused.message().contains("--replay-window"));
    assert_eq!(calls, 0, "refused before anything is read");

    // 55 minutes back: 56 minute partitions, three of them busy.
    let after = id_at(t0 - 55 * 60_000);
    let (calls, got) = round_trips(&counted, async {
        events
            .follow(Some(after.clone()), of_portal(&portal))
            .unwrap()
            .take(304)
            .collect::<Vec<_>>()
            .await
    })
    .await;
    let ids: Vec<String> = got.into_iter().map(|e| e.unwrap().id.clone()).collect();
    assert_eq!(ids.len(), 304);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "oldest first, once each"
    );
    // The index (two hours), the first busy minute (one page), the second
    // (two pages) and the last few minutes, read whatever the index says.
    assert!(
        calls <= 10,
        "{calls} store calls for a resume over 56 minutes"
    );

    // One resume holds its page (and so budget); another, from elsewhere,
    // cannot get its share and is told why; once the first lets go, it runs.
    let mut holding = events
        .follow(Some(after.clone()), of_portal(&portal))
        .unwrap();
    assert!(holding.next().await.unwrap().is_ok());
    let elsewhere = id_at(t0 - 25 * 60_000);
    let mut starved = events
        .follow(Some(elsewhere.clone()), of_portal(&portal))
        .unwrap();
    let busy = starved.next().await.expect("an answer").unwrap_err();
    assert_eq!(busy.code(), "REPLAY_BUSY");
    assert!(busy.message().contains("--replay-budget-bytes"));
    assert!(starved.next().await.is_none(), "the stream ends after it");
    drop(holding);
    let mut again = events.follow(Some(elsewhere), of_portal(&portal)).unwrap();
    assert!(again.next().await.unwrap().is_ok());
}

/// A burst beyond the broadcast does not make every subscriber re-read the
/// store (issue 30): 64 subscribers fall behind the same 5,000 events (the
/// broadcast holds 4,096); they catch up from the table through shared
/// reads, in fewer store calls than there are subscribers, each with every
/// event.
async fn a_burst_beyond_the_broadcast_does_not_make_every_subscriber_reread(engine: Engine) {
    const SUBSCRIBERS: usize = 64;
    const BURST: usize = 5_000;
    const { assert!(BURST > BROADCAST) };
    let ts = store(engine).await;
    let counted: DynStore = Arc::new(Counted::over(ts.store.clone()));
    let hand = HandClock::new();
    let events = Events::new(counted.clone(), hand.clock());
    let portal = format!("p-{}", uid());
    let mut probe = events.follow(None, of_portal(&portal)).unwrap();
    let behind: Vec<_> = (0..SUBSCRIBERS)
        .map(|_| events.follow(None, of_portal(&portal)).unwrap())
        .collect();
    events.spawn_tail(Duration::from_secs(3600));
    events.publish(None, imports(&portal, BURST)).await.unwrap();
    // Once the probe has every event, the tail has sent them all: the
    // others, not read meanwhile, have fallen behind.
    let all: BTreeSet<String> = tokio::time::timeout(
        Duration::from_secs(60),
        (&mut probe)
            .take(BURST)
            .map(|e| e.unwrap().id.clone())
            .collect(),
    )
    .await
    .expect("the probe's events within 60 s");
    assert_eq!(all.len(), BURST);

    let (calls, caught_up) = round_trips(&counted, async {
        tokio::time::timeout(
            Duration::from_secs(120),
            futures::future::join_all(behind.into_iter().map(|f| {
                f.take(BURST)
                    .map(|e| e.unwrap().id.clone())
                    .collect::<BTreeSet<String>>()
            })),
        )
        .await
        .expect("every subscriber caught up within 120 s")
    })
    .await;
    assert!(
        caught_up.iter().all(|got| *got == all),
        "every event, no gap"
    );
    let pages = BURST.div_ceil(256) as u64;
    assert!(
        calls <= 2 * pages && calls < SUBSCRIBERS as u64,
        "{calls} store calls for {SUBSCRIBERS} subscribers catching up on {pages} pages"
    );
}

/// A change that commits always reaches the feed (issue 30): the write of a
/// transition's event fails after its compare-and-set applied (as when the
/// process dies in between), the transition is acknowledged, and the next
/// instance to start drains the outbox for its first subscriber.
async fn a_change_that_commits_reaches_the_feed_when_its_event_write_is_lost(engine: Engine) {
    let ts = store(engine).await;
    let v = vocabulary(&ts.store).await;
    let k = machine_suggestion(&Assignments::new(ts.store.clone()), &v, "lost-1").await;
    let faulty = Faulty::new(ts.store.clone());
    *faulty.fail_apply_on.lock().unwrap() = vec![ASSIGNMENT_EVENTS.name];
    let crashing = Assignments::new(faulty.clone());
    let began = crashing.events().now_ms();
    accept(&crashing, &k).await;
    let key = k.clone();
    let accepted = move |e: &Event| {
        matches!(&e.change, Change::Assignment { assignment, .. }
            if assignment.key == key && assignment.status == AssignmentStatus::Accepted)
    };
    // The feed has no event of it.
    let no_event = |why: &'static str| {
        let store = ts.store.clone();
        let portal = v.p.clone();
        // Up to a minute ahead: a drain stamps what it writes with its own clock.
        let to = crashing.events().now_ms() + 60_000;
        async move {
            for minute in began / 60_000..=to / 60_000 {
                let page = store
                    .slice(
                        &ASSIGNMENT_EVENTS,
                        &Slice::partition(vec![minute.into()]).limit(10_000),
                    )
                    .await
                    .unwrap();
                let found = page.rows.iter().any(|r| {
                    r.text("top_level_category_id") == Some(portal.as_str())
                        && r.text("status") == Some("ACCEPTED")
                });
                assert!(!found, "{why}");
            }
        }
    };
    no_event("the event's write failed").await;

    // A drain a few seconds later leaves the record alone: its writer may
    // still be about to write the event (a drain that wrote it then would
    // send it twice).
    let soon = HandClock::new();
    soon.set(crashing.events().now_ms() + 5_000);
    let early = Assignments::new(ts.store.clone()).with_clock(soon.clock());
    let _listener = early.events().follow(None, |_| true).unwrap();
    early.events().spawn_tail(Duration::from_millis(50));
    let waited = std::time::Instant::now();
    while early
        .events()
        .workers()
        .statuses()
        .iter()
        .all(|s| s.runs < 2)
    {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "the tail never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    early.events().workers().stop(Duration::from_secs(5)).await;
    no_event("a drain left a change that may be under way").await;

    // A restart, more than half a minute later (a younger intent may still
    // be on its way to its event): the new instance's feed drains the outbox
    // once someone listens.
    let later = HandClock::new();
    later.set(crashing.events().now_ms() + 31_000);
    let restarted = Assignments::new(ts.store.clone()).with_clock(later.clock());
    let mut feed = restarted
        .events()
        .follow(Some(id_at(began)), accepted)
        .unwrap();
    restarted.events().spawn_tail(Duration::from_millis(250));
    let event = tokio::time::timeout(Duration::from_secs(20), feed.next())
        .await
        .expect("the drained event within 20 s")
        .unwrap()
        .unwrap();
    assert_eq!(event.actor.as_deref(), Some("erik"));
    let Change::Assignment { previous, .. } = &event.change else {
        panic!("{event:?}")
    };
    assert_eq!(*previous, Some(AssignmentStatus::Autosuggested));
}

/// An event that becomes visible late (issue 30): a transition's event whose
/// write takes longer than the feed lag was stamped before every tail's
/// window passed it; it still reaches a live subscriber.
async fn an_event_that_becomes_visible_late_still_reaches_live_subscribers(engine: Engine) {
    let ts = store(engine).await;
    let v = vocabulary(&ts.store).await;
    let hand = HandClock::new();
    let slow = Faulty::new(ts.store.clone());
    let service = Assignments::new(slow.clone()).with_clock(hand.clock());
    let k = machine_suggestion(&service, &v, "late-1").await;
    let portal = v.p.clone();
    let mut live = service
        .events()
        .follow(None, move |e| {
            e.portal_id() == portal
                && matches!(&e.change, Change::Assignment { assignment, .. }
                    if assignment.status == AssignmentStatus::Accepted)
        })
        .unwrap();
    service.events().spawn_tail(Duration::from_millis(100));
    // The next write of an event takes 6 s of the feed's clock.
    let armed = Arc::new(AtomicBool::new(true));
    let (once, clock) = (armed.clone(), hand.clone());
    *slow.before_apply.lock().unwrap() = Some(Box::new(move |batch: &[Mutation]| {
        let event = batch.iter().any(|m| {
            matches!(m, Mutation::Upsert { row, .. } if row.table.name == ASSIGNMENT_EVENTS.name)
        });
        if event && once.swap(false, Ordering::SeqCst) {
            clock.set(clock.now() + 6_000);
        }
    }));
    accept(&service, &k).await;
    assert!(!armed.load(Ordering::SeqCst), "the event's write was slow");
    let event = tokio::time::timeout(Duration::from_secs(20), live.next())
        .await
        .expect("the late event within 20 s")
        .unwrap()
        .unwrap();
    assert_eq!(event.actor.as_deref(), Some("erik"));
}

both_engines!(
    a_replay_reads_only_the_busy_minutes_of_its_window_under_one_budget,
    a_burst_beyond_the_broadcast_does_not_make_every_subscriber_reread,
    a_change_that_commits_reaches_the_feed_when_its_event_write_is_lost,
    an_event_that_becomes_visible_late_still_reaches_live_subscribers,
);
