//! GraphQL subscriptions over WebSocket at `/graphql/ws` (the
//! `graphql-transport-ws` protocol, and the older `graphql-ws`). Browsers
//! cannot set headers on a WebSocket, so the bearer token comes in
//! `connection_init`'s payload (`{"Authorization": "Bearer ..."}`); a refused
//! token closes the connection. Every operation's relations go through its own
//! DataLoaders (a subscription's, each event's own), batched as a
//! request's are. Sockets are bounded in all, per
//! client address and per token subject (`http::sockets`; a refused upgrade
//! is a 429 or 503 naming the limit), messages by `--max-body-bytes`, and a
//! client that sends nothing for 60 s (not even `connection_init` or a ping)
//! is dropped by async-graphql's keep-alive timer. A token is good for the
//! socket until it expires: each operation checks it first, and at its
//! expiry the socket is closed with 4403.

use std::any::TypeId;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::futures_util::stream::BoxStream;
use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use std::net::SocketAddr;

use async_graphql::parser::types::OperationType;
use async_graphql::{Data, Executor, Request, Response};
use async_graphql_axum::{GraphQLProtocol, GraphQLWebSocket};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Response as HttpResponse};
use futures::{FutureExt, SinkExt, StreamExt};

use super::sockets::SocketPlace;
use crate::api::caller::Authenticated;
use crate::api::graphql::batch::{Batches, Fresh};
use crate::api::graphql::gate::refusal;
use crate::edge::AppState;
use crate::kernel::roles::Principal;
use tokio::sync::Semaphore;

/// `GET /graphql/ws`: the upgrade, if the client may hold another socket.
pub async fn ws(
    State(app): State<Arc<AppState>>,
    extensions: axum::http::Extensions,
    protocol: GraphQLProtocol,
    upgrade: WebSocketUpgrade,
) -> HttpResponse {
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|p| p.0.ip());
    // A token in the upgrade request's header (clients other than browsers
    // can send one) counts for its subject from the start.
    let caller = match extensions.get::<Authenticated>() {
        Some(Authenticated(Ok(p))) => p.clone(),
        _ => Principal::default(),
    };
    let place = match app.sockets.admit(peer, &caller) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let max = app.limits.max_body_bytes;
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| serve_socket(app, socket, protocol, place))
        .into_response()
}

/// The close code of a socket whose token expired (the protocol's Forbidden).
pub const CLOSE_TOKEN_EXPIRED: u16 = 4403;

/// Runs the protocol on `socket` until the client leaves or the token named
/// in `connection_init` expires; then the socket is closed with
/// [`CLOSE_TOKEN_EXPIRED`] and every operation on it stops.
async fn serve_socket(
    app: Arc<AppState>,
    socket: WebSocket,
    protocol: GraphQLProtocol,
    place: SocketPlace,
) {
    let auth = app.auth.clone();
    let place = Arc::new(std::sync::Mutex::new(place));
    // The token's last valid second, once connection_init has named it.
    let (valid_until_tx, mut valid_until) = tokio::sync::watch::channel(None::<u64>);
    let (mut socket_sink, socket_stream) = socket.split();
    // async-graphql writes into this channel; the loop below forwards to the
    // socket, so that the socket is still ours to close when the token expires.
    let (tx, mut rx) = futures::channel::mpsc::channel::<Message>(16);
    let protocol_run = GraphQLWebSocket::new_with_pair(tx, socket_stream, Live(app), protocol)
        .on_connection_init(move |payload| async move {
            let header = ["Authorization", "authorization"]
                .iter()
                .find_map(|k| payload.get(*k))
                .and_then(|v| v.as_str());
            let principal = auth
                .principal(header)
                .map_err(|e| async_graphql::Error::new(e.message()))?;
            place
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .sign_in(&principal)
                .map_err(async_graphql::Error::new)?;
            let _ = valid_until_tx.send(principal.valid_until);
            let mut data = Data::default();
            data.insert(principal);
            data.insert(SocketOperations(Arc::new(Semaphore::new(
                MAX_OPERATIONS_PER_SOCKET,
            ))));
            // The place lives as long as the session's data.
            data.insert(HeldPlace(place));
            Ok(data)
        })
        .keepalive_timeout(Duration::from_secs(60))
        .serve();
    let forward = async {
        while let Some(message) = rx.next().await {
            if socket_sink.send(message).await.is_err() {
                break;
            }
        }
    };
    let expiry = async {
        let until = loop {
            if let Some(t) = *valid_until.borrow_and_update() {
                break t;
            }
            if valid_until.changed().await.is_err() {
                // connection_init was refused or never came: no expiry.
                std::future::pending::<()>().await;
            }
        };
        let left = until.saturating_sub(jsonwebtoken::get_current_timestamp());
        // One second on: the token is good through `until` itself.
        tokio::time::sleep(Duration::from_secs(left.saturating_add(1))).await;
    };
    let expired = tokio::select! {
        _ = futures::future::join(protocol_run, forward) => false,
        () = expiry => true,
    };
    if expired {
        let _ = socket_sink
            .send(Message::Close(Some(CloseFrame {
                code: CLOSE_TOKEN_EXPIRED,
                reason: "the token expired: connect again with a new one".into(),
            })))
            .await;
    }
}

/// Keeps a socket's place while its session lives.
struct HeldPlace(#[allow(dead_code)] Arc<std::sync::Mutex<SocketPlace>>);

/// Operations one socket may have running (subscriptions open, queries not
/// yet answered). async-graphql keeps a socket's streams in a map without a
/// bound, so one client could hold every subscription place of the server.
const MAX_OPERATIONS_PER_SOCKET: usize = 100;

/// A socket's places for operations, in its session data.
struct SocketOperations(Arc<Semaphore>);

/// DataLoaders made afresh for each event of a subscription, so that no
/// cache outlives its event (a query or mutation over the socket is one
/// execution: the same as per operation).
fn per_event_loaders(app: &Arc<AppState>, batches: &Batches) -> Fresh {
    let app = app.clone();
    let batches = batches.clone();
    Fresh(Arc::new(move || {
        super::graphql::with_loaders(&app, Request::new(""), &batches).data
    }))
}

/// The schema, with per-operation DataLoaders.
#[derive(Clone)]
struct Live(Arc<AppState>);

impl Executor for Live {
    async fn execute(&self, request: Request) -> Response {
        let batches = Batches::default();
        let request = super::graphql::with_loaders(&self.0, request, &batches);
        batches
            .drive(self.0.gate.execute(&self.0.live_schema, request))
            .await
    }

    fn execute_stream(
        &self,
        request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        // The gate first (persisted query, bounds); a refusal is the
        // stream's one response. A query or mutation sent over the socket
        // (the protocol allows it) has the deadline it has over HTTP; a
        // subscription is meant to stay open.
        let app = self.0.clone();
        let principal = session_data
            .as_ref()
            .and_then(|d| d.get(&TypeId::of::<Principal>()))
            .and_then(|p| p.downcast_ref::<Principal>());
        if principal.is_some_and(|p| p.expired(jsonwebtoken::get_current_timestamp())) {
            let e = refusal(
                "the token expired: connect again with a new one".into(),
                "UNAUTHENTICATED",
            );
            return futures::stream::iter([Response::from_errors(vec![e])]).boxed();
        }
        // Anonymous operations share what the reserve leaves them.
        let anonymous_place = if principal.is_none_or(|p| p.sub.is_none()) {
            match app.sockets.anonymous_operation() {
                Some(p) => Some(p),
                None => {
                    let e = refusal(
                        format!(
                            "the {} subscription places open to callers without a token are taken (--reserved-for-tokens); sign in or try later",
                            app.sockets.anonymous_operations_limit()
                        ),
                        "SUBSCRIPTIONS_FULL",
                    );
                    return futures::stream::iter([Response::from_errors(vec![e])]).boxed();
                }
            }
        } else {
            None
        };
        let place = match session_data
            .as_ref()
            .and_then(|d| d.get(&TypeId::of::<SocketOperations>()))
            .and_then(|o| o.downcast_ref::<SocketOperations>())
            .map(|o| o.0.clone().try_acquire_owned())
        {
            Some(Err(_)) => {
                let e = refusal(
                    format!(
                        "at most {MAX_OPERATIONS_PER_SOCKET} operations run at once on one socket; complete one first"
                    ),
                    "TOO_MANY_OPERATIONS",
                );
                return futures::stream::iter([Response::from_errors(vec![e])]).boxed();
            }
            Some(Ok(place)) => Some((place, anonymous_place)),
            None => None,
        };
        async move {
            match app.gate.admit(request).await {
                Err(e) => futures::stream::iter([Response::from_errors(vec![e])]).boxed(),
                Ok((request, ty)) => {
                    let batches = Batches::default();
                    let budget = app.gate.response_budget();
                    let mut request = super::graphql::with_loaders(&app, request, &batches);
                    request = request.data(per_event_loaders(&app, &batches));
                    if ty != OperationType::Subscription {
                        request = request.data(budget.clone());
                    }
                    let mut responses = batches
                        .drive(async_graphql::Executor::execute_stream(
                            &app.live_schema,
                            request,
                            Some(session_data.unwrap_or_default()),
                        ))
                        .boxed();
                    let Some(limit) = app.gate.deadline(ty) else {
                        // The place is the stream's until it ends or is stopped.
                        return responses
                            .inspect(move |_| {
                                let _ = &place;
                            })
                            .boxed();
                    };
                    async move {
                        let _place = place;
                        let answer = async { responses.next().await.unwrap_or_default() };
                        app.gate.bounded(limit, &budget, answer).await
                    }
                    .into_stream()
                    .boxed()
                }
            }
        }
        .flatten_stream()
        .boxed()
    }
}
