//! Hostile WebSocket clients lose their socket; the server serves everyone else.

use futures::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::{CHANGES, connect, next_message, open, open_when_free, subscribe};
use crate::both_engines;
use crate::support::{
    Engine, TestApp, TestServer, doubling_fragments, server_with, test_limits, vocabulary,
};

/// The server still answers a query.
async fn healthy(app: &TestServer) {
    let d = app.data("{ __typename }", json!({}), None).await;
    assert_eq!(d["__typename"], "Query");
}

/// A refused token in connection_init closes the connection; nothing runs.
async fn a_bad_token_is_refused_at_connection_init(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let (mut ws, acked) = connect(&app.url, Some("not-a-token")).await;
    assert!(!acked, "a bad token must not be acknowledged");
    assert!(next_message(&mut ws).await.is_none(), "the socket closes");
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

both_engines!(
    a_bad_token_is_refused_at_connection_init,
    hostile_websocket_clients_are_cut_off,
);
