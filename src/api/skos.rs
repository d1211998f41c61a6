//! `GET /skos/{portalId}`: a portal's vocabulary as SKOS, in Turtle,
//! RDF/XML or JSON-LD as the `Accept` header (or `?format=ttl|rdf|jsonld`)
//! asks; public like the vocabulary, open to every origin.

use axum::Router;
use axum::extract::{FromRef, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::api::binaries_rest::RestError;
use crate::api::iiif_rest::{base_url_of, public_cors, vary_on_host_of};
use crate::api::rest::PortalId;
use crate::domains::themes::service::Themes;
use crate::domains::themes::skos;
use crate::kernel::error::ApiError;

/// What the route reads: the vocabulary, the server's `--public-url` (the
/// base of the IRIs) and `--skos-license`.
#[derive(Clone)]
pub struct Skos {
    pub themes: Themes,
    pub public_url: Option<String>,
    pub license: Option<String>,
}

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Skos: FromRef<S>,
{
    Router::new()
        .route("/skos/{portal_id}", get(portal))
        .layer(public_cors())
}

/// Portal documents made at once in this process.
static EXPORTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

#[derive(serde::Deserialize)]
struct Format {
    format: Option<String>,
}

async fn portal(
    State(s): State<Skos>,
    PortalId(portal_id): PortalId,
    Query(q): Query<Format>,
    headers: HeaderMap,
) -> Result<Response, RestError> {
    let format = match &q.format {
        Some(f) => skos::format_of(f)
            .ok_or_else(|| ApiError::bad_input(format!("format {f:?}: ttl, rdf or jsonld")))?,
        None => {
            let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
            skos::negotiate(accept).ok_or_else(|| {
                ApiError::NotAcceptable(
                    "SKOS is served as text/turtle, application/rdf+xml or application/ld+json"
                        .into(),
                )
            })?
        }
    };
    // A whole portal is read and written in memory: two at a time, the
    // others wait.
    let _turn = EXPORTS.acquire().await.map_err(|_| ApiError::Unavailable)?;
    let base = base_url_of(s.public_url.as_deref(), &headers);
    let iris = skos::export::Iris {
        base: &base,
        license: s.license.as_deref(),
    };
    let body = skos::export(&s.themes, &iris, &portal_id, format).await?;
    let mut response = (
        [(
            header::CONTENT_TYPE,
            format!("{}; charset=utf-8", skos::media_type(format)),
        )],
        body,
    )
        .into_response();
    response
        .headers_mut()
        .append(header::VARY, HeaderValue::from_static("accept"));
    Ok(vary_on_host_of(s.public_url.as_deref(), response))
}
