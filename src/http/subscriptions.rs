//! GraphQL subscriptions over WebSocket at `/graphql/ws` (the
//! `graphql-transport-ws` protocol, and the older `graphql-ws`). Browsers
//! cannot set headers on a WebSocket, so the bearer token comes in
//! `connection_init`'s payload (`{"Authorization": "Bearer ..."}`); a refused
//! token closes the connection. Every operation's relations go through its own
//! DataLoaders (a subscription's, each event's own), batched as a request's are. Sockets are bounded by
//! `--max-connections` (`App::sockets`; the next upgrade is a 503), messages
//! by `--max-body-bytes`, and a client that sends nothing for 60 s (not even
//! `connection_init` or a ping) is dropped by async-graphql's keep-alive timer.

use std::any::TypeId;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::futures_util::stream::BoxStream;
use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql::{Data, Executor, Request, Response};
use async_graphql_axum::{GraphQLProtocol, GraphQLWebSocket};
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::{IntoResponse, Response as HttpResponse};
use futures::{FutureExt, StreamExt};

use crate::app::App;
use crate::graphql::batch::{Batches, Fresh};
use crate::graphql::limits::refusal;
use tokio::sync::Semaphore;

/// `GET /graphql/ws`: the upgrade.
pub async fn ws(
    State(app): State<Arc<App>>,
    protocol: GraphQLProtocol,
    upgrade: WebSocketUpgrade,
) -> HttpResponse {
    let Ok(socket_place) = app.sockets.clone().try_acquire_owned() else {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "too many open subscriptions connections",
        )
            .into_response();
    };
    let max = app.limits.max_body_bytes;
    let auth = app.auth.clone();
    let executor = Live(app);
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            let _place = socket_place;
            GraphQLWebSocket::new(socket, executor, protocol)
                .on_connection_init(move |payload| async move {
                    let header = ["Authorization", "authorization"]
                        .iter()
                        .find_map(|k| payload.get(*k))
                        .and_then(|v| v.as_str());
                    let principal = auth
                        .principal(header)
                        .map_err(|e| async_graphql::Error::new(e.message()))?;
                    let mut data = Data::default();
                    data.insert(principal);
                    data.insert(SocketOperations(Arc::new(Semaphore::new(
                        MAX_OPERATIONS_PER_SOCKET,
                    ))));
                    Ok(data)
                })
                .keepalive_timeout(Duration::from_secs(60))
                .serve()
                .await
        })
        .into_response()
}

/// Operations one socket may have running (subscriptions open, queries not
/// yet answered). async-graphql keeps a socket's streams in a map without a
/// bound, so one client could hold every subscription place of the server.
const MAX_OPERATIONS_PER_SOCKET: usize = 100;

/// A socket's places for operations, in its session data.
struct SocketOperations(Arc<Semaphore>);

/// DataLoaders made afresh for each event of a subscription, so that no
/// cache outlives its event (a query or mutation over the socket is one
/// execution: the same as per operation).
fn per_event_loaders(app: &Arc<App>, batches: &Batches) -> Fresh {
    let app = app.clone();
    let batches = batches.clone();
    Fresh(Arc::new(move || {
        super::graphql::with_loaders(&app, Request::new(""), &batches).data
    }))
}

/// The schema, with per-operation DataLoaders.
#[derive(Clone)]
struct Live(Arc<App>);

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
                    "BAD_USER_INPUT",
                );
                return futures::stream::iter([Response::from_errors(vec![e])]).boxed();
            }
            Some(Ok(place)) => Some(place),
            None => None,
        };
        async move {
            match app.gate.admit(request).await {
                Err(e) => futures::stream::iter([Response::from_errors(vec![e])]).boxed(),
                Ok((request, ty)) => {
                    let batches = Batches::default();
                    let request = super::graphql::with_loaders(&app, request, &batches);
                    let request = request.data(per_event_loaders(&app, &batches));
                    let mut responses = batches
                        .drive(app.live_schema.execute_stream_with_session_data(
                            request,
                            session_data.unwrap_or_default(),
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
                        match tokio::time::timeout(limit, responses.next()).await {
                            Ok(r) => r.unwrap_or_default(),
                            Err(_) => crate::graphql::limits::timed_out(limit),
                        }
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
