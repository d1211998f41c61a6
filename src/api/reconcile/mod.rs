//! The W3C Entity Reconciliation API over the keyword vocabulary, so that
//! OpenRefine and other reconciliation clients can match their data against
//! our keywords (and read GND URIs, categories and synonyms back by data
//! extension). Two versions, each for all portals or one:
//!
//! | | all portals | one portal |
//! |---|---|---|
//! | 0.2 | `/reconcile` | `/reconcile/portals/{portalId}` |
//! | 1.0 draft | `/reconcile/1.0` | `/reconcile/portals/{portalId}/1.0` |
//!
//! 0.2: `GET` the service for its manifest, `GET`/`POST` `queries=` (a
//! batch) or `extend=` (form-encoded or in the query string, with an
//! optional JSONP `callback`), `suggest/{entity,type,property}?prefix=&cursor=`,
//! `preview?id=`, `properties?type=&limit=`. 1.0: `GET` for the manifest,
//! `POST match` and `POST extend` with JSON bodies,
//! `suggest/{entity,type,property}?prefix=&offset=&limit=`, `preview?id=`,
//! `extend/propose?type=&limit=`.
//!
//! Public like the vocabulary it reads, open to every origin. `engine.rs`
//! finds and scores, `wire.rs` speaks each version, `score.rs` compares.

pub mod engine;
pub mod score;
pub mod wire;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRef, OriginalUri, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use crate::api::binaries_rest::RestError;
use crate::api::iiif_rest::{base_url_of, vary_on_host_of};
use crate::kernel::error::ApiError;
use engine::{Candidate, Cell, Reconciler};
use wire::{Service, Version};

/// What the reconciliation routes hold: the engine and the server's
/// `--public-url` (the base of the manifest's URLs).
#[derive(Clone)]
pub struct Reconcile {
    pub reconciler: Reconciler,
    pub public_url: Option<String>,
}

/// The routes of both versions, for all portals and for one.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Reconcile: FromRef<S>,
{
    let service = || {
        Router::new()
            .route("/", get(service_02).post(service_02))
            .route("/suggest/{kind}", get(suggest_handler))
            .route("/preview", get(preview))
            .route("/properties", get(proposals_02))
            .route("/1.0", get(manifest_10))
            .route("/1.0/match", axum::routing::post(match_10))
            .route("/1.0/suggest/{kind}", get(suggest_handler))
            .route("/1.0/preview", get(preview))
            .route("/1.0/extend", axum::routing::post(extend_10))
            .route("/1.0/extend/propose", get(proposals_10))
    };
    Router::new()
        .nest("/reconcile", service())
        .nest("/reconcile/portals/{portal_id}", service())
        .layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(tower_http::cors::Any)
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([
                    header::CONTENT_TYPE,
                    header::ACCEPT,
                    header::ACCEPT_LANGUAGE,
                ]),
        )
}

/// The portal a route serves (none: all) and the service's path, from the
/// request's path.
fn scope(uri: &Uri) -> (Option<String>, String) {
    let path = uri.path();
    if let Some(rest) = path.strip_prefix("/reconcile/portals/") {
        let raw = rest.split('/').next().unwrap_or_default();
        let portal = percent_decoded(raw);
        return (Some(portal), format!("/reconcile/portals/{raw}"));
    }
    (None, "/reconcile".to_owned())
}

fn percent_decoded(s: &str) -> String {
    url::form_urlencoded::parse(
        format!("p={}", s.replace('+', "%2B").replace('&', "%26")).as_bytes(),
    )
    .next()
    .map(|(_, v)| v.into_owned())
    .unwrap_or_default()
}

/// The parameters of a query string or a form-encoded body.
fn params(text: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text).into_owned().collect()
}

fn param<'a>(ps: &'a [(String, String)], name: &str) -> Option<&'a str> {
    ps.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// A number parameter (absent: `default`).
fn number(ps: &[(String, String)], name: &str, default: usize) -> Result<usize, RestError> {
    match param(ps, name) {
        None | Some("") => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| ApiError::bad_input(format!("{name} is a non-negative integer")).into()),
    }
}

impl Reconcile {
    fn service(
        &self,
        version: Version,
        headers: &HeaderMap,
        path: String,
        name: String,
    ) -> (String, String, String) {
        let base = base_url_of(self.public_url.as_deref(), headers);
        let path = match version {
            Version::V02 => path,
            Version::V10 => format!("{path}/1.0"),
        };
        (base, path, name)
    }

    /// JSON (or JSONP with a valid `callback`), with `Vary: Host` when the
    /// URLs in it come from the request's host.
    fn answer(&self, body: &Value, callback: Option<&str>) -> Response {
        let response = match callback {
            Some(cb) => (
                [(header::CONTENT_TYPE, "application/javascript")],
                format!("/**/{cb}({body});"),
            )
                .into_response(),
            None => (
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response(),
        };
        vary_on_host_of(self.public_url.as_deref(), response)
    }
}

/// A JSONP callback: a JavaScript name path, nothing else.
fn callback(ps: &[(String, String)]) -> Result<Option<&str>, RestError> {
    match param(ps, "callback") {
        None => Ok(None),
        Some(cb)
            if !cb.is_empty()
                && cb.len() <= 64
                && cb
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c)) =>
        {
            Ok(Some(cb))
        }
        Some(_) => Err(ApiError::bad_input(
            "callback is a JavaScript name ([A-Za-z0-9_$.], at most 64)",
        )
        .into()),
    }
}

/// The service's name in its manifest.
fn name_of(portals: &[crate::domains::themes::model::Category], scope: &Option<String>) -> String {
    match (scope, portals.first()) {
        (Some(_), Some(p)) => format!("kartei keywords: {}", p.label),
        _ => "kartei keywords (all portals)".to_owned(),
    }
}

/// `GET`/`POST` a 0.2 service: its manifest, a batch of queries, or an extension.
async fn service_02(
    State(r): State<Reconcile>,
    OriginalUri(uri): OriginalUri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, RestError> {
    let mut ps = params(query.unwrap_or_default().as_bytes());
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if form {
        ps.extend(params(&body));
    } else if !body.is_empty() {
        return Err(ApiError::UnsupportedMediaType(
            "send queries= or extend= form-encoded (application/x-www-form-urlencoded)".into(),
        )
        .into());
    }
    let cb = callback(&ps)?;
    let (portal, path) = scope(&uri);
    let portals = r.reconciler.portals(portal.as_deref()).await?;
    if let Some(text) = param(&ps, "queries") {
        let batch = wire::queries_02(text)?;
        let (keys, queries): (Vec<String>, Vec<_>) = batch.into_iter().unzip();
        let answers = r.reconciler.reconcile(&portals, queries).await?;
        return Ok(r.answer(&wire::results(Version::V02, &keys, &answers), cb));
    }
    if let Some(text) = param(&ps, "extend") {
        let request: Value = serde_json::from_str(text)
            .map_err(|e| ApiError::bad_input(format!("extend is not JSON: {e}")))?;
        return Ok(r.answer(&extend(&r, Version::V02, &request).await?, cb));
    }
    let (base, path, name) = r.service(Version::V02, &headers, path, name_of(&portals, &portal));
    let manifest = wire::manifest(
        Version::V02,
        &Service {
            base: &base,
            path,
            name,
        },
    );
    Ok(r.answer(&manifest, cb))
}

/// `GET` a 1.0 service: its manifest.
async fn manifest_10(
    State(r): State<Reconcile>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Result<Response, RestError> {
    let (portal, path) = scope(&uri);
    let portals = r.reconciler.portals(portal.as_deref()).await?;
    let (base, path, name) = r.service(Version::V10, &headers, path, name_of(&portals, &portal));
    Ok(r.answer(
        &wire::manifest(
            Version::V10,
            &Service {
                base: &base,
                path,
                name,
            },
        ),
        None,
    ))
}

/// A JSON body.
fn json_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, RestError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if !json {
        return Err(
            ApiError::UnsupportedMediaType("send the request as application/json".into()).into(),
        );
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_input(format!("the body is not JSON: {e}")).into())
}

/// `POST {service}/1.0/match`.
async fn match_10(
    State(r): State<Reconcile>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, RestError> {
    let (portal, _) = scope(&uri);
    let queries = wire::queries_10(&json_body(&headers, &body)?)?;
    let portals = r.reconciler.portals(portal.as_deref()).await?;
    let answers = r.reconciler.reconcile(&portals, queries).await?;
    Ok(r.answer(&wire::results(Version::V10, &[], &answers), None))
}

/// `POST {service}/1.0/extend`.
async fn extend_10(
    State(r): State<Reconcile>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, RestError> {
    let request = json_body(&headers, &body)?;
    Ok(r.answer(&extend(&r, Version::V10, &request).await?, None))
}

async fn extend(r: &Reconcile, version: Version, request: &Value) -> Result<Value, RestError> {
    let (ids, properties) = wire::extend_request(request)?;
    let (keywords, context) = r.reconciler.keywords(&ids).await?;
    let rows: Vec<(String, Vec<Vec<Cell>>)> = ids
        .iter()
        .map(|id| {
            let cells = match keywords.iter().find(|k| &k.id == id) {
                Some(k) => properties
                    .iter()
                    .map(|p| engine::cells(k, p, &context))
                    .collect(),
                None => properties.iter().map(|_| Vec::new()).collect(),
            };
            (id.clone(), cells)
        })
        .collect();
    Ok(wire::extension(version, &properties, &rows))
}

/// Suggestions of one kind, `limit` after `skip`.
async fn suggest(
    r: &Reconcile,
    uri: &Uri,
    kind: &str,
    prefix: &str,
    skip: usize,
    limit: usize,
) -> Result<Value, RestError> {
    let (portal, _) = scope(uri);
    let limit = limit.min(r.reconciler.limits.max_limit);
    match kind {
        "entity" => {
            let portals = r.reconciler.portals(portal.as_deref()).await?;
            let found: Vec<Candidate> = r
                .reconciler
                .suggest_entities(&portals, prefix, skip, limit)
                .await?;
            Ok(wire::suggested_entities(&found))
        }
        "type" => {
            let portals = r.reconciler.portals(portal.as_deref()).await?;
            let found = r
                .reconciler
                .suggest_types(&portals, prefix, skip.saturating_add(limit))
                .await?;
            let page: Vec<_> = found.into_iter().skip(skip).collect();
            Ok(wire::suggested_types(&page))
        }
        "property" => {
            let found = r.reconciler.suggest_properties(prefix);
            let page: Vec<_> = found.into_iter().skip(skip).take(limit).collect();
            Ok(wire::suggested_properties(&page))
        }
        other => Err(ApiError::NotFound(format!(
            "suggest service {other:?} (entity, type or property)"
        ))
        .into()),
    }
}

/// `GET {service}/suggest/{kind}?prefix=&cursor=` (0.2) and
/// `GET {service}/1.0/suggest/{kind}?prefix=&offset=&limit=` (1.0): one
/// answer shape; whichever of `cursor` and `offset` comes is the skip.
async fn suggest_handler(
    State(r): State<Reconcile>,
    OriginalUri(uri): OriginalUri,
    Path(p): Path<std::collections::HashMap<String, String>>,
    RawQuery(query): RawQuery,
) -> Result<Response, RestError> {
    let ps = params(query.unwrap_or_default().as_bytes());
    let cb = callback(&ps)?;
    let kind = p.get("kind").map(String::as_str).unwrap_or_default();
    let prefix = param(&ps, "prefix").unwrap_or_default();
    let skip = number(&ps, "cursor", 0)?.max(number(&ps, "offset", 0)?);
    let limit = number(&ps, "limit", wire::DEFAULT_LIMIT)?;
    let body = suggest(&r, &uri, kind, prefix, skip, limit).await?;
    Ok(r.answer(&body, cb))
}

/// Whether `type_id` is `Keyword` or a category of the scope.
async fn known_type(r: &Reconcile, uri: &Uri, type_id: &str) -> Result<bool, RestError> {
    if type_id == engine::KEYWORD_TYPE.0 {
        return Ok(true);
    }
    let (portal, _) = scope(uri);
    let found = r.reconciler.themes.category(type_id).await?;
    Ok(found.is_some_and(|c| portal.as_deref().is_none_or(|p| c.portal_id() == p)))
}

async fn proposals(r: &Reconcile, uri: &Uri, ps: &[(String, String)]) -> Result<Value, RestError> {
    let type_id = param(ps, "type").unwrap_or(engine::KEYWORD_TYPE.0);
    let limit = number(ps, "limit", engine::PROPERTIES.len())?;
    Ok(wire::proposals(
        type_id,
        known_type(r, uri, type_id).await?,
        limit,
    ))
}

/// `GET {service}/properties?type=&limit=` (0.2).
async fn proposals_02(
    State(r): State<Reconcile>,
    OriginalUri(uri): OriginalUri,
    RawQuery(query): RawQuery,
) -> Result<Response, RestError> {
    let ps = params(query.unwrap_or_default().as_bytes());
    let cb = callback(&ps)?;
    Ok(r.answer(&proposals(&r, &uri, &ps).await?, cb))
}

/// `GET {service}/1.0/extend/propose?type=&limit=`.
async fn proposals_10(
    State(r): State<Reconcile>,
    OriginalUri(uri): OriginalUri,
    RawQuery(query): RawQuery,
) -> Result<Response, RestError> {
    let ps = params(query.unwrap_or_default().as_bytes());
    Ok(r.answer(&proposals(&r, &uri, &ps).await?, None))
}

fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// `GET {service}/preview?id=`: a small HTML card of a keyword (label,
/// category path, synonyms, GND link), for a client's frame.
async fn preview(
    State(r): State<Reconcile>,
    RawQuery(query): RawQuery,
) -> Result<Response, RestError> {
    let ps = params(query.unwrap_or_default().as_bytes());
    let id = param(&ps, "id").ok_or_else(|| ApiError::bad_input("preview needs ?id="))?;
    crate::kernel::check_id("keyword", id)?;
    let (keywords, context) = r.reconciler.keywords(&[id.to_owned()]).await?;
    let k = keywords
        .first()
        .ok_or_else(|| ApiError::NotFound(format!("keyword {id:?}")))?;
    let mut html = format!(
        "<!doctype html><html lang=\"de\"><meta charset=\"utf-8\"><title>{label}</title>\
         <body style=\"font:14px/1.4 system-ui,sans-serif;margin:8px\"><strong>{label}</strong> <small>{id}</small>",
        label = escaped(&k.label),
        id = escaped(&k.id)
    );
    if let Some(path) = context.path_of(k) {
        html.push_str(&format!("<div>{}</div>", escaped(&path)));
    }
    if !k.synonyms.is_empty() {
        html.push_str(&format!(
            "<div>Synonyme: {}</div>",
            escaped(&k.synonyms.join(", "))
        ));
    }
    if let Some(g) = k
        .primary_gnd_uri
        .as_deref()
        .filter(|g| g.starts_with("http"))
    {
        html.push_str(&format!(
            "<div>GND: <a href=\"{g}\" target=\"_blank\" rel=\"noopener\">{g}</a></div>",
            g = escaped(g)
        ));
    }
    if let Some(n) = &k.note {
        html.push_str(&format!("<div><em>{}</em></div>", escaped(n)));
    }
    html.push_str("</body></html>");
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    Ok(response)
}
