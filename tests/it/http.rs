//! The HTTP surface: health, metrics, GraphiQL, SDL, limits and malformed requests.

use kartei::config::Limits;
use serde_json::json;

use crate::support::{Engine, code, run, server, server_with};

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
        assert_eq!(sdl, kartei::graphql::sdl());
    });
}

#[test]
fn schema_graphql_is_the_printed_sdl() {
    let on_disk = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql"))
        .unwrap_or_default();
    let printed = kartei::graphql::sdl();
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

#[test]
fn bad_requests_get_typed_errors() {
    run(async {
        let limits = Limits {
            max_body_bytes: 4096,
            max_depth: 6,
            max_complexity: 500,
            ..Limits::default()
        };
        let srv = server_with(Engine::Embedded, limits).await;
        let post = |body: String| {
            srv.client
                .post(format!("{}/graphql", srv.url))
                .header("content-type", "application/json")
                .body(body)
                .send()
        };
        let big = post(format!(
            "{{\"query\": \"{{ portals {{ id }} }}\", \"x\": \"{}\"}}",
            "a".repeat(10_000)
        ))
        .await
        .unwrap();
        assert_eq!(big.status(), 413);
        let big: serde_json::Value = big.json().await.unwrap();
        assert_eq!(code(&big), "PAYLOAD_TOO_LARGE");
        let empty: serde_json::Value = post("{}".to_owned()).await.unwrap().json().await.unwrap();
        assert_eq!(code(&empty), "BAD_USER_INPUT");
        for body in ["not json", "{\"query\": 5}"] {
            let r = post(body.to_owned()).await.unwrap();
            assert_eq!(r.status(), 400, "{body}");
            assert_eq!(code(&r.json().await.unwrap()), "BAD_USER_INPUT");
        }
        for q in [
            "{ portals { id ",
            "{ unknownField }",
            "query { portals { children { children { children { children { children { id } } } } } } }",
        ] {
            assert_eq!(
                code(&srv.gql(q, json!({}), None).await),
                "BAD_USER_INPUT",
                "{q}"
            );
        }
        let too_complex = "{ category(id: \"x\") { keywords(first: 100) { edges { node { categories { children { keywords(first: 100) { edges { node { id } } } } } } } } } }";
        assert_eq!(
            code(&srv.gql(too_complex, json!({}), None).await),
            "BAD_USER_INPUT"
        );
        let r = srv
            .client
            .post(format!("{}/graphql", srv.url))
            .header("authorization", "Basic abc")
            .json(&json!({"query": "{ portals { id } }"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(code(&r.json().await.unwrap()), "UNAUTHENTICATED");
    });
}
