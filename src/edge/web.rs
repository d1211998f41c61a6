//! The curators' UI (`web/app`: ES modules and a style sheet, no build step),
//! embedded at build time so that `kartei serve` alone serves it. `/` and every
//! `/ui/...` path answer the page (the UI routes in the browser); its files
//! are under `/ui/assets/`. The page's Content-Security-Policy allows only
//! this server: no inline script or style, no other origin.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use crate::edge::AppState;

/// `(file name, bytes)` of every file of `web/app`; a test checks that the
/// folder holds no file missing here.
macro_rules! files {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_bytes!(concat!("../../web/app/", $name)) as &[u8])),*]
    };
}
pub const FILES: &[(&str, &[u8])] = files![
    "index.html",
    "app.js",
    "api.js",
    "dom.js",
    "workflow.js",
    "i18n.js",
    "queue.js",
    "counts.js",
    "tree.js",
    "object.js",
    "release.js",
    "suggestions.js",
    "crawl.js",
    "jobs.js",
    "zoom.js",
    "live.js",
    "oidc.js",
    "style.css",
    "favicon.svg",
];

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// A file's bytes: from `--web-dir` when set (UI development), else embedded.
fn file(app: &AppState, name: &str) -> Option<std::borrow::Cow<'static, [u8]>> {
    let (name, bytes) = FILES.iter().find(|(n, _)| *n == name)?;
    match &app.edge.web_dir {
        Some(dir) => std::fs::read(dir.join(name)).ok().map(Into::into),
        None => Some((*bytes).into()),
    }
}

/// `GET /` and `GET /ui/...`: the page, which routes in the browser.
pub async fn page(State(app): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let Some(bytes) = file(&app, "index.html") else {
        return (StatusCode::NOT_FOUND, "no page").into_response();
    };
    let mut r = embedded(&headers, "text/html; charset=utf-8", "no-cache", bytes);
    // With an OpenID provider, the page exchanges the sign-in's code at
    // its token endpoint: that origin, and only it, is added.
    let csp = match app.auth.oidc().and_then(|o| o.token_origin()) {
        Some(origin) => HeaderValue::from_str(&CSP.replace(
            "connect-src 'self'",
            &format!("connect-src 'self' {origin}"),
        ))
        .unwrap_or(HeaderValue::from_static(CSP)),
        None => HeaderValue::from_static(CSP),
    };
    r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, csp);
    r
}

/// `GET /ui/assets/{file}`.
pub async fn asset(
    State(app): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    match file(&app, &name) {
        Some(bytes) => embedded(&headers, content_type(&name), "no-cache", bytes),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}

/// `GET /favicon.ico`, which browsers and bookmarks ask for on their own:
/// the UI's icon (an SVG, which browsers take by its content type).
pub async fn favicon(State(app): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    asset(State(app), Path("favicon.svg".into()), headers).await
}

/// A file served with an ETag (304 when the client has it) and `cache`.
pub fn embedded(
    headers: &HeaderMap,
    content_type: &'static str,
    cache: &'static str,
    bytes: impl Into<axum::body::Body> + AsRef<[u8]>,
) -> Response {
    let etag = format!("\"{}\"", crate::store::fnv1a_hex_bytes(bytes.as_ref()));
    let mut out = HeaderMap::new();
    out.insert(header::ETAG, HeaderValue::from_str(&etag).expect("hex"));
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if crate::api::rest::etag_matches(headers, &etag) {
        return (StatusCode::NOT_MODIFIED, out).into_response();
    }
    out.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    (out, Into::<axum::body::Body>::into(bytes)).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_file_of_web_app_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/web/app");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            assert!(
                super::FILES.iter().any(|(n, _)| *n == name),
                "web/app/{name} is not in http::web::FILES"
            );
        }
    }
}
