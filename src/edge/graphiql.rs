//! GraphiQL, served by the binary itself so that it works with no network:
//! the page, our start script, and GraphiQL and React from
//! `web/vendor/graphiql` (pinned npm packages, re-created and checked by
//! `scripts/vendor-graphiql.sh`), embedded at build time. The page's
//! Content-Security-Policy allows nothing from another origin.

use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `(file name, content type, bytes)` of every asset.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "graphiql.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../web/vendor/graphiql/graphiql.min.js"),
    ),
    (
        "graphiql.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../web/vendor/graphiql/graphiql.min.css"),
    ),
    (
        "react.production.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../web/vendor/graphiql/react.production.min.js"),
    ),
    (
        "react-dom.production.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../web/vendor/graphiql/react-dom.production.min.js"),
    ),
    (
        "kartei-graphiql.js",
        "text/javascript; charset=utf-8",
        START.as_bytes(),
    ),
];

/// Starts GraphiQL against this server's /graphql, with the headers editor
/// (for `Authorization: Bearer ...`) and the documentation explorer.
const START: &str = r#"'use strict';
const fetcher = GraphiQL.createFetcher({ url: new URL('/graphql', window.location.href).toString() });
const defaultQuery = `# kartei: the vocabulary, assignments and binaries of a cultural-heritage portal.
# Mutations need a token: add {"Authorization": "Bearer ..."} under Headers.
{
  portals {
    id
    label
    children { id label }
  }
}
`;
ReactDOM.createRoot(document.getElementById('graphiql')).render(
  React.createElement(GraphiQL, {
    fetcher,
    defaultQuery,
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: true,
    defaultEditorToolsVisibility: true,
  }),
);
"#;

const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kartei GraphiQL</title>
<link rel="stylesheet" href="/graphiql/assets/graphiql.min.css">
<style>html, body, #graphiql { height: 100%; margin: 0; }</style>
</head>
<body>
<div id="graphiql"><p style="font-family: sans-serif; padding: 1em">Loading GraphiQL…</p></div>
<script src="/graphiql/assets/react.production.min.js"></script>
<script src="/graphiql/assets/react-dom.production.min.js"></script>
<script src="/graphiql/assets/graphiql.min.js"></script>
<script src="/graphiql/assets/kartei-graphiql.js"></script>
</body>
</html>
"#;

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /graphiql`.
pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response()
}

/// `GET /graphiql/assets/{file}`: an embedded asset, with an ETag.
pub async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let Some((_, content_type, bytes)) = ASSETS.iter().find(|(name, _, _)| *name == file) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    super::web::embedded(&headers, content_type, "public, max-age=3600", *bytes)
}
