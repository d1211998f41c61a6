//! The HTTP surface: `POST /graphql`, `GET /graphiql`, `GET /schema.graphql`,
//! `GET /healthz`, `GET /metrics`. `router(state)` builds it so tests can serve
//! it; `serve` runs it with the connection bounds. Every body is read with a
//! size bound (refused at once when `Content-Length` already says too much)
//! and an idle timeout between its pieces.

pub mod multipart;
pub mod serve;

pub use serve::{ConnectionLimits, serve};

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_graphql::http::GraphiQLSource;
use async_graphql::{ErrorExtensionValues, Value as GqlValue};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};

use crate::auth::Auth;
use crate::binaries::http as binary_routes;
use crate::binaries::service::Binaries;
use crate::config::Limits;
use crate::error::ApiError;
use crate::graphql::KarteiSchema;
use crate::metrics;
use crate::store::DynStore;
use crate::themes::loaders::ThemeLoaders;
use crate::themes::service::Themes;

pub struct AppState {
    pub schema: KarteiSchema,
    pub auth: Auth,
    pub store: DynStore,
    pub themes: Themes,
    pub binaries: Binaries,
    pub limits: Limits,
}

impl AppState {
    pub fn new(store: DynStore, auth: Auth, limits: Limits, binaries: Binaries) -> Arc<Self> {
        let themes = Themes::new(store.clone());
        let schema = crate::graphql::build(
            Some(crate::graphql::Services {
                themes: themes.clone(),
                assignments: crate::assignments::service::Assignments::new(store.clone()),
                binaries: binaries.clone(),
            }),
            &limits,
        );
        Arc::new(AppState {
            schema,
            auth,
            store,
            themes,
            binaries,
            limits,
        })
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let body_limit = state.limits.max_body_bytes;
    // Uploads stop themselves at the size limit; this only bounds the form around the file.
    let upload_limit = usize::try_from(state.binaries.config().max_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(1 << 20);
    let body_idle = Duration::from_secs(state.limits.body_timeout.max(1));
    Router::new()
        .route("/graphql", post(graphql))
        .route(
            "/binaries",
            put(binary_routes::register).layer(middleware::from_fn_with_state(
                body_limit as u64,
                refuse_announced_oversize,
            )),
        )
        .route(
            "/binaries/upload",
            post(binary_routes::upload)
                .layer(DefaultBodyLimit::max(upload_limit))
                .layer(middleware::from_fn_with_state(
                    upload_limit as u64,
                    refuse_announced_oversize,
                )),
        )
        .route(
            "/binaries/context/{context}",
            delete(binary_routes::delete_context),
        )
        .route(
            "/binaries/reference/{reference}",
            delete(binary_routes::delete_reference),
        )
        .route("/binary/logs/{context}", get(binary_routes::context_logs))
        .merge(
            Router::new()
                .route("/iiif/3/{reference}", get(binary_routes::iiif_base))
                .route(
                    "/iiif/3/{reference}/info.json",
                    get(binary_routes::iiif_info),
                )
                .route(
                    "/iiif/3/{reference}/{region}/{size}/{rotation}/{quality}",
                    get(binary_routes::iiif_image),
                )
                .layer(middleware::map_response(binary_routes::cors)),
        )
        .route("/binary/{reference}", get(binary_routes::original))
        .route(
            "/binary/{reference}/full/{size}/default.jpg",
            get(binary_routes::scaled),
        )
        .route("/graphiql", get(graphiql))
        .route("/schema.graphql", get(schema_sdl))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(body_idle))
        .layer(middleware::from_fn(track))
        .with_state(state)
}

/// The announced length of a request body, if any.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// 413 before reading a byte when `Content-Length` is over the route's limit.
async fn refuse_announced_oversize(State(limit): State<u64>, req: Request, next: Next) -> Response {
    match content_length(req.headers()) {
        Some(n) if n > limit => error_response(ApiError::PayloadTooLarge(format!(
            "the request body ({n} bytes) is larger than {limit} bytes"
        ))),
        _ => next.run(req).await,
    }
}

/// Why a request body could not be read: too large, too slow, or cut off.
pub fn body_error(e: impl Into<Box<dyn std::error::Error + Send + Sync>>, limit: u64) -> ApiError {
    let e: Box<dyn std::error::Error + Send + Sync> = e.into();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    while let Some(c) = cause {
        if c.is::<http_body_util::LengthLimitError>() {
            return ApiError::PayloadTooLarge(format!(
                "the request body is larger than {limit} bytes"
            ));
        }
        if c.is::<tower_http::timeout::TimeoutError>() {
            return ApiError::Timeout(
                "the request body stopped arriving (body idle timeout)".into(),
            );
        }
        cause = c.source();
    }
    ApiError::bad_input("the request body broke off")
}

/// Counts every request by route and status, with its latency.
async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let started = Instant::now();
    let resp = next.run(req).await;
    metrics::http_request(&route, resp.status().as_u16(), started.elapsed());
    resp
}

/// A GraphQL-shaped error response for failures before execution.
fn error_response(e: ApiError) -> Response {
    metrics::graphql_error(e.code());
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let body = serde_json::json!({
        "data": null,
        "errors": [{ "message": e.message(), "extensions": { "code": e.code() } }]
    });
    (status, Json(body)).into_response()
}

async fn graphql(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let auth_header = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("invalid"));
    let principal = match state.auth.principal(auth_header) {
        Ok(p) => p,
        Err(e) => return error_response(e),
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let max_body = state.limits.max_body_bytes as u64;
    let request = if content_type.starts_with("multipart/form-data") {
        let limits = multipart::MultipartLimits {
            max_text_bytes: max_body,
            max_file_bytes: state.binaries.config().max_bytes,
        };
        match multipart::read(content_type, body, &principal, &limits).await {
            Ok(r) => r,
            Err(e) => return error_response(e),
        }
    } else {
        if let Some(n) = content_length(&headers).filter(|n| *n > max_body) {
            return error_response(ApiError::PayloadTooLarge(format!(
                "the request body ({n} bytes) is larger than {max_body} bytes"
            )));
        }
        let body = match axum::body::to_bytes(body, state.limits.max_body_bytes).await {
            Ok(b) => b,
            Err(e) => return error_response(body_error(e, max_body)),
        };
        match serde_json::from_slice::<async_graphql::Request>(&body) {
            Ok(r) => r,
            Err(e) => {
                return error_response(ApiError::bad_input(format!(
                    "the body must be a GraphQL request as JSON ({{\"query\": ...}}): {e}"
                )));
            }
        }
    };
    let request = request.data(principal).data(ThemeLoaders::new(
        &state.themes,
        Duration::from_millis(state.limits.batch_window_ms),
    ));
    let mut response = state.schema.execute(request).await;
    // Parse, validation and limit errors come from the engine without a code.
    for err in &mut response.errors {
        let ext = err
            .extensions
            .get_or_insert_with(ErrorExtensionValues::default);
        if ext.get("code").is_none() {
            ext.set("code", GqlValue::from("BAD_USER_INPUT"));
            metrics::graphql_error("BAD_USER_INPUT");
        }
    }
    Json(response).into_response()
}

async fn graphiql() -> Html<String> {
    Html(
        GraphiQLSource::build()
            .endpoint("/graphql")
            .title("kartei GraphiQL")
            .finish(),
    )
}

async fn schema_sdl() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        crate::graphql::sdl(),
    )
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    match state.store.ping().await {
        Ok(()) => {
            Json(serde_json::json!({"status": "ok", "store": state.store.engine()})).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "health check: store does not answer");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({"status": "unavailable", "store": state.store.engine()})),
            )
                .into_response()
        }
    }
}

async fn metrics_text() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics::render(),
    )
}
