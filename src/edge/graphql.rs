//! `GET` and `POST /graphql` as the GraphQL-over-HTTP spec (draft) has them.
//!
//! - Requests: `POST` with `application/json` (or the GraphQL multipart
//!   request for uploads), or `GET` with the parameters in the query string
//!   (`query`, `operationName`, `variables` and `extensions` as JSON). A
//!   mutation over `GET` is 405 with `Allow: POST`; a `POST` without a
//!   supported content type is 415; a missing or malformed request is 400.
//! - Responses: `application/graphql-response+json` when the client accepts
//!   it, else `application/json`. With `application/json` every GraphQL
//!   response is 200; with `application/graphql-response+json` a request
//!   that never executed (it did not parse, validate, or its variables did
//!   not coerce) is a 4xx without a `data` entry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::parser::types::{DocumentOperations, OperationDefinition, OperationType};
use async_graphql::{ErrorExtensionValues, Request as GqlRequest, Response as GqlResponse};
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::multipart;
use crate::api::caller::Authenticated;
use crate::api::graphql::batch::Batches;
use crate::api::graphql::gate::{MUTATION_OVER_GET, ReadOnly};
use crate::api::rest::{body_error, content_length};
use crate::api::theme_loaders::ThemeLoaders;
use crate::edge::AppState;
use crate::kernel::error::ApiError;
use crate::kernel::metrics;
use crate::kernel::roles::Principal;

/// The media type of a GraphQL response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaType {
    /// `application/graphql-response+json`: status codes say what happened.
    GraphqlResponse,
    /// `application/json`: every GraphQL response is 200.
    Json,
}

impl MediaType {
    fn content_type(self) -> &'static str {
        match self {
            MediaType::GraphqlResponse => "application/graphql-response+json; charset=utf-8",
            MediaType::Json => "application/json; charset=utf-8",
        }
    }
}

/// Picks the response media type from `Accept`: the acceptable one with the
/// highest quality, `application/json` for `*/*` or no header; `None` when
/// the client accepts neither.
pub fn negotiate(headers: &HeaderMap) -> Option<MediaType> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(MediaType::Json);
    };
    if accept.trim().is_empty() {
        return Some(MediaType::Json);
    }
    let mut best: Option<(f32, MediaType)> = None;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let range = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let media = match range.as_str() {
            "application/graphql-response+json" => MediaType::GraphqlResponse,
            "application/json" | "application/*" | "*/*" => MediaType::Json,
            _ => continue,
        };
        if q > 0.0 && best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, media));
        }
    }
    best.map(|(_, m)| m)
}

/// A request that never reached execution: its status, and a GraphQL error
/// body (without `data` for `application/graphql-response+json`).
pub fn refusal(media: MediaType, e: ApiError) -> Response {
    metrics::graphql_error(e.code());
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut body = serde_json::json!({
        "errors": [{ "message": e.message(), "extensions": { "code": e.code() } }]
    });
    if media == MediaType::Json {
        body["data"] = Value::Null;
    }
    with_type(status, media, body.to_string())
}

fn with_type(status: StatusCode, media: MediaType, body: String) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(media.content_type()),
    );
    r
}

fn not_acceptable() -> Response {
    refusal(
        MediaType::Json,
        ApiError::NotAcceptable(
            "send Accept: application/graphql-response+json or application/json".into(),
        ),
    )
}

/// The parameters of a GraphQL request as JSON, each checked for its type:
/// `query` a string, `operationName` a string or null, `variables` and
/// `extensions` objects or null.
pub fn request_from_json(value: Value) -> Result<GqlRequest, ApiError> {
    let Value::Object(mut map) = value else {
        return Err(ApiError::bad_input(
            "the request must be a JSON object with a `query`",
        ));
    };
    // A persisted query may be named by its hash alone.
    let persisted = map
        .get("extensions")
        .and_then(|e| e.get("persistedQuery"))
        .is_some();
    let query = match map.remove("query") {
        Some(Value::String(q)) => q,
        Some(Value::Null) | None if persisted => String::new(),
        Some(Value::Null) | None => {
            return Err(ApiError::bad_input("the request has no `query`"));
        }
        Some(_) => return Err(ApiError::bad_input("`query` must be a string")),
    };
    let mut request = GqlRequest::new(query);
    match map.remove("operationName") {
        Some(Value::String(name)) => request = request.operation_name(name),
        Some(Value::Null) | None => {}
        Some(_) => return Err(ApiError::bad_input("`operationName` must be a string")),
    }
    match map.remove("variables") {
        Some(v @ Value::Object(_)) => {
            request = request.variables(async_graphql::Variables::from_json(v));
        }
        Some(Value::Null) | None => {}
        Some(_) => return Err(ApiError::bad_input("`variables` must be an object")),
    }
    match map.remove("extensions") {
        Some(Value::Object(ext)) => {
            for (k, v) in ext {
                let v = async_graphql::Value::from_json(v)
                    .map_err(|_| ApiError::bad_input("`extensions` is not valid JSON"))?;
                request.extensions.insert(k, v);
            }
        }
        Some(Value::Null) | None => {}
        Some(_) => return Err(ApiError::bad_input("`extensions` must be an object")),
    }
    Ok(request)
}

/// The parameters of a `GET`: `variables` and `extensions` are JSON text.
fn request_from_query(raw: &str) -> Result<GqlRequest, ApiError> {
    let mut params: HashMap<String, String> = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(raw.as_bytes()) {
        params.insert(k.into_owned(), v.into_owned());
    }
    let mut json = serde_json::Map::new();
    if let Some(q) = params.remove("query") {
        json.insert("query".into(), Value::String(q));
    }
    if let Some(n) = params.remove("operationName") {
        json.insert("operationName".into(), Value::String(n));
    }
    for key in ["variables", "extensions"] {
        if let Some(text) = params.remove(key) {
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| ApiError::bad_input(format!("`{key}` is not JSON: {e}")))?;
            json.insert(key.into(), v);
        }
    }
    request_from_json(Value::Object(json))
}

/// The operation a request would run: `None` when its document names
/// several and `operationName` picks none of them. The document is parsed
/// once and kept in the request, so the engine does not parse it again.
pub fn chosen_operation(
    request: &mut GqlRequest,
    max_query_bytes: usize,
) -> Result<Option<&OperationDefinition>, async_graphql::ServerError> {
    crate::api::graphql::gate::check_text(&request.query, max_query_bytes)?;
    let name = request.operation_name.clone();
    let doc = request.parsed_query()?;
    Ok(match (&doc.operations, name) {
        (DocumentOperations::Single(op), _) => Some(&op.node),
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name.as_str()).map(|o| &o.node),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => {
            ops.values().next().map(|o| &o.node)
        }
        _ => None,
    })
}

fn caller(outcome: Authenticated) -> Result<Principal, ApiError> {
    outcome.0.map_err(ApiError::InvalidToken)
}

/// `GET /graphql?query=...`: queries only.
pub async fn get(
    State(app): State<Arc<AppState>>,
    axum::Extension(authenticated): axum::Extension<Authenticated>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(media) = negotiate(&headers) else {
        return not_acceptable();
    };
    let raw = raw.unwrap_or_default();
    if raw.len() > app.limits.max_body_bytes {
        return refusal(
            media,
            ApiError::PayloadTooLarge(format!(
                "the query string is longer than {} bytes",
                app.limits.max_body_bytes
            )),
        );
    }
    let mut request = match request_from_query(&raw) {
        Ok(r) => r,
        Err(e) => return refusal(media, e),
    };
    // A document that does not parse is left to the engine to report.
    let is_mutation = chosen_operation(&mut request, app.limits.max_query_bytes)
        .ok()
        .flatten()
        .is_some_and(|op| op.ty == OperationType::Mutation);
    if is_mutation {
        let mut r = refusal(
            media,
            ApiError::MethodNotAllowed("a mutation must be sent with POST".into()),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let principal = match caller(authenticated) {
        Ok(p) => p,
        Err(e) => return refusal(media, e),
    };
    let anonymous = principal.sub.is_none();
    let mut response = execute(&app, principal, request.data(ReadOnly), media).await;
    if response.status() == StatusCode::OK && response.extensions().get::<Clean>().is_some() {
        if anonymous {
            return cacheable(response, &headers, app.edge.cache_max_age).await;
        }
        private(&mut response);
    } else if response.extensions().get::<MutationOverGet>().is_some() {
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    } else {
        private(&mut response);
    }
    response
}

/// A response that no cache may keep.
fn private(response: &mut Response) {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
}

/// An anonymous GET answered without errors: `Cache-Control` for browsers and
/// CDNs, an ETag of the body, and 304 when the client has it already.
async fn cacheable(response: Response, headers: &HeaderMap, max_age: u64) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "").into_response();
    };
    let etag = format!("\"{}\"", crate::store::fnv1a_hex_bytes(&bytes));
    let control = if max_age == 0 {
        "public, no-cache".to_owned()
    } else {
        format!("public, max-age={max_age}")
    };
    let h = &mut parts.headers;
    h.insert(header::ETAG, HeaderValue::from_str(&etag).expect("hex"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_str(&control).expect("ascii"),
    );
    h.insert(
        header::VARY,
        HeaderValue::from_static("Accept, Authorization"),
    );
    if crate::api::rest::etag_matches(headers, &etag) {
        parts.status = StatusCode::NOT_MODIFIED;
        h.remove(header::CONTENT_TYPE);
        return Response::from_parts(parts, Body::empty());
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Marks a GraphQL response without errors (cacheable when anonymous).
#[derive(Clone, Copy)]
struct Clean;

/// Marks the refusal of a mutation that arrived over GET.
#[derive(Clone, Copy)]
struct MutationOverGet;

/// The operation a request ran, for the access log.
#[derive(Clone, Debug)]
pub struct OperationName(pub String);

/// `POST /graphql`: JSON, or the GraphQL multipart request.
pub async fn post(
    State(app): State<Arc<AppState>>,
    axum::Extension(authenticated): axum::Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(media) = negotiate(&headers) else {
        return not_acceptable();
    };
    let principal = match caller(authenticated) {
        Ok(p) => p,
        Err(e) => return refusal(media, e),
    };
    // Only the media type and parameter names are case-insensitive: a
    // multipart boundary is matched byte for byte (browsers send mixed case).
    let raw_content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let content_type = raw_content_type.to_ascii_lowercase();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    let max_body = app.limits.max_body_bytes as u64;
    let request = match essence {
        "multipart/form-data" => {
            let limits = multipart::MultipartLimits {
                max_text_bytes: max_body,
                max_file_bytes: app.binaries.config().max_bytes,
                max_query_bytes: app.limits.max_query_bytes,
            };
            match multipart::read(raw_content_type, body, &principal, &limits).await {
                Ok(r) => r,
                Err(e) => return refusal(media, e),
            }
        }
        "application/json" => {
            let charset = content_type
                .split(';')
                .skip(1)
                .filter_map(|p| p.trim().strip_prefix("charset="))
                .next();
            if charset.is_some_and(|c| !c.trim_matches('"').eq_ignore_ascii_case("utf-8")) {
                return refusal(
                    media,
                    ApiError::UnsupportedMediaType("the request body must be UTF-8".into()),
                );
            }
            if let Some(n) = content_length(&headers).filter(|n| *n > max_body) {
                return refusal(
                    media,
                    ApiError::PayloadTooLarge(format!(
                        "the request body ({n} bytes) is larger than {max_body} bytes"
                    )),
                );
            }
            let bytes = match axum::body::to_bytes(body, app.limits.max_body_bytes).await {
                Ok(b) => b,
                Err(e) => return refusal(media, body_error(e, max_body)),
            };
            if bytes.is_empty() {
                return refusal(media, ApiError::bad_input("the request body is empty"));
            }
            let parsed = serde_json::from_slice::<Value>(&bytes)
                .map_err(|e| ApiError::bad_input(format!("the body is not JSON: {e}")))
                .and_then(request_from_json);
            match parsed {
                Ok(r) => r,
                Err(e) => return refusal(media, e),
            }
        }
        _ => {
            return refusal(
                media,
                ApiError::UnsupportedMediaType(
                    "send the request as application/json (or multipart/form-data for uploads)"
                        .into(),
                ),
            );
        }
    };
    let mut response = execute(&app, principal, request, media).await;
    private(&mut response);
    response
}

/// `request` with its own DataLoaders, whose fetches `batches` starts.
pub(crate) fn with_loaders(app: &AppState, request: GqlRequest, batches: &Batches) -> GqlRequest {
    let window = Duration::from_millis(app.limits.batch_window_ms);
    request
        .data(ThemeLoaders::new(&app.themes, window, batches))
        .data(crate::api::objects::ObjectLoader::new(
            &app.objects,
            window,
            batches,
        ))
        .data(crate::api::suggestion_loaders::page_loader(
            &app.suggestions,
            window,
            batches,
        ))
}

/// Runs a GraphQL request in this process as `principal` would over HTTP
/// (the same schema, limits and DataLoaders), without HTTP: for batch jobs
/// and for the curator-page benchmark, which separates the engine's time
/// from the HTTP layer's.
pub async fn execute_in_process(
    app: &AppState,
    principal: Principal,
    request: GqlRequest,
) -> GqlResponse {
    let batches = Batches::default();
    let request = with_loaders(app, request.data(principal), &batches);
    batches.drive(app.gate.execute(&app.schema, request)).await
}

/// Runs a request and answers it in `media`.
async fn execute(
    app: &AppState,
    principal: Principal,
    request: GqlRequest,
    media: MediaType,
) -> Response {
    let operation = request.operation_name.clone();
    let batches = Batches::default();
    let request = with_loaders(app, request.data(principal), &batches);
    let mut response = batches.drive(app.gate.execute(&app.schema, request)).await;
    // Parse, validation and limit errors come from the engine without a code.
    for err in &mut response.errors {
        let ext = err
            .extensions
            .get_or_insert_with(ErrorExtensionValues::default);
        if ext.get("code").is_none() {
            // Apollo clients look for this code to send the query's text.
            let code = if err.message == "PersistedQueryNotFound" {
                "PERSISTED_QUERY_NOT_FOUND"
            } else {
                "BAD_USER_INPUT"
            };
            ext.set("code", async_graphql::Value::from(code));
            metrics::graphql_error(code);
        }
    }
    let mut out = respond(media, &response);
    if response.errors.is_empty() {
        out.extensions_mut().insert(Clean);
    }
    if response
        .errors
        .iter()
        .any(|e| e.message == MUTATION_OVER_GET)
    {
        out.extensions_mut().insert(MutationOverGet);
    }
    if let Some(name) = operation {
        out.extensions_mut().insert(OperationName(name));
    }
    out
}

/// A request error: nothing executed (no data, and no error has a path).
fn never_executed(response: &GqlResponse) -> bool {
    !response.errors.is_empty()
        && response.data == async_graphql::Value::Null
        && response.errors.iter().all(|e| e.path.is_empty())
}

fn respond(media: MediaType, response: &GqlResponse) -> Response {
    if !(media == MediaType::GraphqlResponse && never_executed(response)) {
        // Serialized straight from the response (no JSON tree in between).
        let body = serde_json::to_string(response).unwrap_or_else(|_| "null".to_owned());
        return with_type(StatusCode::OK, media, body);
    }
    let mut body = serde_json::to_value(response).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut body {
        map.remove("data");
    }
    let code = response.errors[0]
        .extensions
        .as_ref()
        .and_then(|e| e.get("code"))
        .and_then(|v| match v {
            async_graphql::Value::String(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let status = match code.as_str() {
        "TIMEOUT" | "UNAVAILABLE" => StatusCode::SERVICE_UNAVAILABLE,
        "STORAGE_FULL" => StatusCode::INSUFFICIENT_STORAGE,
        "UNAUTHENTICATED" => StatusCode::UNAUTHORIZED,
        "FORBIDDEN" => StatusCode::FORBIDDEN,
        "INTERNAL" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    with_type(status, media, body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn the_media_type_follows_accept() {
        assert_eq!(negotiate(&HeaderMap::new()), Some(MediaType::Json));
        assert_eq!(negotiate(&accept("*/*")), Some(MediaType::Json));
        assert_eq!(
            negotiate(&accept("application/graphql-response+json")),
            Some(MediaType::GraphqlResponse)
        );
        assert_eq!(
            negotiate(&accept(
                "application/json;q=0.9, application/graphql-response+json"
            )),
            Some(MediaType::GraphqlResponse)
        );
        assert_eq!(
            negotiate(&accept(
                "application/graphql-response+json;q=0.5, application/json"
            )),
            Some(MediaType::Json)
        );
        assert_eq!(negotiate(&accept("text/html")), None);
        assert_eq!(negotiate(&accept("application/json;q=0")), None);
    }

    #[test]
    fn request_parameters_are_checked_for_their_types() {
        use serde_json::json;
        assert!(request_from_json(json!({"query": "{ a }"})).is_ok());
        for bad in [
            json!({}),
            json!({"query": 5}),
            json!({"query": {"o": 1}}),
            json!(["{ a }"]),
            json!({"query": "{ a }", "variables": "x"}),
            json!({"query": "{ a }", "operationName": 1}),
            json!({"query": "{ a }", "extensions": []}),
        ] {
            assert!(request_from_json(bad.clone()).is_err(), "{bad}");
        }
        let r = request_from_query("query=%7B%20a%20%7D&variables=%7B%22x%22%3A1%7D").unwrap();
        assert_eq!(r.query, "{ a }");
        assert!(request_from_query("query=x&variables=nope").is_err());
    }
}
