//! Live updates: GraphQL subscriptions over WebSocket (graphql-transport-ws
//! at /graphql/ws), fed by the assignment change feed that every instance
//! tails, on both engines.

mod feed;
mod sockets;
mod subscriptions;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

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
