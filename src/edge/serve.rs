//! The connection loop: hyper's HTTP/1 server with the bounds that axum's
//! `serve` leaves out. A client gets `header_timeout` to send its request head
//! (also the idle time of a kept-alive connection), at most `max_connections`
//! are served at once (the rest wait in the listen backlog), and on shutdown
//! the loop stops accepting and lets open requests finish. A client that
//! stops taking a response's bytes for `write_timeout` loses the connection
//! (hyper has no write timeout: the socket is wrapped).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    /// How long a write to the client may stay blocked (its receive window
    /// full) before the connection is closed.
    pub write_timeout: Duration,
    /// How long open requests may still run after a shutdown signal.
    pub drain: Duration,
}

impl ConnectionLimits {
    /// The bounds the limits flags describe.
    pub fn from_limits(limits: &crate::kernel::limits::Limits) -> Self {
        ConnectionLimits {
            max_connections: limits.max_connections,
            header_timeout: Duration::from_secs(limits.header_timeout.max(1)),
            write_timeout: Duration::from_secs(limits.write_timeout.max(1)),
            drain: Duration::from_secs(30),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let max = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max));
    // hyper-util's GracefulShutdown does not take connections that may be
    // upgraded (WebSockets), so each connection watches `stop` itself, and
    // the drain waits for every connection's slot to come back.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => match s { Ok(s) => s, Err(_) => break },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        // Only writes are timed: an idle kept-alive connection is bounded by
        // the header timeout, and an idle WebSocket may wait for events.
        let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.write_timeout));
        let stream = Box::pin(stream);
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(
                TokioIo::new(stream),
                // The peer address rides in every request's extensions (as
                // axum's `ConnectInfo`): the limits kept per client read it.
                TowerToHyperService::new(router.clone().map_request(
                    move |mut req: axum::http::Request<hyper::body::Incoming>| {
                        req.extensions_mut()
                            .insert(axum::extract::ConnectInfo(peer));
                        req
                    },
                )),
            )
            // WebSockets (GraphQL subscriptions) take the connection over.
            .with_upgrades();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let mut stopping = false;
            loop {
                tokio::select! {
                    r = connection.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    _ = stop.changed(), if !stopping => {
                        stopping = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    if tokio::time::timeout(limits.drain, slots.acquire_many(max as u32))
        .await
        .is_err()
    {
        tracing::warn!("requests still open at shutdown were cut off");
    }
}
