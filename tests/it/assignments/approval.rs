//! Four eyes on a release: an admin requires a second editor for a portal;
//! one editor asks, another approves and so runs it; nobody runs it alone.

use serde_json::json;

use super::{SUGGEST, key, suggestion, transition};
use crate::both_engines;
use crate::support::{Engine, TestApp};

const APPROVAL: &str =
    "query($p: ID!) { releaseApproval(portalId: $p) { required requestedBy requestedAt } }";
const SET: &str = "mutation($p: ID!, $r: Boolean!) { setReleaseApproval(portalId: $p, required: $r) { required } }";
const REQUEST: &str =
    "mutation($p: ID!) { requestRelease(portalId: $p) { requestedBy requestedAt } }";
const APPROVE: &str =
    "mutation($p: ID!) { approveRelease(portalId: $p) { successful published actor message } }";
const WITHDRAW: &str = "mutation($p: ID!) { withdrawReleaseRequest(portalId: $p) { requestedBy } }";
const RUN: &str = "mutation($p: ID!) { runRelease(portalId: $p) { published } }";

async fn a_release_needs_a_second_editor_when_the_portal_asks_for_four_eyes(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let p = json!({"p": v.p});
    let (anna, ben) = (app.as_editor("anna"), app.as_editor("ben"));
    app.as_contributor("carla")
        .query(SUGGEST, suggestion(&v.p, "f1", &v.k1, &v.c1))
        .await;
    let k = key(&v.p, "f1", &v.k1, "carla");

    // Off by default; only an admin turns it on.
    assert_eq!(
        anna.query(APPROVAL, p.clone()).await["releaseApproval"]["required"],
        false
    );
    assert_eq!(
        anna.query_err(SET, json!({"p": v.p, "r": true})).await,
        "FORBIDDEN"
    );
    app.as_admin()
        .query(SET, json!({"p": v.p, "r": true}))
        .await;
    assert_eq!(
        anna.query_err(REQUEST, p.clone()).await,
        "NOTHING_TO_RELEASE"
    );
    transition(&anna, &k, "SUGGESTED", "ACCEPTED").await;

    // Nobody releases alone, not even with runRelease.
    assert_eq!(anna.query_err(RUN, p.clone()).await, "APPROVAL_REQUIRED");
    assert_eq!(ben.query_err(APPROVE, p.clone()).await, "NOT_FOUND");
    let asked = anna.query(REQUEST, p.clone()).await;
    assert_eq!(asked["requestRelease"]["requestedBy"], "anna");
    assert_eq!(ben.query_err(REQUEST, p.clone()).await, "CONFLICT");
    assert_eq!(anna.query_err(APPROVE, p.clone()).await, "OWN_REQUEST");
    let waiting = app.anonymous().query(APPROVAL, p.clone()).await;
    assert_eq!(
        waiting["releaseApproval"]["requestedBy"],
        serde_json::Value::Null,
        "anonymous callers see no names"
    );
    assert!(waiting["releaseApproval"]["requestedAt"].is_string());

    // Withdrawn, asked again, approved by the second editor: published.
    anna.query(WITHDRAW, p.clone()).await;
    assert_eq!(ben.query_err(APPROVE, p.clone()).await, "NOT_FOUND");
    anna.query(REQUEST, p.clone()).await;
    let run = ben.query(APPROVE, p.clone()).await;
    let run = &run["approveRelease"];
    assert_eq!(
        (run["successful"].as_bool(), run["published"].as_i64()),
        (Some(true), Some(1)),
        "{run}"
    );
    assert_eq!(run["actor"], "ben");
    assert!(run["message"].as_str().unwrap().contains("anna"), "{run}");
    assert_eq!(
        anna.query(APPROVAL, p.clone()).await["releaseApproval"]["requestedBy"],
        serde_json::Value::Null
    );
    assert_eq!(
        ben.query_err(APPROVE, p.clone()).await,
        "NOT_FOUND",
        "approved once only"
    );
    let log = ben
        .query(
            "query($p: ID!) { releaseLog(portalId: $p, first: 5) { actor message } }",
            p.clone(),
        )
        .await;
    assert_eq!(log["releaseLog"][0]["actor"], "ben");

    // Off again: runRelease runs, a request is refused.
    app.as_admin()
        .query(SET, json!({"p": v.p, "r": false}))
        .await;
    assert_eq!(
        anna.query_err(REQUEST, p.clone()).await,
        "APPROVAL_NOT_REQUIRED"
    );
    assert_eq!(anna.query_err(RUN, p.clone()).await, "NOTHING_TO_RELEASE");
}

both_engines!(a_release_needs_a_second_editor_when_the_portal_asks_for_four_eyes);
