//! The REST surface of seed 001: register by URL, upload, serve originals
//! (streamed, with ETag, conditional GET and byte ranges) and the four scaled
//! JPEGs, delete by reference or context, and the logs of a context; and the
//! IIIF Image API. `routes()` is merged into the server's router; handlers
//! take the service and the caller through axum's `FromRef` and extensions.

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRef, Multipart, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use futures::StreamExt as _;
use serde::Deserialize;

use crate::api::caller::Caller;
use crate::api::rest::{etag_matches, refuse_announced_oversize};
use crate::domains::binaries::model::{BinaryStatus, DERIVATIVES, Original};
use crate::domains::binaries::service::{Binaries, CHUNK};
use crate::kernel::error::ApiError;
use crate::kernel::roles::Role;

/// The REST routes of binaries, for any router state that can give a
/// [`Binaries`]. `max_body` bounds the JSON of a registration; uploads may
/// be `max_upload` bytes (plus room for the form around the file).
pub fn routes<S>(max_body: u64, max_upload: u64) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Binaries: FromRef<S>,
{
    let upload_limit = max_upload.saturating_add(1 << 20);
    Router::new()
        .route(
            "/binaries",
            put(register).layer(middleware::from_fn_with_state(
                max_body,
                refuse_announced_oversize,
            )),
        )
        .route(
            "/binaries/upload",
            post(upload)
                .layer(DefaultBodyLimit::max(
                    usize::try_from(upload_limit).unwrap_or(usize::MAX),
                ))
                .layer(middleware::from_fn_with_state(
                    upload_limit,
                    refuse_announced_oversize,
                )),
        )
        .route("/binaries/context/{context}", delete(delete_context))
        .route("/binaries/reference/{reference}", delete(delete_reference))
        .route("/binary/logs/{context}", get(context_logs))
        .route("/binary/{reference}", get(original))
        .route("/binary/{reference}/full/{size}/default.jpg", get(scaled))
}

/// A JSON error: `{"error": {"code", "message"}}` with the code's HTTP status,
/// and `Retry-After` when the thing asked for is still being made, or the
/// server has no room for it now.
pub struct RestError {
    pub(crate) error: ApiError,
    pub(crate) retry_after: bool,
}

impl From<ApiError> for RestError {
    fn from(error: ApiError) -> Self {
        RestError {
            error,
            retry_after: false,
        }
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let mut r = self.error.into_response();
        if self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        r
    }
}

type RestResult<T> = Result<T, RestError>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterBody {
    url: String,
    context: String,
    mime: Option<String>,
}

/// `PUT /binaries` (machine or admin): 202 with `{referenceId, originalId, status}`.
pub async fn register(
    State(binaries): State<Binaries>,
    Caller(caller): Caller,
    body: Result<Json<RegisterBody>, axum::extract::rejection::JsonRejection>,
) -> RestResult<Response> {
    // The service decides; this only answers a caller who may not register
    // before the body is read.
    caller.require_any(&[Role::Machine, Role::Admin])?;
    let Json(body) = body.map_err(|e| ApiError::bad_input(e.body_text()))?;
    let r = binaries
        .register_url(&caller, &body.url, &body.context, body.mime)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(r)).into_response())
}

/// `POST /binaries/upload` (machine or admin), multipart with a `context` field
/// and a `file` field; the file streams into storage.
pub async fn upload(
    State(binaries): State<Binaries>,
    Caller(caller): Caller,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> RestResult<Response> {
    caller.require_any(&[Role::Machine, Role::Admin])?;
    let mut multipart = multipart.map_err(|e| ApiError::bad_input(e.body_text()))?;
    let mut context: Option<String> = None;
    loop {
        let field = multipart
            .next_field()
            .await
            .map_err(|e| multipart_error(e, &binaries))?;
        let Some(field) = field else {
            return Err(ApiError::bad_input("the form has no `file` field").into());
        };
        match field.name() {
            Some("context") => {
                context = Some(bounded_text(field, MAX_TEXT_FIELD, &binaries).await?);
            }
            Some("file") => {
                let Some(context) = context.take() else {
                    return Err(ApiError::bad_input(
                        "send the `context` field before the `file` field",
                    )
                    .into());
                };
                let stream = futures::stream::unfold(field, |mut f| async move {
                    match f.chunk().await {
                        Ok(Some(b)) => Some((Ok(b), f)),
                        Ok(None) => None,
                        Err(e) => Some((Err(e), f)),
                    }
                });
                let r = binaries.upload(&caller, &context, stream).await?;
                return Ok((StatusCode::CREATED, Json(r)).into_response());
            }
            other => {
                return Err(ApiError::bad_input(format!(
                    "unexpected form field {:?} (send `context`, then `file`)",
                    other.unwrap_or_default()
                ))
                .into());
            }
        }
    }
}

/// The largest text field of an upload form (a context is an id of at most a few hundred bytes).
const MAX_TEXT_FIELD: usize = 4096;

/// Reads a text field piece by piece, refusing it as soon as it passes `max` bytes.
async fn bounded_text(
    mut field: axum::extract::multipart::Field<'_>,
    max: usize,
    b: &Binaries,
) -> Result<String, ApiError> {
    let name = field.name().unwrap_or_default().to_owned();
    let mut text = Vec::new();
    while let Some(piece) = field.chunk().await.map_err(|e| multipart_error(e, b))? {
        if text.len() + piece.len() > max {
            return Err(ApiError::PayloadTooLarge(format!(
                "the field {name} is longer than {max} bytes"
            )));
        }
        text.extend_from_slice(&piece);
    }
    String::from_utf8(text)
        .map_err(|_| ApiError::bad_input(format!("the field {name} is not UTF-8")))
}

fn multipart_error(e: axum::extract::multipart::MultipartError, b: &Binaries) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(format!(
            "the upload is larger than {} bytes",
            b.config().max_bytes
        ))
    } else {
        ApiError::bad_input(e.body_text())
    }
}

/// 404 for an unknown reference; 404 with `Retry-After` while it is processing
/// or waiting for a retry; 404 for one that failed (its logs say why).
pub(crate) async fn servable(binaries: &Binaries, reference: &str) -> RestResult<Original> {
    let Some((_, o)) = binaries.resolve(reference).await? else {
        return Err(ApiError::NotFound(format!("binary {reference}")).into());
    };
    match o.status {
        Some(BinaryStatus::Ok) => Ok(o),
        Some(BinaryStatus::Processing | BinaryStatus::Retry) => Err(RestError {
            error: ApiError::NotFound(format!(
                "binary {reference} (still processing; try again later)"
            )),
            retry_after: true,
        }),
        _ => Err(
            ApiError::NotFound(format!("binary {reference} (it could not be processed)")).into(),
        ),
    }
}

/// A single `bytes=` range over `size` bytes: Ok(None) for no (or an
/// unsupported multi-) range, Err for an unsatisfiable one.
fn parse_range(headers: &HeaderMap, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(v) = headers.get(header::RANGE).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    let Some(spec) = v.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let (a, b) = spec.split_once('-').ok_or(())?;
    // No range of an empty body can be satisfied (and `size - 1` would underflow).
    if size == 0 {
        return Err(());
    }
    let (start, end) = match (a.trim(), b.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().map_err(|_| ())?;
            if n == 0 {
                return Err(());
            }
            (size.saturating_sub(n), size - 1)
        }
        (s, "") => (s.parse().map_err(|_| ())?, size.saturating_sub(1)),
        (s, e) => {
            let s: u64 = s.parse().map_err(|_| ())?;
            let e: u64 = e.parse().map_err(|_| ())?;
            (s, e.min(size.saturating_sub(1)))
        }
    };
    if start >= size || start > end {
        return Err(());
    }
    Ok(Some((start, end)))
}

/// `GET /binary/{ref}`: the original, streamed chunk by chunk.
pub async fn original(
    State(binaries): State<Binaries>,
    Path(reference): Path<String>,
    headers: HeaderMap,
) -> Response {
    match serve_original(&binaries, &reference, &headers).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn serve_original(
    binaries: &Binaries,
    reference: &str,
    headers: &HeaderMap,
) -> RestResult<Response> {
    let o = servable(binaries, reference).await?;
    let size = o.size.unwrap_or(0).max(0) as u64;
    let etag = format!("\"{}\"", o.checksum.clone().unwrap_or_default());
    let mime = o
        .mime
        .clone()
        .unwrap_or_else(|| "application/octet-stream".into());
    let mut h = HeaderMap::new();
    h.insert(header::ETAG, header_value(&etag));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=86400"),
    );
    if etag_matches(headers, &etag) {
        return Ok((StatusCode::NOT_MODIFIED, h).into_response());
    }
    let (status, start, end) = match parse_range(headers, size) {
        Ok(None) => (StatusCode::OK, 0, size.saturating_sub(1)),
        Ok(Some((s, e))) => {
            h.insert(
                header::CONTENT_RANGE,
                header_value(&format!("bytes {s}-{e}/{size}")),
            );
            (StatusCode::PARTIAL_CONTENT, s, e)
        }
        Err(()) => {
            h.insert(
                header::CONTENT_RANGE,
                header_value(&format!("bytes */{size}")),
            );
            return Ok((StatusCode::RANGE_NOT_SATISFIABLE, h).into_response());
        }
    };
    let len = if size == 0 { 0 } else { end - start + 1 };
    h.insert(header::CONTENT_TYPE, header_value(&mime));
    h.insert(header::CONTENT_LENGTH, header_value(&len.to_string()));
    let chunk = CHUNK as u64;
    let first = (start / chunk) as i32;
    let last = if len == 0 {
        first - 1
    } else {
        (end / chunk) as i32
    };
    let binaries = binaries.clone();
    let id = o.id.clone();
    let body = futures::stream::iter(first..=last).then(move |p| {
        let binaries = binaries.clone();
        let id = id.clone();
        async move {
            let data = binaries
                .part(&id, p)
                .await
                .map_err(|e| std::io::Error::other(e.message()))?;
            let base = p as u64 * chunk;
            let from = start.saturating_sub(base).min(data.len() as u64) as usize;
            let to = ((end + 1).saturating_sub(base)).min(data.len() as u64) as usize;
            Ok::<_, std::io::Error>(data.slice(from..to))
        }
    });
    Ok((status, h, Body::from_stream(body)).into_response())
}

pub(crate) fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// `GET /binary/{ref}/full/{size}/default.jpg` with size `!800,600`,
/// `!440,330`, `!140,105` or `!116,87`: a stored derivative.
pub async fn scaled(
    State(binaries): State<Binaries>,
    Path((reference, size)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let run = async {
        let table = DERIVATIVES
            .iter()
            .find(|(w, h, _)| size == format!("!{w},{h}"))
            .map(|(_, _, t)| *t)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "size {size} (stored sizes: !800,600, !440,330, !140,105, !116,87)"
                ))
            })?;
        let o = servable(&binaries, &reference).await?;
        let etag = format!(
            "\"{}-{}\"",
            o.checksum.clone().unwrap_or_default(),
            size.trim_start_matches('!').replace(',', "x")
        );
        let mut h = HeaderMap::new();
        h.insert(header::ETAG, header_value(&etag));
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=86400"),
        );
        if etag_matches(&headers, &etag) {
            return Ok::<_, RestError>((StatusCode::NOT_MODIFIED, h).into_response());
        }
        let data = binaries
            .derivative(&o.id, table)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("derivative {size} of {reference}")))?;
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/jpeg"));
        Ok((StatusCode::OK, h, data).into_response())
    };
    match run.await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// `DELETE /binaries/reference/{ref}` (admin).
pub async fn delete_reference(
    State(binaries): State<Binaries>,
    Caller(caller): Caller,
    Path(reference): Path<String>,
) -> RestResult<Response> {
    binaries.delete_reference(&caller, &reference).await?;
    Ok(Json(serde_json::json!({"deleted": 1})).into_response())
}

/// `DELETE /binaries/context/{context}` (admin).
pub async fn delete_context(
    State(binaries): State<Binaries>,
    Caller(caller): Caller,
    Path(context): Path<String>,
) -> RestResult<Response> {
    let n = binaries.delete_context(&caller, &context).await?;
    Ok(Json(serde_json::json!({"deleted": n})).into_response())
}

/// `GET /binary/logs/{context}`: every log line of every reference of a context.
pub async fn context_logs(
    State(binaries): State<Binaries>,
    Path(context): Path<String>,
) -> RestResult<Response> {
    // Streamed a page of references at a time, as one JSON array: a context
    // may hold millions of references, and the answer is never held whole.
    // A store error before the first byte is an error status; after it, the
    // body ends early (the client sees a truncated answer, never a short one
    // that looks complete).
    let first = binaries.context_logs_page(&context, None).await?;
    type Page = (Vec<(String, String, String)>, Option<crate::store::Cursor>);
    enum Next {
        Page(Page),
        Fail,
        Done,
    }
    struct Pages {
        binaries: Binaries,
        context: String,
        next: Next,
        opened: bool,
    }
    let pages = Pages {
        binaries,
        context,
        next: Next::Page(first),
        opened: false,
    };
    let body = futures::stream::unfold(pages, |mut p| async move {
        let (lines, after) = match std::mem::replace(&mut p.next, Next::Done) {
            Next::Done => return None,
            Next::Fail => return Some((Err(std::io::Error::other("the store failed")), p)),
            Next::Page(page) => page,
        };
        let mut out = Vec::with_capacity(lines.len() * 96 + 2);
        for (r, t, m) in lines {
            out.push(if p.opened { b',' } else { b'[' });
            p.opened = true;
            let line = serde_json::json!({
                "referenceId": r,
                "timestamp": t.split('#').next().unwrap_or_default(),
                "message": m,
            });
            serde_json::to_writer(&mut out, &line).expect("JSON into a Vec");
        }
        match after {
            Some(after) => match p.binaries.context_logs_page(&p.context, Some(after)).await {
                Ok(page) => p.next = Next::Page(page),
                Err(e) => {
                    tracing::warn!(context = %p.context, error = e.message(), "context logs cut short");
                    p.next = Next::Fail;
                }
            },
            None => out.extend_from_slice(if p.opened { b"]" } else { b"[]" }),
        }
        Some((Ok(out), p))
    });
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}

// ----- IIIF Image API 3.0 -----

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn range(value: &str, size: u64) -> Result<Option<(u64, u64)>, ()> {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_str(value).unwrap());
        parse_range(&headers, size)
    }

    /// Found by `any_range_header_is_inside_the_body_or_refused`: a suffix
    /// range of an empty body computed `0 - 1`.
    #[test]
    fn a_suffix_range_of_an_empty_body_is_unsatisfiable() {
        assert_eq!(range("bytes=-5", 0), Err(()));
        assert_eq!(range("bytes=0-", 0), Err(()));
        assert_eq!(range("bytes=0-0", 0), Err(()));
        assert_eq!(range("bytes=-5", 3), Ok(Some((0, 2))));
    }

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        /// Any `Range` value on any body: a range inside it, no range
        /// (the whole body), or unsatisfiable (416), never a panic.
        #[test]
        fn any_range_header_is_inside_the_body_or_refused(
            value in prop_oneof![
                "[ -~]{0,30}",
                "bytes=[0-9]{0,22}-[0-9]{0,22}",
                " ?bytes= ?[0-9]{0,4} ?- ?[0-9]{0,4}(,[0-9]{0,3}-[0-9]{0,3})?",
            ],
            size in prop_oneof![Just(0u64), 0u64..100, any::<u64>()],
        ) {
            if let Ok(Some((start, end))) = range(&value, size) {
                prop_assert!(start <= end && end < size, "{value} of {size}: {start}-{end}");
            }
        }

        #[test]
        fn a_range_inside_the_body_is_read_as_written(
            size in 1u64..1_000_000, a in any::<prop::sample::Index>(), len in 0u64..2_000_000,
        ) {
            let start = a.index(size as usize) as u64;
            let end = start.saturating_add(len);
            prop_assert_eq!(
                range(&format!("bytes={start}-{end}"), size),
                Ok(Some((start, end.min(size - 1))))
            );
            prop_assert_eq!(range(&format!("bytes={start}-"), size), Ok(Some((start, size - 1))));
            let suffix = len.max(1);
            prop_assert_eq!(
                range(&format!("bytes=-{suffix}"), size),
                Ok(Some((size.saturating_sub(suffix), size - 1)))
            );
        }
    }
}
