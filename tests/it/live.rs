//! Live updates: GraphQL subscriptions over WebSocket (graphql-transport-ws
//! at /graphql/ws), fed by the assignment change feed that every instance
//! tails, on both engines.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kartei::domains::assignments::events::{
    ASSIGNMENT_EVENTS, BROADCAST, Change, Event, Events, FeedConfig,
};
use kartei::domains::assignments::model::{AssignmentKey, AssignmentStatus};
use kartei::domains::assignments::service::{Assignments, SuggestInput, Suggester};
use kartei::kernel::Clock;
use kartei::kernel::roles::{Principal, Role};
use kartei::store::{Counted, DynStore, Mutation, Slice, Store};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::assignments::{SUGGEST, TRANSITION, key, suggestion};
use crate::both_engines;
use crate::support::*;

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const CHANGES: &str = "subscription($p: ID!, $after: String, $s: AssignmentStatus) {
  assignmentChanged(portalId: $p, after: $after, status: $s) {
    id actor kind previousStatus assignment { ddbId status keyword { label } }
  }
}";

/// Opens a WebSocket to `base`'s /graphql/ws with the graphql-transport-ws
/// subprotocol; the upgrade's error (a refusal) when there is one.
async fn open(base: &str) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let url = format!("{}/graphql/ws", base.replacen("http", "ws", 1));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(ws, _)| ws)
}

/// Opens a WebSocket, waiting (up to 20 s) while the server refuses the
/// upgrade with 503: a test's earlier sockets hold places until the server
/// has noticed their close, which on a loaded machine can come after the next
/// upgrade.
async fn open_when_free(base: &str) -> Socket {
    for _ in 0..200 {
        match open(base).await {
            Ok(ws) => return ws,
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 503 => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("websocket: {e}"),
        }
    }
    panic!("the server refused upgrades for 20 s after every socket was closed")
}

/// Opens a graphql-transport-ws connection to `base` with `token` (or none),
/// and answers whether the server acknowledged it.
pub(crate) async fn connect(base: &str, token: Option<&str>) -> (Socket, bool) {
    let mut ws = open_when_free(base).await;
    let acked = init(&mut ws, token).await;
    (ws, acked)
}

/// Sends `connection_init` with `token` (or none) and answers whether the
/// server acknowledged it.
async fn init(ws: &mut Socket, token: Option<&str>) -> bool {
    let payload = match token {
        Some(t) => json!({"Authorization": format!("Bearer {t}")}),
        None => json!({}),
    };
    ws.send(Message::text(
        json!({"type": "connection_init", "payload": payload}).to_string(),
    ))
    .await
    .expect("init");
    matches!(next_message(ws).await, Some(m) if m["type"] == "connection_ack")
}

/// The next protocol message (pings answered), or None when the socket closes.
pub(crate) async fn next_message(ws: &mut Socket) -> Option<Value> {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a message within 20 s")?;
        match msg.ok()? {
            Message::Text(t) => {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "ping" {
                    let _ = ws.send(Message::text(r#"{"type":"pong"}"#)).await;
                    continue;
                }
                return Some(v);
            }
            Message::Close(_) => return None,
            _ => continue,
        }
    }
}

pub(crate) async fn subscribe(ws: &mut Socket, id: &str, query: &str, variables: Value) {
    ws.send(Message::text(
        json!({"id": id, "type": "subscribe", "payload": {"query": query, "variables": variables}})
            .to_string(),
    ))
    .await
    .expect("subscribe");
}

/// A socket of a reader subscribed to `portal`'s changes.
async fn watching(url: &str, portal: &str, token: Option<&str>) -> Socket {
    let (mut ws, acked) = connect(url, token).await;
    assert!(acked, "a reader may subscribe, with a token or without");
    subscribe(&mut ws, "1", CHANGES, json!({"p": portal})).await;
    // The subscription is registered once the server has read the request;
    // a change made before would not be missed either way (see `after`).
    tokio::time::sleep(Duration::from_millis(300)).await;
    ws
}

/// The next event's payload of subscription `field`.
async fn next_event(ws: &mut Socket, field: &str) -> Value {
    let m = next_message(ws).await.expect("an event");
    assert_eq!(m["type"], "next", "{m:#}");
    assert!(m["payload"].get("errors").is_none(), "{m:#}");
    m["payload"]["data"][field].clone()
}

/// Two instances over one store: a change made through one reaches a
/// subscriber of the other, in order, with who made it; a subscriber that
/// reconnects with the first event's id gets the second again (no gap).
async fn a_change_on_one_instance_reaches_a_subscriber_of_another(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let other = second_instance(&srv).await;
    // A token (no role needed) to be told who made each change.
    let reader = srv.token_as("rita", &[]);
    let mut ws = watching(&other.url, &v.p, Some(&reader)).await;

    let contributor = srv.token_as("clara", &["contributor"]);
    let editor = srv.token_as("eddie", &["editor"]);
    srv.data(
        SUGGEST,
        suggestion(&v.p, "obj-1", &v.k1, &v.c1),
        Some(&contributor),
    )
    .await;
    let t = srv
        .gql(
            TRANSITION,
            json!({"k": key(&v.p, "obj-1", &v.k1, "clara"), "e": "SUGGESTED", "t": "ACCEPTED"}),
            Some(&editor),
        )
        .await;
    assert!(t.get("errors").is_none(), "{t:#}");
    // A change in another portal is not sent.
    srv.data(
        SUGGEST,
        suggestion(&v.q, "obj-2", &v.kq, &v.qc),
        Some(&contributor),
    )
    .await;

    let created = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(created["kind"], "CHANGED");
    assert_eq!(created["actor"], "clara");
    assert_eq!(created["previousStatus"], Value::Null);
    assert_eq!(created["assignment"]["status"], "SUGGESTED");
    assert_eq!(created["assignment"]["keyword"]["label"], "Bayern");
    let accepted = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(accepted["actor"], "eddie");
    assert_eq!(accepted["previousStatus"], "SUGGESTED");
    assert_eq!(accepted["assignment"]["status"], "ACCEPTED");
    assert!(created["id"].as_str() < accepted["id"].as_str());
    drop(ws);

    // Reconnect and resume after the first event: the second comes again.
    let (mut ws, _) = connect(&srv.url, None).await;
    subscribe(
        &mut ws,
        "1",
        CHANGES,
        json!({"p": v.p, "after": created["id"]}),
    )
    .await;
    let mut ids = Vec::new();
    loop {
        let e = next_event(&mut ws, "assignmentChanged").await;
        ids.push(e["id"].as_str().unwrap().to_owned());
        if e["id"] == accepted["id"] {
            break;
        }
    }
    assert!(ids.contains(&accepted["id"].as_str().unwrap().to_owned()));
    assert!(
        ids.iter()
            .all(|id| id.as_str() >= created["id"].as_str().unwrap())
    );

    // An `after` that is no event id is refused, and the socket stays usable.
    subscribe(&mut ws, "2", CHANGES, json!({"p": v.p, "after": "garbage"})).await;
    let refused = next_message(&mut ws).await.expect("an answer");
    assert_eq!(refused["id"], "2", "{refused:#}");
    assert!(
        refused.to_string().contains("BAD_USER_INPUT"),
        "{refused:#}"
    );
    // So is one from before the replay window: the client reloads.
    let old = "0000000000000-0000000000000000";
    subscribe(&mut ws, "3", CHANGES, json!({"p": v.p, "after": old})).await;
    let mut refused = next_message(&mut ws).await.expect("an answer");
    if refused["type"] == "complete" {
        refused = next_message(&mut ws).await.expect("an answer");
    }
    assert_eq!(refused["id"], "3", "{refused:#}");
    let text = refused.to_string();
    assert!(
        text.contains("REPLAY_TOO_OLD") && text.contains("--replay-window"),
        "{refused:#}"
    );
}

/// Contributor `creator` suggests a keyword for obj-1; `editor` (a token)
/// accepts it and runs the portal's release.
async fn suggest_accept_release(srv: &TestServer, v: &Vocabulary, creator: &str, editor: &str) {
    srv.data(
        SUGGEST,
        suggestion(&v.p, "obj-1", &v.k1, &v.c1),
        Some(&srv.token_as(creator, &["contributor"])),
    )
    .await;
    srv.data(
        TRANSITION,
        json!({"k": key(&v.p, "obj-1", &v.k1, creator), "e": "SUGGESTED", "t": "ACCEPTED"}),
        Some(editor),
    )
    .await;
    srv.data(
        "mutation($p: ID!) { runRelease(portalId: $p) { published } }",
        json!({"p": v.p}),
        Some(editor),
    )
    .await;
}

/// With a status, only changes into or out of it are sent; release runs
/// reach `releaseRunFinished` with their outcome.
async fn status_filters_and_release_runs(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let editor = srv.token_as("eddie", &["editor"]);
    let (mut ws, acked) = connect(&srv.url, Some(&editor)).await;
    assert!(acked);
    subscribe(&mut ws, "s", CHANGES, json!({"p": v.p, "s": "ACCEPTED"})).await;
    subscribe(
        &mut ws,
        "r",
        "subscription($p: ID!) { releaseRunFinished(portalId: $p) { actor run { successful published } } }",
        json!({"p": v.p}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    suggest_accept_release(&srv, &v, "clara", &editor).await;
    // The creation (SUGGESTED) is not sent; the acceptance is; the release
    // moves it out of ACCEPTED (no per-row events for a run), then its end.
    // Two subscriptions of one socket are not ordered between each other.
    let mut by_id = std::collections::BTreeMap::new();
    for _ in 0..2 {
        let m = next_message(&mut ws).await.unwrap();
        assert_eq!(m["type"], "next", "{m:#}");
        assert!(
            by_id
                .insert(m["id"].as_str().unwrap().to_owned(), m)
                .is_none()
        );
    }
    let accepted = &by_id["s"]["payload"]["data"]["assignmentChanged"];
    assert_eq!(accepted["assignment"]["status"], "ACCEPTED");
    assert_eq!(accepted["previousStatus"], "SUGGESTED");
    let run = &by_id["r"]["payload"]["data"]["releaseRunFinished"];
    assert_eq!(run["actor"], "eddie");
    assert_eq!(run["run"]["successful"], true);
    assert_eq!(run["run"]["published"], 1);
}

/// A refused token in connection_init closes the connection; nothing runs.
async fn a_bad_token_is_refused_at_connection_init(engine: Engine) {
    let srv = server(engine).await;
    let (mut ws, acked) = connect(&srv.url, Some("not-a-token")).await;
    assert!(!acked, "a bad token must not be acknowledged");
    assert!(next_message(&mut ws).await.is_none(), "the socket closes");
}

/// The server still answers a query.
async fn healthy(srv: &TestServer) {
    let d = srv.data("{ __typename }", json!({}), None).await;
    assert_eq!(d["__typename"], "Query");
}

/// Hostile clients of /graphql/ws: a message over `--max-body-bytes`, text
/// that is no protocol message, and a subscription before `connection_init`
/// each lose their socket; a socket over `--max-connections` is refused with
/// 503 until one closes. The server serves everyone else throughout.
async fn hostile_websocket_clients_are_cut_off(engine: Engine) {
    let limits = kartei::kernel::limits::Limits {
        max_body_bytes: 4096,
        max_connections: 3,
        ..test_limits()
    };
    let srv = server_with(engine, limits).await;

    // Too large: 5,000 bytes against a bound of 4,096.
    let (mut ws, acked) = connect(&srv.url, None).await;
    assert!(acked);
    let big = json!({"id": "1", "type": "subscribe", "payload": {"query": format!("{{ __typename }} #{}", "x".repeat(5000))}});
    let _ = ws.send(Message::text(big.to_string())).await;
    assert!(
        next_message(&mut ws).await.is_none(),
        "an oversized message must close the socket"
    );
    drop(ws);
    healthy(&srv).await;

    // Not a protocol message.
    let (mut ws, _) = connect(&srv.url, None).await;
    let _ = ws.send(Message::text("not json at all")).await;
    assert!(
        next_message(&mut ws).await.is_none(),
        "garbage must close the socket"
    );
    drop(ws);
    healthy(&srv).await;

    // A subscription before connection_init.
    let mut ws = open_when_free(&srv.url).await;
    subscribe(&mut ws, "1", CHANGES, json!({"p": "p"})).await;
    assert!(
        next_message(&mut ws).await.is_none(),
        "subscribing before init must close the socket"
    );
    drop(ws);
    healthy(&srv).await;

    // A subscription whose fragments double at each level: refused by its
    // expanded size before the engine walks it, and the socket stays open.
    let (mut ws, acked) = connect(&srv.url, None).await;
    assert!(acked);
    let bomb = format!(
        "subscription {{ ...F24 }} {}",
        doubling_fragments("Subscription", "__typename", 25)
    );
    subscribe(&mut ws, "1", &bomb, json!({})).await;
    let m = next_message(&mut ws).await.expect("an answer, not a close");
    let text = m.to_string();
    assert!(
        matches!(m["type"].as_str(), Some("error" | "next"))
            && text.contains("once its fragments are expanded"),
        "{m:#}"
    );
    ws.send(Message::text(r#"{"type":"ping"}"#))
        .await
        .expect("ping");
    // The refused operation's `complete` may come first.
    let mut pong = next_message(&mut ws).await.expect("the socket is open");
    if pong["type"] == "complete" {
        pong = next_message(&mut ws).await.expect("the socket is open");
    }
    assert_eq!(pong["type"], "pong", "{pong:#}");
    drop(ws);
    healthy(&srv).await;

    // One socket runs at most 100 operations at once: the next is refused
    // with a reason, and the socket stays open.
    let v = vocabulary(&srv.store).await;
    let (mut ws, acked) = connect(&srv.url, None).await;
    assert!(acked);
    for i in 0..100 {
        subscribe(&mut ws, &format!("s{i}"), CHANGES, json!({"p": v.p})).await;
    }
    subscribe(&mut ws, "over", CHANGES, json!({"p": v.p})).await;
    let m = next_message(&mut ws).await.expect("an answer, not a close");
    assert_eq!(m["id"], "over", "{m:#}");
    assert!(
        m.to_string()
            .contains("operations run at once on one socket"),
        "{m:#}"
    );
    drop(ws);
    healthy(&srv).await;

    // Three sockets are the bound; the fourth upgrade is refused, and
    // accepted again once one closes.
    let mut held = Vec::new();
    for _ in 0..3 {
        let (ws, acked) = connect(&srv.url, None).await;
        assert!(acked);
        held.push(ws);
    }
    match open(&srv.url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 503),
        Err(e) => panic!("the fourth socket was refused, but not with 503: {e}"),
        Ok(_) => panic!("a fourth socket was accepted over a bound of 3"),
    }
    healthy(&srv).await;
    drop(held.pop());
    // Accepted again once the server has noticed the close.
    let _again = open_when_free(&srv.url).await;
}

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
    let counted: DynStore = Arc::new(Counted::new(ts.store.clone()));
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

/// A subscription's DataLoaders live per event (issue 30): a keyword renamed
/// between two events shows its new label in the second, not the label the
/// first event's read cached.
async fn each_event_reads_the_vocabulary_as_it_is_when_it_comes(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let mut ws = watching(&srv.url, &v.p, None).await;
    let clara = srv.token_as("clara", &["contributor"]);
    srv.data(
        SUGGEST,
        suggestion(&v.p, "obj-1", &v.k1, &v.c1),
        Some(&clara),
    )
    .await;
    let created = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(created["assignment"]["keyword"]["label"], "Bayern");

    srv.data(
        "mutation($i: UpsertKeywordInput!) { upsertKeyword(input: $i) { label } }",
        json!({"i": {"id": v.k1, "label": "Freistaat Bayern", "categoryIds": [v.c1]}}),
        Some(&srv.admin()),
    )
    .await;
    srv.data(
        TRANSITION,
        json!({"k": key(&v.p, "obj-1", &v.k1, "clara"), "e": "SUGGESTED", "t": "ACCEPTED"}),
        Some(&srv.token_as("eddie", &["editor"])),
    )
    .await;
    let accepted = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(accepted["assignment"]["status"], "ACCEPTED");
    assert_eq!(
        accepted["assignment"]["keyword"]["label"], "Freistaat Bayern",
        "the second event read the keyword again"
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
    for minute in began / 60_000..=crashing.events().now_ms() / 60_000 {
        let page = ts
            .store
            .slice(
                &ASSIGNMENT_EVENTS,
                &Slice::partition(vec![minute.into()]).limit(10_000),
            )
            .await
            .unwrap();
        let found = page.rows.iter().any(|r| {
            r.text("top_level_category_id") == Some(v.p.as_str())
                && r.text("status") == Some("ACCEPTED")
        });
        assert!(!found, "the event's write failed");
    }

    // A restart: the new instance's feed drains the outbox once someone listens.
    let restarted = Assignments::new(ts.store.clone());
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
    let counted: DynStore = Arc::new(Counted::new(ts.store.clone()));
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

/// Who made a change (a token's subject: a user's name or e-mail address)
/// is sent to subscribers with a token only; an anonymous subscriber gets the
/// same events with `actor: null`, for assignment changes and release runs.
async fn event_actors_are_shown_to_subscribers_with_a_token(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let editor = srv.token_as("eddie@example.org", &["editor"]);
    let reader = srv.token_as("rita", &[]);
    let runs = "subscription($p: ID!) { releaseRunFinished(portalId: $p) { actor run { successful published } } }";
    let mut sockets = Vec::new();
    for token in [None, Some(reader.as_str())] {
        let (mut ws, acked) = connect(&srv.url, token).await;
        assert!(acked, "{token:?}");
        subscribe(&mut ws, "c", CHANGES, json!({"p": v.p})).await;
        subscribe(&mut ws, "r", runs, json!({"p": v.p})).await;
        sockets.push((ws, token.is_some()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    suggest_accept_release(&srv, &v, "clara@example.org", &editor).await;
    for (ws, signed_in) in &mut sockets {
        // Two changes (the release sends no per-row events) and one run, the
        // two subscriptions not ordered between each other.
        let (mut changes, mut runs) = (Vec::new(), Vec::new());
        while changes.len() < 2 || runs.is_empty() {
            let m = next_message(ws).await.expect("an event");
            assert_eq!(m["type"], "next", "{m:#}");
            assert!(m["payload"].get("errors").is_none(), "{m:#}");
            match m["id"].as_str() {
                Some("c") => changes.push(m["payload"]["data"]["assignmentChanged"].clone()),
                _ => runs.push(m["payload"]["data"]["releaseRunFinished"].clone()),
            }
        }
        assert_eq!(changes[0]["assignment"]["status"], "SUGGESTED");
        assert_eq!(changes[1]["assignment"]["status"], "ACCEPTED");
        assert_eq!(runs[0]["run"]["successful"], true);
        let actors = [
            &changes[0]["actor"],
            &changes[1]["actor"],
            &runs[0]["actor"],
        ];
        if *signed_in {
            assert_eq!(
                actors,
                [
                    &json!("clara@example.org"),
                    &json!("eddie@example.org"),
                    &json!("eddie@example.org")
                ]
            );
        } else {
            assert_eq!(actors, [&Value::Null, &Value::Null, &Value::Null]);
            let all = format!("{changes:?}{runs:?}");
            assert!(!all.contains("example.org"), "{all}");
        }
    }
}

both_engines!(
    event_actors_are_shown_to_subscribers_with_a_token,
    a_replay_reads_only_the_busy_minutes_of_its_window_under_one_budget,
    each_event_reads_the_vocabulary_as_it_is_when_it_comes,
    a_change_that_commits_reaches_the_feed_when_its_event_write_is_lost,
    a_burst_beyond_the_broadcast_does_not_make_every_subscriber_reread,
    an_event_that_becomes_visible_late_still_reaches_live_subscribers,
    a_change_on_one_instance_reaches_a_subscriber_of_another,
    hostile_websocket_clients_are_cut_off,
    status_filters_and_release_runs,
    a_bad_token_is_refused_at_connection_init,
);
