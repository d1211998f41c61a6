//! The HTTP surface: `POST /graphql`, `GET /graphiql`, `GET /schema.graphql`,
//! `GET /healthz`, `GET /metrics`. `router(state)` builds it so tests can serve it.

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
    Router::new()
        .route("/graphql", post(graphql))
        .route("/binaries", put(binary_routes::register))
        .route(
            "/binaries/upload",
            post(binary_routes::upload).layer(DefaultBodyLimit::max(upload_limit)),
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
    let request = if content_type.starts_with("multipart/form-data") {
        match multipart_request(&state, content_type, body).await {
            Ok(r) => r,
            Err(e) => return error_response(e),
        }
    } else {
        let body = match axum::body::to_bytes(body, state.limits.max_body_bytes).await {
            Ok(b) => b,
            Err(_) => {
                return error_response(ApiError::PayloadTooLarge(format!(
                    "the request body is larger than {} bytes",
                    state.limits.max_body_bytes
                )));
            }
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

/// A GraphQL multipart request (uploads): files are spooled to temporary
/// files by the engine, never held in memory; the body is cut off at the
/// upload limit.
async fn multipart_request(
    state: &AppState,
    content_type: &str,
    body: Body,
) -> Result<async_graphql::Request, ApiError> {
    use futures::{StreamExt, TryStreamExt};
    let max = state.binaries.config().max_bytes;
    let limit = max.saturating_add(1 << 20);
    let mut seen = 0u64;
    let reader = body
        .into_data_stream()
        .map(move |piece| match piece {
            Ok(b) => {
                seen += b.len() as u64;
                if seen > limit {
                    Err(std::io::Error::other("the request body is too large"))
                } else {
                    Ok(b)
                }
            }
            Err(e) => Err(std::io::Error::other(e)),
        })
        .into_async_read();
    let options = async_graphql::http::MultipartOptions::default()
        .max_file_size(usize::try_from(max).unwrap_or(usize::MAX))
        .max_num_files(4);
    match async_graphql::http::receive_body(Some(content_type), reader, options).await {
        Ok(r) => Ok(r),
        Err(async_graphql::ParseRequestError::PayloadTooLarge) => Err(ApiError::PayloadTooLarge(
            format!("an upload is larger than {max} bytes"),
        )),
        Err(e) if e.to_string().contains("too large") => Err(ApiError::PayloadTooLarge(format!(
            "the request body is larger than {limit} bytes"
        ))),
        Err(e) => Err(ApiError::bad_input(format!(
            "not a GraphQL multipart request: {e}"
        ))),
    }
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
