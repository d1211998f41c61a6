//! Live updates: GraphQL subscriptions over WebSocket (graphql-transport-ws
//! at /graphql/ws), fed by the assignment change feed that every instance
//! tails, on both engines.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::assignments::{SUGGEST, TRANSITION, Vocabulary, key, suggestion, vocabulary};
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
    let (mut ws, acked) = connect(&other.url, Some(&reader)).await;
    assert!(acked);
    subscribe(&mut ws, "1", CHANGES, json!({"p": v.p})).await;
    // The subscription is registered once the server has read the request;
    // a change made before would not be missed either way (see `after`).
    tokio::time::sleep(Duration::from_millis(300)).await;

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
    let limits = kartei::config::Limits {
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
    a_change_on_one_instance_reaches_a_subscriber_of_another,
    hostile_websocket_clients_are_cut_off,
    status_filters_and_release_runs,
    a_bad_token_is_refused_at_connection_init,
);
