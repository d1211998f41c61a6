//! Every role against every assignment mutation.

use serde_json::json;

use super::{SUGGEST, TRANSITION, key, suggestion, transition};
use crate::both_engines;
use crate::support::{Engine, TestApp, code};

async fn every_role_against_every_mutation(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let mutations = [
        "suggest",
        "accept",
        "proposeDeletion",
        "bulk",
        "release",
        "acknowledge",
    ];
    // Which roles may do what (admin may do everything).
    let allowed = |m: &str, role: &str| match m {
        "suggest" => ["contributor", "archive", "machine", "editor", "admin"].contains(&role),
        "accept" | "bulk" | "release" => ["editor", "admin"].contains(&role),
        "proposeDeletion" => ["contributor", "archive", "editor", "admin"].contains(&role),
        "acknowledge" => ["machine", "admin"].contains(&role),
        _ => unreachable!(),
    };
    let roles = [
        None,
        Some("contributor"),
        Some("archive"),
        Some("machine"),
        Some("editor"),
        Some("admin"),
    ];
    let editor = app.as_editor("erik");
    for (i, role) in roles.iter().enumerate() {
        let sub = format!("who-{i}");
        let who = role.map_or_else(|| app.anonymous(), |r| app.signed_in(&sub, &[r]));
        // Fresh objects for each role, suggested and published by others.
        let c = app.as_contributor("carla");
        let ddb = format!("auth-{i}");
        c.query(SUGGEST, suggestion(&v.p, &ddb, &v.k1, &v.c1)).await;
        let k = key(&v.p, &ddb, &v.k1, "carla");
        let pub_ddb = format!("auth-pub-{i}");
        c.query(SUGGEST, suggestion(&v.p, &pub_ddb, &v.k1, &v.c1))
            .await;
        let pk = key(&v.p, &pub_ddb, &v.k1, "carla");
        transition(&editor, &pk, "SUGGESTED", "ACCEPTED").await;
        editor
            .query(
                "mutation($p: ID!) { runRelease(portalId: $p) { successful } }",
                json!({"p": v.p}),
            )
            .await;
        for m in mutations {
            let r = match m {
                "suggest" => {
                    who.response(SUGGEST, suggestion(&v.p, &format!("auth-s-{i}"), &v.k2, &v.c1))
                    .await
                }
                "accept" => {
                    who.response(TRANSITION, json!({"k": k, "e": "SUGGESTED", "t": "ACCEPTED"}))
                    .await
                }
                "proposeDeletion" => {
                    who.response(TRANSITION, json!({"k": pk, "e": "PUBLISHED", "t": "DELETESUGGESTED"}))
                    .await
                }
                "bulk" => {
                    who.response("mutation($k: [AssignmentKeyInput!]!) { transitionAssignments(keys: $k, expected: ACCEPTED, to: REJECTED) { applied } }", json!({"k": [k]}))
                    .await
                }
                "release" => {
                    who.response("mutation($p: ID!) { runRelease(portalId: $p) { successful } }", json!({"p": v.p}))
                    .await
                }
                "acknowledge" => {
                    who.response("mutation { acknowledgeRelease(ddbIds: [\"x\"]) }", json!({}))
                    .await
                }
                _ => unreachable!(),
            };
            match role {
                None => assert_eq!(code(&r), "UNAUTHENTICATED", "{m} anonymous"),
                // Allowed: done, or a release with nothing ACCEPTED
                // refused after the role was checked.
                Some(role) if allowed(m, role) => assert!(
                    r.get("errors").is_none() || code(&r) == "NOTHING_TO_RELEASE",
                    "{m} as {role}: {r}"
                ),
                Some(role) => assert_eq!(code(&r), "FORBIDDEN", "{m} as {role}"),
            }
        }
    }
    // A wrongly signed token is refused for every mutation.
    let forged = {
        let other =
            kartei::edge::auth::Auth::hs256(b"another-secret-0123456789abcdef-0123").unwrap();
        other.mint("mallory", &["admin".into()], 60).unwrap()
    };
    let r = app
        .gql(
            SUGGEST,
            suggestion(&v.p, "forged", &v.k1, &v.c1),
            Some(&forged),
        )
        .await;
    assert_eq!(code(&r), "UNAUTHENTICATED");
}

both_engines!(every_role_against_every_mutation);
