//! The HTTP surface: `POST /graphql`, `GET /graphiql`, `GET /schema.graphql`,
//! `GET /healthz`, `GET /metrics`, the curators' UI at `/` and `/ui/...`. `router(state)` builds it so tests can serve
//! it; `serve` runs it with the connection bounds. Every body is read with a
//! size bound (refused at once when `Content-Length` already says too much),
//! an idle timeout between its pieces and a least average rate.

pub mod auth;
pub mod graphiql;
pub mod graphql;
pub mod multipart;
pub mod oidc;
pub mod serve;
pub mod sockets;
mod state;
pub mod subscriptions;
pub mod web;

pub use serve::{ConnectionLimits, serve};
pub use state::AppState;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use clap::Args;

use crate::api::caller::Authenticated;
use crate::edge::auth::Auth;
use crate::kernel::error::ApiError;
use crate::kernel::limits::{BODY_RATE_GRACE, BodyTooSlow, MIN_BODY_RATE};
use crate::kernel::metrics;

/// Every route: GraphQL and the service routes here, each domain's REST
/// routes merged in; then the body bounds, the bearer token read once, metrics.
pub fn router(state: Arc<AppState>) -> Router {
    router_with(state, Router::new())
}

/// [`router`] with `more` routes from above the edge (the batch jobs of
/// `app::control`), behind the same token reading, bounds and metrics.
pub fn router_with(state: Arc<AppState>, more: Router<Arc<AppState>>) -> Router {
    let body_limit = state.limits.max_body_bytes;
    let body_idle = Duration::from_secs(state.limits.body_timeout.max(1));
    let api = Router::new()
        .route("/graphql", get(graphql::get).post(graphql::post))
        .route("/graphql/ws", get(subscriptions::ws))
        .route("/graphiql", get(graphiql::page))
        .route("/graphiql/assets/{file}", get(graphiql::asset))
        .route("/", get(web::page))
        .route("/ui", get(web::page))
        .route("/ui/", get(web::page))
        .route("/ui/assets/{file}", get(web::asset))
        .route("/favicon.ico", get(web::favicon))
        .route("/ui/{*path}", get(web::page))
        .route("/schema.graphql", get(schema_sdl))
        .route("/auth/config", get(auth_config))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .merge(crate::api::binaries_rest::routes(
            body_limit as u64,
            state.binaries.config().max_bytes,
        ))
        .merge(crate::api::suggestions_rest::routes())
        .merge(crate::api::assignments_rest::routes())
        .merge(more);
    let api = match cors(&state.edge) {
        Some(layer) => api.layer(layer),
        None => api,
    };
    api.merge(crate::api::iiif_rest::public_routes())
        .merge(crate::api::iiif_presentation::routes())
        .merge(crate::api::reconcile::routes())
        .merge(crate::api::skos::routes())
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(body_idle))
        .layer(middleware::from_fn(min_body_rate))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn(track))
        // JSON, the SDL and GraphiQL's assets; never images (the default predicate).
        .layer(
            tower_http::compression::CompressionLayer::new()
                .quality(tower_http::CompressionLevel::Precise(4)),
        )
        .layer(tower_http::request_id::PropagateRequestIdLayer::x_request_id())
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_request(())
                .on_response(access_log)
                .on_failure(()),
        )
        .layer(tower_http::request_id::SetRequestIdLayer::x_request_id(
            RequestIds::new(),
        ))
        .with_state(state)
}

/// New request ids, shaped as version-4 UUIDs: the first four groups
/// random, drawn once per process (74 bits), the last a 48-bit count from
/// a random start. Unique within a process and, but for a chance of
/// 2^-74, across restarts and instances; tower-http's `MakeRequestUuid`
/// asked the kernel for randomness on every request (a `getrandom` call,
/// 0.5% of a page's CPU).
#[derive(Clone)]
struct RequestIds {
    /// The first four groups, version and variant bits set.
    prefix: Arc<str>,
    count: Arc<std::sync::atomic::AtomicU64>,
}

impl RequestIds {
    fn new() -> Self {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).expect("the OS has randomness");
        let word = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let start = u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]]);
        RequestIds {
            prefix: format!(
                "{:04x}{:04x}-{:04x}-{:04x}-{:04x}-",
                word(0),
                word(2),
                word(4),
                0x4000 | (word(6) & 0x0fff),
                0x8000 | (word(8) & 0x3fff),
            )
            .into(),
            count: Arc::new(start.into()),
        }
    }

    fn next(&self) -> String {
        let n = self
            .count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}{:012x}", self.prefix, n & 0xffff_ffff_ffff)
    }
}

impl tower_http::request_id::MakeRequestId for RequestIds {
    fn make_request_id<B>(
        &mut self,
        _: &axum::http::Request<B>,
    ) -> Option<tower_http::request_id::RequestId> {
        axum::http::HeaderValue::try_from(self.next())
            .ok()
            .map(tower_http::request_id::RequestId::new)
    }
}

/// Every request's span: its id (`x-request-id`, made when the client sent
/// none, and returned in the response), method and path.
fn request_span(req: &Request) -> tracing::Span {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    tracing::info_span!("request", id = %id, method = %req.method(), path = %req.uri().path())
}

/// The access log: one line per request, with the GraphQL operation's name.
fn access_log(res: &Response, latency: Duration, _span: &tracing::Span) {
    let operation = res
        .extensions()
        .get::<graphql::OperationName>()
        .map_or("-", |o| o.0.as_str());
    tracing::info!(
        target: "kartei::access",
        status = res.status().as_u16(),
        latency_ms = latency.as_secs_f64() * 1000.0,
        operation,
        "request"
    );
}

/// CORS for the API, as `--cors-origin` says: none (same origin only), any
/// origin without credentials (`*`), or the listed origins with credentials
/// (the Fetch spec forbids credentials with `*`).
fn cors(edge: &EdgeArgs) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderValue, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if edge.cors_origins.is_empty() {
        return None;
    }
    let layer = CorsLayer::new()
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::IF_NONE_MATCH,
        ])
        .expose_headers([header::ETAG])
        .max_age(Duration::from_secs(3600));
    if edge.cors_origins.iter().any(|o| o == "*") {
        return Some(layer.allow_origin(AllowOrigin::any()));
    }
    let origins: Vec<HeaderValue> = edge
        .cors_origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    Some(
        layer
            .allow_origin(AllowOrigin::list(origins))
            .allow_credentials(true),
    )
}

/// Reads the bearer token once per request: handlers take the outcome from
/// the request's extensions (`Caller`), so a route that needs no caller never
/// fails on a bad token.
async fn authenticate(State(app): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let outcome = read_principal(&app.auth, req.headers()).map_err(|e| e.message());
    req.extensions_mut().insert(Authenticated(outcome));
    next.run(req).await
}

fn read_principal(
    auth: &Auth,
    headers: &HeaderMap,
) -> Result<crate::kernel::roles::Principal, ApiError> {
    let header = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("invalid"));
    auth.principal(header)
}

/// Wraps a request's body so that each piece checks the average rate.
async fn min_body_rate(req: Request, next: Next) -> Response {
    use axum::body::{Body, HttpBody};
    use futures::StreamExt;
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let started = Instant::now();
    let mut received = 0u64;
    let checked = body.into_data_stream().map(move |piece| {
        let piece = piece?;
        received += piece.len() as u64;
        let elapsed = started.elapsed();
        if elapsed > BODY_RATE_GRACE && received < MIN_BODY_RATE.saturating_mul(elapsed.as_secs()) {
            return Err(axum::Error::new(BodyTooSlow));
        }
        Ok(piece)
    });
    next.run(Request::from_parts(parts, Body::from_stream(checked)))
        .await
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

async fn schema_sdl() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        crate::api::schema::sdl(),
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
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics::render(),
    )
}

/// How the HTTP edge answers browsers: other origins, caches.
#[derive(Args, Debug, Clone)]
pub struct EdgeArgs {
    /// An origin (`https://app.example.org`) whose pages may call the API
    /// (CORS, with credentials), repeatable; `*` lets any origin call it
    /// without credentials. Default: same origin only. IIIF images are open
    /// to every origin whatever this says.
    #[arg(long = "cors-origin", env = "KARTEI_CORS_ORIGIN", value_delimiter = ',', value_parser = parse_origin)]
    pub cors_origins: Vec<String>,
    /// Seconds a browser or CDN may reuse an anonymous GET query's answer
    /// (`Cache-Control: public, max-age=N`; 0: no-cache). Authenticated
    /// answers are never stored (`private, no-store`).
    #[arg(long, env = "KARTEI_CACHE_MAX_AGE", default_value_t = 5)]
    pub cache_max_age: u64,
    /// For work on the curators' UI: serve its files from this folder
    /// (`web/app`) as they are on disk, instead of the copy built into the
    /// binary, so a change shows on reload without a rebuild.
    #[arg(long, env = "KARTEI_WEB_DIR")]
    pub web_dir: Option<std::path::PathBuf>,
    /// Serve the schema as an Apollo Federation 2 subgraph (`_service`,
    /// `_entities`; Keyword, Category, Assignment and Binary are entities).
    #[arg(long, env = "KARTEI_FEDERATION")]
    pub federation: bool,
    /// The link to an object's page that the API gives with each catalogue
    /// object (`CatalogueObject.url`): `{ddbId}` is replaced by the object's
    /// id, `{portalId}` by the portal's where one is asked for.
    #[arg(
        long,
        env = "KARTEI_OBJECT_URL_PATTERN",
        default_value = crate::domains::objects::service::DEFAULT_URL_PATTERN,
        value_parser = parse_url_pattern
    )]
    pub object_url_pattern: String,
    /// The vocabulary's licence, an IRI (e.g. a Creative Commons licence's):
    /// said on each portal's SKOS scheme as `dcterms:license`.
    #[arg(long, env = "KARTEI_SKOS_LICENSE")]
    pub skos_license: Option<String>,
}

impl Default for EdgeArgs {
    fn default() -> Self {
        EdgeArgs {
            cors_origins: Vec::new(),
            cache_max_age: 5,
            web_dir: None,
            federation: false,
            object_url_pattern: crate::domains::objects::service::DEFAULT_URL_PATTERN.into(),
            skos_license: None,
        }
    }
}

fn parse_url_pattern(s: &str) -> Result<String, String> {
    crate::domains::objects::service::check_url_pattern(s).map(|()| s.to_owned())
}

/// `GET /auth/config`: how the UI may sign in (`{"oidc": null}` without a
/// provider), public.
async fn auth_config(
    axum::extract::State(app): axum::extract::State<Arc<AppState>>,
) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "oidc": app.auth.oidc().map(oidc::Oidc::ui_config),
    }))
}

/// `*`, or an origin as browsers send it: `scheme://host[:port]`, nothing more.
fn parse_origin(s: &str) -> Result<String, String> {
    if s == "*" {
        return Ok(s.to_owned());
    }
    let u = url::Url::parse(s).map_err(|e| format!("not an origin: {e}"))?;
    let origin = u.origin().ascii_serialization();
    if !matches!(u.scheme(), "http" | "https") || origin != s.trim_end_matches('/') {
        return Err(format!(
            "an origin is scheme://host[:port] with no path, like {origin}"
        ));
    }
    Ok(origin)
}

#[cfg(test)]
mod tests {
    use super::RequestIds;

    /// Ids read as version-4 UUIDs, differ from one request to the next,
    /// and from those of another process (another random prefix).
    #[test]
    fn request_ids_are_uuid_shaped_and_distinct() {
        let ids = RequestIds::new();
        let (a, b) = (ids.next(), ids.next());
        assert_ne!(a, b);
        for id in [&a, &b] {
            let groups: Vec<&str> = id.split('-').collect();
            let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
            assert_eq!(lens, [8, 4, 4, 4, 12], "{id}");
            assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
            assert!(groups[2].starts_with('4'), "version 4: {id}");
            assert!(
                matches!(&groups[3][..1], "8" | "9" | "a" | "b"),
                "variant: {id}"
            );
        }
        assert_ne!(a[..24], RequestIds::new().next()[..24]);
    }
}
