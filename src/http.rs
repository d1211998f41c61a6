//! The HTTP surface: `POST /graphql`, `GET /graphiql`, `GET /schema.graphql`,
//! `GET /healthz`, `GET /metrics`. `router(state)` builds it so tests can serve it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_graphql::http::GraphiQLSource;
use async_graphql::{ErrorExtensionValues, Value as GqlValue};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::auth::Auth;
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
    pub limits: Limits,
}

impl AppState {
    pub fn new(store: DynStore, auth: Auth, limits: Limits) -> Arc<Self> {
        let themes = Themes::new(store.clone());
        let schema = crate::graphql::build(
            Some(crate::graphql::Services {
                themes: themes.clone(),
                assignments: crate::assignments::service::Assignments::new(store.clone()),
            }),
            &limits,
        );
        Arc::new(AppState {
            schema,
            auth,
            store,
            themes,
            limits,
        })
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let body_limit = state.limits.max_body_bytes;
    Router::new()
        .route("/graphql", post(graphql))
        .route("/graphiql", get(graphiql))
        .route("/schema.graphql", get(schema_sdl))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn(track))
        .with_state(state)
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

async fn graphql(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error_response(ApiError::PayloadTooLarge(format!(
                "the request body is larger than {} bytes",
                state.limits.max_body_bytes
            )));
        }
        Err(r) => return error_response(ApiError::bad_input(r.body_text())),
    };
    let auth_header = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("invalid"));
    let principal = match state.auth.principal(auth_header) {
        Ok(p) => p,
        Err(e) => return error_response(e),
    };
    let request: async_graphql::Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error_response(ApiError::bad_input(format!(
                "the body must be a GraphQL request as JSON ({{\"query\": ...}}): {e}"
            )));
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
