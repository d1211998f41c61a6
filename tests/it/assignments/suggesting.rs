//! Suggesting a keyword for an object: what the role decides, and what is refused.

use serde_json::{Value, json};

use super::{SUGGEST, check_views, suggestion};
use crate::both_engines;
use crate::support::{Engine, TestApp, code};

async fn suggestion_type_and_status_come_from_the_role(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    for (role, ty, status) in [
        ("machine", "MACHINE", "AUTOSUGGESTED"),
        ("archive", "ARCHIVE", "SUGGESTED"),
        ("contributor", "ANYBODY", "SUGGESTED"),
    ] {
        let t = app.signed_in(&format!("{role}-1"), &[role]);
        let d = t
            .query(SUGGEST, suggestion(&v.p, "ddb-1", &v.k2, &v.c1))
            .await;
        let a = &d["suggestAssignment"];
        assert_eq!(a["assignmentType"], ty);
        assert_eq!(a["status"], status);
        assert_eq!(
            a["creator"],
            format!("{role}-1"),
            "creator is the token's subject"
        );
        assert_eq!(a["childCategory"]["id"], json!(v.c1));
        assert_eq!(a["confidence"], json!(0.5));
    }
    let d = app.anonymous().query("query($d: ID!) { objectAssignments(ddbId: $d) { creator status keyword { label } portal { id } } }", json!({"d": "ddb-1"}))
        .await;
    let mine: Vec<&Value> = d["objectAssignments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["portal"]["id"] == json!(v.p))
        .collect();
    assert_eq!(mine.len(), 3);
    assert!(mine.iter().all(|a| a["keyword"]["label"] == "München"));
    check_views(&app.store, &v.p).await;
}

async fn bad_suggestions_are_refused_and_change_nothing(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let t = app.as_contributor("c");
    let cases = [
        (
            suggestion(&v.p, "d", &v.kq, &v.c1),
            "keyword outside the portal",
        ),
        (
            suggestion(&v.p, "d", &v.k1, &v.g1),
            "child not directly under the portal",
        ),
        (
            suggestion(&v.p, "d", &v.k1, &v.qc),
            "child under another portal",
        ),
        (
            suggestion(&v.c1, "d", &v.k1, &v.g1),
            "a portal that is not top-level",
        ),
        (suggestion("nope", "d", &v.k1, &v.c1), "unknown portal"),
        (suggestion(&v.p, "d", "nope", &v.c1), "unknown keyword"),
        (suggestion(&v.p, " ", &v.k1, &v.c1), "blank ddb id"),
    ];
    for (input, why) in cases {
        let r = t.response(SUGGEST, input).await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "{why}: {r}");
    }
    for c in [1.5, -0.1] {
        let mut input = suggestion(&v.p, "d", &v.k1, &v.c1);
        input["i"]["confidence"] = json!(c);
        let r = t.response(SUGGEST, input).await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "confidence {c}");
    }
    let d = app
        .anonymous()
        .query(
            "query($p: ID!) { assignments(portalId: $p) { edges { node { ddbId } } } }",
            json!({"p": v.p}),
        )
        .await;
    assert_eq!(d["assignments"]["edges"], json!([]), "nothing was written");

    t.query(SUGGEST, suggestion(&v.p, "d", &v.k1, &v.c1)).await;
    let r = t
        .response(SUGGEST, suggestion(&v.p, "d", &v.k1, &v.c1))
        .await;
    assert_eq!(code(&r), "CONFLICT", "the same key twice");
    assert_eq!(r["errors"][0]["extensions"]["currentStatus"], "SUGGESTED");
}

both_engines!(
    suggestion_type_and_status_come_from_the_role,
    bad_suggestions_are_refused_and_change_nothing,
);
