//! One client cannot take every socket or subscription place.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::support::{TestApp, run, test_limits};

/// A WebSocket to `url`'s /graphql/ws from the local address `from`, with
/// `token` in the upgrade request's Authorization header when given; the
/// refusal's status and body when the upgrade is refused.
async fn socket_from(
    url: &str,
    from: &str,
    token: Option<&str>,
) -> Result<crate::live::Socket, (u16, String)> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let mut request = format!("ws://{addr}/graphql/ws")
        .into_client_request()
        .unwrap();
    let h = request.headers_mut();
    h.insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    if let Some(t) = token {
        h.insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(stream);
    match tokio_tungstenite::client_async(request, stream).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err((
            r.status().as_u16(),
            String::from_utf8_lossy(r.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(e) => panic!("websocket: {e}"),
    }
}

/// Subscribes to changes of a portal as `id`.
async fn sub(ws: &mut crate::live::Socket, id: &str) {
    let q = "subscription { assignmentChanged(portalId: \"p\") { id } }";
    crate::live::subscribe(ws, id, q, json!({})).await;
}

/// Sends a ping and returns the next message (the pong).
async fn ping(ws: &mut crate::live::Socket) -> Value {
    use futures::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        r#"{"type":"ping"}"#,
    ))
    .await
    .unwrap();
    crate::live::next_message(ws).await.expect("a pong")
}

/// `connection_init` with `token` (or none): whether it was acknowledged.
async fn init(ws: &mut crate::live::Socket, token: Option<&str>) -> bool {
    use futures::SinkExt;
    let payload = token.map_or(
        json!({}),
        |t| json!({"Authorization": format!("Bearer {t}")}),
    );
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        json!({"type": "connection_init", "payload": payload}).to_string(),
    ))
    .await
    .unwrap();
    matches!(crate::live::next_message(ws).await, Some(m) if m["type"] == "connection_ack")
}

/// One client took every place: 100 sockets × 100 streams filled all 10,000
/// subscription places (the next caller got a misleading UNAVAILABLE), and
/// 512 sockets that only pinged filled every WebSocket place. Now sockets
/// without a token are bounded per client address, sockets with one per
/// subject, a share of the places is kept for callers with a token, and
/// every refusal names its limit.
#[test]
fn one_client_cannot_take_every_socket_or_subscription_place() {
    run(async {
        let limits = kartei::kernel::limits::Limits {
            max_connections: 8,
            reserved_for_tokens: 50,
            max_sockets_per_client: 2,
            max_sockets_per_subject: 2,
            max_subscriptions: 4,
            ..test_limits()
        };
        let app = TestApp::embedded().with_limits(limits).build().await;

        // A portal to subscribe to (a subscription to an unknown one ends at once).
        app.as_admin()
            .query(
                "mutation { upsertCategory(input: {id: \"p\", label: \"P\"}) { id } }",
                json!({}),
            )
            .await;

        // Per address: two sockets without a token, the third is refused.
        let mut a1 = socket_from(&app.url, "127.0.0.1", None).await.unwrap();
        let mut a2 = socket_from(&app.url, "127.0.0.1", None).await.unwrap();
        assert!(init(&mut a1, None).await && init(&mut a2, None).await);
        let (status, body) = socket_from(&app.url, "127.0.0.1", None)
            .await
            .err()
            .unwrap();
        assert_eq!(status, 429, "{body}");
        assert!(
            body.contains("TOO_MANY_SOCKETS") && body.contains("--max-sockets-per-client"),
            "{body}"
        );

        // Anonymous operations get what the reserve leaves: 2 of 4.
        sub(&mut a1, "1").await;
        sub(&mut a1, "2").await;
        // A socket handles its messages in order: once the ping is answered,
        // both subscriptions hold their places.
        assert_eq!(ping(&mut a1).await["type"], "pong");
        sub(&mut a2, "3").await;
        let m = crate::live::next_message(&mut a2).await.expect("an answer");
        assert_eq!(m["id"], "3", "{m}");
        assert!(m.to_string().contains("SUBSCRIPTIONS_FULL"), "{m}");

        // Another address is not held up by the first.
        let mut b1 = socket_from(&app.url, "127.0.0.2", None).await.unwrap();
        let mut b2 = socket_from(&app.url, "127.0.0.2", None).await.unwrap();
        assert!(init(&mut b1, None).await && init(&mut b2, None).await);

        // Four anonymous sockets are all the reserve leaves them: the next
        // one must show a token in connection_init, or it is closed.
        let mut late = socket_from(&app.url, "127.0.0.3", None).await.unwrap();
        assert!(
            !init(&mut late, None).await,
            "an anonymous socket took a reserved place"
        );
        drop(late);
        let anna = app.token_as("anna", &["editor"]);
        let mut curator = socket_from(&app.url, "127.0.0.3", None).await.unwrap();
        assert!(init(&mut curator, Some(&anna)).await);
        // Callers with a token are not held to the anonymous share.
        sub(&mut curator, "c").await;
        crate::live::subscribe(&mut curator, "q", "{ __typename }", json!({})).await;
        let m = crate::live::next_message(&mut curator)
            .await
            .expect("an answer");
        assert_eq!(
            (m["id"].as_str(), m["type"].as_str()),
            (Some("q"), Some("next")),
            "{m}"
        );

        // A token in the upgrade request counts for its subject, not for
        // the (full) address; a subject holds at most two.
        let ed = app.token_as("ed", &["editor"]);
        let mut e1 = socket_from(&app.url, "127.0.0.1", Some(&ed)).await.unwrap();
        let mut e2 = socket_from(&app.url, "127.0.0.1", Some(&ed)).await.unwrap();
        assert!(init(&mut e1, Some(&ed)).await && init(&mut e2, Some(&ed)).await);
        let (status, body) = socket_from(&app.url, "127.0.0.1", Some(&ed))
            .await
            .err()
            .unwrap();
        assert_eq!(status, 429, "{body}");
        assert!(body.contains("--max-sockets-per-subject"), "{body}");
    });
}
