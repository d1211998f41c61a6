//! What every route shares about requests, wherever it is declared: refuse
//! a body whose `Content-Length` is already over the route's limit before
//! reading it, tell a body that was too large from one that stopped
//! arriving, match `If-None-Match` against an ETag, and take a portal's id
//! from a path, checked.

use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::kernel::error::ApiError;

/// The announced length of a request body, if any.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// 413 before reading a byte when `Content-Length` is over the route's limit
/// (a route layer: `middleware::from_fn_with_state(limit, refuse_announced_oversize)`).
pub async fn refuse_announced_oversize(
    State(limit): State<u64>,
    req: Request,
    next: Next,
) -> Response {
    match content_length(req.headers()) {
        Some(n) if n > limit => ApiError::PayloadTooLarge(format!(
            "the request body ({n} bytes) is larger than {limit} bytes"
        ))
        .into_response(),
        _ => next.run(req).await,
    }
}

/// A route's one path segment that names a portal (`/skos/{portalId}`,
/// `/iiif/3/collection/{portalId}`), checked as an id before the handler runs.
pub struct PortalId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PortalId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_input(e.body_text()))?;
        crate::kernel::check_id("portal", &id)?;
        Ok(PortalId(id))
    }
}

/// Whether the client's `If-None-Match` names `etag` (or `*`): then it has it.
pub fn etag_matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
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
        if c.is::<crate::kernel::limits::BodyTooSlow>() {
            return ApiError::Timeout(format!("{c}"));
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
