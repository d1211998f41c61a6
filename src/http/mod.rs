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
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::app::App;
use crate::auth::{Auth, Authenticated};
use crate::bounds::{body_error, content_length};
use crate::error::ApiError;
use crate::metrics;
use crate::themes::loaders::ThemeLoaders;

/// Every route: GraphQL and the service routes here, each domain's REST
/// routes merged in; then the body bounds, the bearer token read once, metrics.
pub fn router(state: Arc<App>) -> Router {
    let body_limit = state.limits.max_body_bytes;
    let body_idle = Duration::from_secs(state.limits.body_timeout.max(1));
    Router::new()
        .route("/graphql", post(graphql))
        .route("/graphiql", get(graphiql))
        .route("/schema.graphql", get(schema_sdl))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .merge(crate::binaries::http::routes(
            body_limit as u64,
            state.binaries.config().max_bytes,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(body_idle))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn(track))
        .with_state(state)
}

/// Reads the bearer token once per request: handlers take the outcome from
/// the request's extensions (`Caller`), so a route that needs no caller never
/// fails on a bad token.
async fn authenticate(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let outcome = read_principal(&app.auth, req.headers()).map_err(|e| e.message());
    req.extensions_mut().insert(Authenticated(outcome));
    next.run(req).await
}

fn read_principal(auth: &Auth, headers: &HeaderMap) -> Result<crate::auth::Principal, ApiError> {
    let header = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("invalid"));
    auth.principal(header)
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
pub fn error_response(e: ApiError) -> Response {
    metrics::graphql_error(e.code());
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let body = serde_json::json!({
        "data": null,
        "errors": [{ "message": e.message(), "extensions": { "code": e.code() } }]
    });
    (status, Json(body)).into_response()
}

async fn graphql(
    State(state): State<Arc<App>>,
    axum::Extension(Authenticated(caller)): axum::Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let principal = match caller {
        Ok(p) => p,
        Err(m) => return error_response(ApiError::InvalidToken(m)),
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
        crate::app::sdl(),
    )
}

async fn healthz(State(state): State<Arc<App>>) -> Response {
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
