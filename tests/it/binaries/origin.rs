//! A web server standing in for the sites binaries are fetched from: images,
//! errors, redirects, a changing image, and a private one that answers with
//! cookies and credentials.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get as route_get;

use super::{bomb, jpeg, png};
use crate::support::uid;

pub(super) struct Origin {
    pub(super) base: String,
    pub(super) hits: Arc<AtomicUsize>,
    pub(super) version: Arc<AtomicUsize>,
    /// The `Authorization` headers `/private.jpg` was sent.
    pub(super) authorizations: Arc<std::sync::Mutex<Vec<String>>>,
}

#[derive(Clone)]
struct OriginState {
    hits: Arc<AtomicUsize>,
    /// Which version `/changing.jpg` serves (its ETag is `"v<n>"`).
    version: Arc<AtomicUsize>,
    landscape: Arc<Vec<u8>>,
    /// This origin's own image (no other test's content is folded into it).
    private: Arc<Vec<u8>>,
    authorizations: Arc<std::sync::Mutex<Vec<String>>>,
    ip: String,
    port: u16,
}

/// The password in the URLs of the credential tests.
pub(super) const URL_PASSWORD: &str = "hunter2-in-the-url";

pub(super) async fn origin() -> Origin {
    let ip = crate::support::origin_ip();
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let salt = u32::from_str_radix(&uid()[..6], 16).unwrap();
    let state = OriginState {
        hits: Arc::new(AtomicUsize::new(0)),
        version: Arc::new(AtomicUsize::new(1)),
        landscape: Arc::new(jpeg(1600, 1200)),
        private: Arc::new(jpeg(64 + salt % 1000, 48 + (salt / 1000) % 200)),
        authorizations: Arc::default(),
        ip: ip.clone(),
        port,
    };
    let hits = state.hits.clone();
    let version = state.version.clone();
    let authorizations = state.authorizations.clone();
    let app = axum::Router::new()
        .route(
            "/changing.jpg",
            route_get(
                |State(s): State<OriginState>, headers: axum::http::HeaderMap| async move {
                    let v = s.version.load(Ordering::SeqCst);
                    let etag = format!("\"v{v}\"");
                    if headers
                        .get(header::IF_NONE_MATCH)
                        .and_then(|h| h.to_str().ok())
                        == Some(etag.as_str())
                    {
                        return StatusCode::NOT_MODIFIED.into_response();
                    }
                    let body = if v == 1 {
                        jpeg(640, 480)
                    } else {
                        jpeg(300, 600)
                    };
                    (
                        [
                            (header::CONTENT_TYPE, "image/jpeg".to_owned()),
                            (header::ETAG, etag),
                        ],
                        body,
                    )
                        .into_response()
                },
            ),
        )
        .route(
            "/landscape.jpg",
            route_get(|State(s): State<OriginState>| async move {
                s.hits.fetch_add(1, Ordering::SeqCst);
                ([(header::CONTENT_TYPE, "image/jpeg")], s.landscape.to_vec())
            }),
        )
        .route(
            "/copy-of-landscape.jpg",
            route_get(|State(s): State<OriginState>| async move {
                ([(header::CONTENT_TYPE, "image/jpeg")], s.landscape.to_vec())
            }),
        )
        .route(
            "/portrait.png",
            route_get(|| async { ([(header::CONTENT_TYPE, "image/png")], png(300, 900)) }),
        )
        .route(
            "/missing.jpg",
            route_get(|| async { StatusCode::NOT_FOUND }),
        )
        .route(
            "/flaky.jpg",
            route_get(|| async { StatusCode::SERVICE_UNAVAILABLE }),
        )
        .route(
            "/text.jpg",
            route_get(|| async { "<html>not an image</html>" }),
        )
        .route("/bomb.png", route_get(|| async { bomb() }))
        .route("/huge.jpg", route_get(|| async { vec![0xFFu8; 9 << 20] }))
        .route(
            "/to-private",
            route_get(|| async { Redirect::temporary("http://10.255.255.1/x.jpg") }),
        )
        .route(
            "/to-localhost",
            route_get(|State(s): State<OriginState>| async move {
                Redirect::temporary(&format!("http://localhost:{}/landscape.jpg", s.port))
            }),
        )
        .route(
            "/to-landscape",
            route_get(|| async { Redirect::temporary("/landscape.jpg") }),
        )
        .route(
            "/private.jpg",
            route_get(
                |State(s): State<OriginState>, headers: axum::http::HeaderMap| async move {
                    if let Some(a) = headers.get(header::AUTHORIZATION) {
                        let a = String::from_utf8_lossy(a.as_bytes()).into_owned();
                        s.authorizations.lock().unwrap().push(a);
                    }
                    (
                        [
                            (header::CONTENT_TYPE, "image/jpeg"),
                            (header::SET_COOKIE, "session=s3cr3t-cookie; HttpOnly"),
                            (
                                header::HeaderName::from_static("set-cookie2"),
                                "old=s3cr3t-cookie",
                            ),
                            (header::WWW_AUTHENTICATE, "Basic realm=\"s3cr3t-realm\""),
                            (header::PROXY_AUTHENTICATE, "Basic realm=\"s3cr3t-realm\""),
                            (header::AUTHORIZATION, "Bearer s3cr3t-token"),
                            (
                                header::HeaderName::from_static("x-served-by"),
                                "kartei-test",
                            ),
                        ],
                        s.private.to_vec(),
                    )
                },
            ),
        )
        .route(
            "/to-credentials/{target}",
            route_get(
                |State(s): State<OriginState>, Path(target): Path<String>| async move {
                    Redirect::temporary(&format!(
                        "http://someone:{URL_PASSWORD}@{}:{}/{target}",
                        s.ip, s.port
                    ))
                },
            ),
        )
        .with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Origin {
        base: format!("http://{ip}:{port}"),
        hits,
        version,
        authorizations,
    }
}
