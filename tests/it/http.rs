//! The HTTP surface: health, metrics, GraphiQL, SDL, limits and malformed requests.

use axum::body::Body;
use axum::http::Request;
use kartei::kernel::limits::Limits;
use serde_json::{Value, json};

use crate::support::{Engine, call, code, router, router_with, run, server};

#[test]
fn health_metrics_graphiql_and_schema_answer() {
    run(async {
        let srv = server(Engine::Embedded).await;
        let health: serde_json::Value =
            serde_json::from_str(&srv.get_text("/healthz").await).unwrap();
        assert_eq!(health, json!({"status": "ok", "store": "embedded"}));
        srv.data("{ portals { id } }", json!({}), None).await;
        let metrics = srv.get_text("/metrics").await;
        assert!(
            metrics.contains("kartei_http_requests_total{route=\"/graphql\",status=\"200\"}"),
            "{metrics}"
        );
        assert!(metrics.contains("kartei_store_calls_total{op=\"slice\",table=\"portals\"}"));
        assert!(metrics.contains("kartei_http_request_duration_seconds_count"));
        assert!(srv.get_text("/graphiql").await.contains("graphiql"));
        let sdl = srv.get_text("/schema.graphql").await;
        assert_eq!(sdl, kartei::api::schema::sdl());
    });
}

#[test]
fn schema_graphql_is_the_printed_sdl() {
    let on_disk = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql"))
        .unwrap_or_default();
    let printed = kartei::api::schema::sdl();
    if on_disk != printed {
        if std::env::var("KARTEI_UPDATE_SCHEMA").is_ok() {
            std::fs::write(
                concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql"),
                &printed,
            )
            .unwrap();
        }
        panic!(
            "schema.graphql differs from the running schema: run `cargo run -- schema > schema.graphql`"
        );
    }
}

fn post_graphql(body: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut r = Request::post("/graphql").header("content-type", "application/json");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(Body::from(body.to_owned())).unwrap()
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)))
}

/// The router alone (no socket): every malformed request gets a typed error.
#[test]
fn bad_requests_get_typed_errors() {
    run(async {
        let limits = Limits {
            max_body_bytes: 4096,
            max_depth: 6,
            max_complexity: 500,
            ..Limits::default()
        };
        let (router, _store) = router(limits).await;
        let big = format!(
            "{{\"query\": \"{{ portals {{ id }} }}\", \"x\": \"{}\"}}",
            "a".repeat(10_000)
        );
        let (status, _, body) = call(&router, post_graphql(&big, &[])).await;
        assert_eq!(status, 413);
        assert_eq!(code(&json_of(&body)), "PAYLOAD_TOO_LARGE");
        let (_, _, body) = call(&router, post_graphql("{}", &[])).await;
        assert_eq!(code(&json_of(&body)), "BAD_USER_INPUT");
        for bad in ["not json", "{\"query\": 5}"] {
            let (status, _, body) = call(&router, post_graphql(bad, &[])).await;
            assert_eq!(status, 400, "{bad}");
            assert_eq!(code(&json_of(&body)), "BAD_USER_INPUT");
        }
        for q in [
            "{ portals { id ",
            "{ unknownField }",
            "query { portals { children { children { children { children { children { id } } } } } } }",
            "{ category(id: \"x\") { keywords(first: 100) { edges { node { categories { children { keywords(first: 100) { edges { node { id } } } } } } } } } }",
        ] {
            let body = json!({ "query": q }).to_string();
            let (_, _, answer) = call(&router, post_graphql(&body, &[])).await;
            assert_eq!(code(&json_of(&answer)), "BAD_USER_INPUT", "{q}");
        }
        let query = json!({"query": "{ portals { id } }"}).to_string();
        let (status, _, body) = call(
            &router,
            post_graphql(&query, &[("authorization", "Basic abc")]),
        )
        .await;
        assert_eq!(status, 401);
        assert_eq!(code(&json_of(&body)), "UNAUTHENTICATED");
        // A REST route answers in its own shape; an announced oversize is refused unread.
        let (status, _, body) = call(
            &router,
            Request::put("/binaries")
                .header("content-type", "application/json")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status, json_of(&body)["error"]["code"].as_str()),
            (401, Some("UNAUTHENTICATED"))
        );
        let (status, _, _) = call(
            &router,
            Request::put("/binaries")
                .header("content-length", "99999999")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, 413);
        let (status, headers, _) = call(
            &router,
            Request::get("/iiif/3/abc").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, 303);
        assert_eq!(headers["location"], "/iiif/3/abc/info.json");
        // A decoded reference is encoded again for the header (it was a 500).
        let (status, headers, _) = call(
            &router,
            Request::get("/iiif/3/a%20b%C3%A9")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, 303);
        assert_eq!(headers["location"], "/iiif/3/a%20b%C3%A9/info.json");
        let (status, _, _) = call(
            &router,
            Request::get("/iiif/3/a%0Ab").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, 400);
        let (status, _, body) = call(
            &router,
            Request::get("/binary/unknown").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(
            (status, json_of(&body)["error"]["code"].as_str()),
            (404, Some("NOT_FOUND"))
        );
    });
}

/// GraphQL over HTTP: GET for queries, media types and their status codes.
#[test]
fn graphql_over_http_follows_the_spec() {
    run(async {
        let (router, _store) = router(Limits::default()).await;
        let get = |q: &str, accept: &str| {
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("query", q)
                .finish();
            Request::get(format!("/graphql?{query}"))
                .header("accept", accept)
                .body(Body::empty())
                .unwrap()
        };
        let (status, headers, body) =
            call(&router, get("{ portals { id } }", "application/json")).await;
        assert_eq!(status, 200);
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        assert!(json_of(&body)["data"]["portals"].is_array());

        // A mutation over GET: 405, and where to send it.
        let (status, headers, _) = call(
            &router,
            get("mutation { acknowledgeRelease(ddbIds: []) }", "*/*"),
        )
        .await;
        assert_eq!(status, 405);
        assert_eq!(headers["allow"], "POST");

        // application/graphql-response+json: a request that cannot run is a 400 without data.
        let gql = "application/graphql-response+json";
        let (status, headers, body) = call(&router, get("{ portals { id ", gql)).await;
        assert_eq!(status, 400);
        assert!(headers["content-type"].to_str().unwrap().starts_with(gql));
        assert!(json_of(&body).get("data").is_none());
        // ... and application/json answers the same document with 200.
        let (status, _, body) = call(&router, get("{ portals { id ", "application/json")).await;
        assert_eq!((status, code(&json_of(&body))), (200, "BAD_USER_INPUT"));

        // POST without a content type is 415; an Accept we cannot serve is 406.
        let (status, _, _) = call(
            &router,
            Request::post("/graphql")
                .body(Body::from("{\"query\":\"{ portals { id } }\"}"))
                .unwrap(),
        )
        .await;
        assert_eq!(status, 415);
        let (status, _, _) = call(&router, get("{ portals { id } }", "text/html")).await;
        assert_eq!(status, 406);
    });
}

/// CORS: the API answers only the origins `--cors-origin` names (with
/// credentials); IIIF images are open to every origin; by default, none.
#[test]
fn cors_follows_the_configured_origins() {
    run(async {
        let edge = kartei::edge::EdgeArgs {
            cors_origins: vec!["https://curators.example.org".into()],
            ..Default::default()
        };
        let (router, _store) = router_with(Limits::default(), edge).await;
        let preflight = |origin: &str, path: &str| {
            Request::options(path)
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization, content-type",
                )
                .body(Body::empty())
                .unwrap()
        };
        let (status, headers, _) = call(
            &router,
            preflight("https://curators.example.org", "/graphql"),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            headers["access-control-allow-origin"],
            "https://curators.example.org"
        );
        assert_eq!(headers["access-control-allow-credentials"], "true");
        let allowed = headers["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .to_ascii_lowercase();
        assert!(
            allowed.contains("authorization") && allowed.contains("content-type"),
            "{allowed}"
        );

        // Another origin gets no permission (the browser then refuses to read).
        let (_, headers, _) =
            call(&router, preflight("https://evil.example.net", "/graphql")).await;
        assert!(headers.get("access-control-allow-origin").is_none());
        let post = |origin: &str| {
            Request::post("/graphql")
                .header("origin", origin)
                .header("content-type", "application/json")
                .body(Body::from("{\"query\":\"{ portals { id } }\"}"))
                .unwrap()
        };
        let (_, headers, _) = call(&router, post("https://evil.example.net")).await;
        assert!(headers.get("access-control-allow-origin").is_none());
        let (_, headers, _) = call(&router, post("https://curators.example.org")).await;
        assert_eq!(
            headers["access-control-allow-origin"],
            "https://curators.example.org"
        );

        // IIIF is for everyone, whatever the API allows.
        let (_, headers, _) = call(
            &router,
            Request::get("/iiif/3/nothing/info.json")
                .header("origin", "https://viewer.example.com")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(headers["access-control-allow-origin"], "*");

        // Without --cors-origin: same origin only.
        let (plain, _store) = crate::support::router(Limits::default()).await;
        let (_, headers, _) = call(
            &plain,
            preflight("https://curators.example.org", "/graphql"),
        )
        .await;
        assert!(headers.get("access-control-allow-origin").is_none());
    });
}

/// Public reads are cacheable: persisted queries over GET, `Cache-Control`
/// and an ETag for anonymous answers, `no-store` for everything else; JSON
/// is compressed, every answer carries a request id.
#[test]
fn persisted_queries_caching_compression_and_request_ids() {
    use sha2::Digest;
    run(async {
        let (router, _store) = router(Limits::default()).await;
        let query = "{ portals { id } }";
        let hash = format!("{:x}", sha2::Sha256::digest(query.as_bytes()));
        let ext = json!({"persistedQuery": {"version": 1, "sha256Hash": hash}}).to_string();
        let by_hash = |with_query: bool, etag: Option<&str>| {
            let mut q = url::form_urlencoded::Serializer::new(String::new());
            q.append_pair("extensions", &ext);
            if with_query {
                q.append_pair("query", query);
            }
            let mut r = Request::get(format!("/graphql?{}", q.finish()));
            if let Some(e) = etag {
                r = r.header("if-none-match", e);
            }
            r.body(Body::empty()).unwrap()
        };
        // Unknown hash: the client is told to send the text once.
        let (status, _, body) = call(&router, by_hash(false, None)).await;
        assert_eq!(status, 200);
        assert_eq!(code(&json_of(&body)), "PERSISTED_QUERY_NOT_FOUND");
        let (status, _, body) = call(&router, by_hash(true, None)).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        // From then on the hash alone is enough, and the answer is cacheable.
        let (status, headers, body) = call(&router, by_hash(false, None)).await;
        assert_eq!(status, 200);
        assert!(json_of(&body)["data"]["portals"].is_array());
        assert_eq!(headers["cache-control"], "public, max-age=5");
        let etag = headers["etag"].to_str().unwrap().to_owned();
        assert!(headers.contains_key("x-request-id"));
        let (status, _, body) = call(&router, by_hash(false, Some(&etag))).await;
        assert_eq!(status, 304);
        assert!(body.is_empty());

        // A persisted mutation is still no GET.
        let mutation = "mutation { acknowledgeRelease(ddbIds: []) }";
        let mhash = format!("{:x}", sha2::Sha256::digest(mutation.as_bytes()));
        let mext = json!({"persistedQuery": {"version": 1, "sha256Hash": mhash}}).to_string();
        let body = json!({"query": mutation, "extensions": {"persistedQuery": {"version": 1, "sha256Hash": mhash}}}).to_string();
        let token = kartei::edge::auth::Auth::hs256(crate::support::SECRET.as_bytes())
            .unwrap()
            .mint("m", &["machine".into()], 60)
            .unwrap();
        let bearer = format!("Bearer {token}");
        let (status, headers, _) =
            call(&router, post_graphql(&body, &[("authorization", &bearer)])).await;
        assert_eq!(status, 200);
        assert_eq!(headers["cache-control"], "private, no-store");
        let q: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("extensions", &mext)
            .finish();
        let (status, headers, _) = call(
            &router,
            Request::get(format!("/graphql?{q}"))
                .header("authorization", &bearer)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, 405);
        assert_eq!(headers["allow"], "POST");

        // Compressed when asked for (and the SDL too).
        let (_, headers, _) = call(
            &router,
            Request::get("/schema.graphql")
                .header("accept-encoding", "gzip")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(headers["content-encoding"], "gzip");
        let (_, headers, _) = call(
            &router,
            Request::get("/graphql?query=%7B__schema%7Btypes%7Bname%7D%7D%7D")
                .header("accept-encoding", "br")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(
            headers.get("content-encoding").map(|v| v.to_str().unwrap()),
            Some("br"),
            "{headers:?}"
        );
    });
}

/// Every background loop runs under one lifecycle and reports itself: the
/// admin sees each worker's state, runs and last error; nobody else does.
#[test]
fn the_admin_sees_every_background_worker() {
    run(async {
        let srv = crate::support::binary_server(crate::support::Engine::Embedded).await;
        let q = "{ backgroundWorkers { name state runs errors lastError } }";
        let mut names = Vec::new();
        for _ in 0..100 {
            let d = srv.data(q, serde_json::json!({}), Some(&srv.admin())).await;
            names = d["backgroundWorkers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["name"].as_str().unwrap().to_owned())
                .collect();
            if names.len() >= 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        for want in [
            "binaries-scaling",
            "binaries-collector",
            "assignment-feed-tail",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
        }
        let r = srv.gql(q, serde_json::json!({}), None).await;
        assert_eq!(
            r["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
            "{r}"
        );
    });
}

/// Issue 33: with `--federation` the schema is an Apollo Federation 2
/// subgraph: `_service` gives its SDL with the entities' keys, and
/// `_entities` resolves representations by key (an unknown one to null);
/// without it, neither field exists.
#[test]
fn federation_serves_service_and_entities_only_when_enabled() {
    use kartei::domains::themes::service::{CategoryInput, KeywordInput, Themes};
    use kartei::kernel::roles::{Principal, Role};
    run(async {
        let edge = kartei::edge::EdgeArgs {
            federation: true,
            ..Default::default()
        };
        let (router, store) = router_with(Limits::default(), edge).await;
        let admin = Principal::local("admin", &[Role::Admin]);
        let themes = Themes::new(store.store.clone());
        for (id, parent) in [("p-fed", None), ("c-fed", Some("p-fed"))] {
            let input = CategoryInput {
                id: id.into(),
                parent_id: parent.map(Into::into),
                label: format!("Kategorie {id}"),
                ..Default::default()
            };
            themes.upsert_category(&admin, input).await.unwrap();
        }
        let keyword = KeywordInput {
            id: "k-fed".into(),
            label: "Föderation".into(),
            category_ids: vec!["c-fed".into()],
            ..Default::default()
        };
        themes.upsert_keyword(&admin, keyword).await.unwrap();

        let ask = |query: &str, variables: Value| {
            post_graphql(
                &json!({"query": query, "variables": variables}).to_string(),
                &[],
            )
        };
        let (status, _, body) = call(&router, ask("{ _service { sdl } }", json!({}))).await;
        assert_eq!(status, 200);
        let sdl = json_of(&body)["data"]["_service"]["sdl"]
            .as_str()
            .unwrap()
            .to_owned();
        for key in [
            r#"type Keyword @key(fields: "id")"#,
            r#"type Category @key(fields: "id")"#,
            r#"type Binary @key(fields: "referenceId")"#,
            r#"type Assignment @key(fields: "portalId ddbId keywordId creator")"#,
        ] {
            assert!(sdl.contains(key), "{key} not in\n{sdl}");
        }
        let (_, _, body) = call(
            &router,
            ask(
                "query($r: [_Any!]!) { _entities(representations: $r) { ... on Keyword { id label } ... on Category { id label } } }",
                json!({"r": [
                    {"__typename": "Keyword", "id": "k-fed"},
                    {"__typename": "Category", "id": "c-fed"},
                    {"__typename": "Keyword", "id": "nowhere"},
                ]}),
            ),
        )
        .await;
        assert_eq!(
            json_of(&body)["data"]["_entities"],
            json!([
                {"id": "k-fed", "label": "Föderation"},
                {"id": "c-fed", "label": "Kategorie c-fed"},
                null,
            ])
        );

        let (plain, _store) = router_with(Limits::default(), Default::default()).await;
        let (_, _, body) = call(&plain, ask("{ _service { sdl } }", json!({}))).await;
        assert!(
            json_of(&body)["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("_service")
        );
    });
}
