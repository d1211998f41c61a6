//! Only an administrator changes the vocabulary; anybody reads it.

use serde_json::json;

use crate::both_engines;
use crate::support::{Engine, TestApp, code};

async fn every_mutation_needs_the_admin_role(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let mutations = [
        (
            "mutation { upsertCategory(input: {id: \"c\", label: \"C\"}) { id } }",
            "upsertCategory",
        ),
        ("mutation { deleteCategory(id: \"c\") }", "deleteCategory"),
        (
            "mutation { upsertKeyword(input: {id: \"k\", label: \"K\", categoryIds: [\"c\"]}) { id } }",
            "upsertKeyword",
        ),
        ("mutation { deleteKeyword(id: \"k\") }", "deleteKeyword"),
        (
            "mutation { upsertGndEntity(input: {id: \"g\", name: \"G\"}) { id } }",
            "upsertGndEntity",
        ),
    ];
    let wrong_secret = kartei::edge::auth::Auth::hs256(b"another-secret-0123456789-0123456789")
        .unwrap()
        .mint("x", &["admin".into()], 60)
        .unwrap();
    for (m, name) in mutations {
        assert_eq!(
            app.anonymous().query_err(m, json!({})).await,
            "UNAUTHENTICATED",
            "{name}"
        );
        assert_eq!(
            code(&app.gql(m, json!({}), Some(&wrong_secret)).await),
            "UNAUTHENTICATED",
            "{name}"
        );
        for role in ["contributor", "archive", "machine", "editor"] {
            assert_eq!(
                app.signed_in("tester", &[role])
                    .query_err(m, json!({}))
                    .await,
                "FORBIDDEN",
                "{name} as {role}"
            );
        }
        let r = app.as_admin().response(m, json!({})).await;
        let errs = r.get("errors").map(|_| code(&r).to_owned());
        assert!(
            !matches!(errs.as_deref(), Some("UNAUTHENTICATED" | "FORBIDDEN")),
            "{name} as admin: {r}"
        );
    }
    // Readers need no token.
    app.anonymous()
        .query("{ portals { id } gndEntities { id } }", json!({}))
        .await;
}

both_engines!(every_mutation_needs_the_admin_role);
