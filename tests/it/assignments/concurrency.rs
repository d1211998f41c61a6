//! Curators acting at once: every change applies exactly once, the others
//! are told the status that won.

use serde_json::Value;

use super::{SUGGEST, check_views, key, suggestion, transition};
use crate::both_engines;
use crate::support::{Engine, TestApp, code};

async fn two_editors_accepting_at_once_one_wins(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let contributor = app.as_contributor("carla");
    contributor
        .query(SUGGEST, suggestion(&v.p, "o2", &v.k1, &v.c1))
        .await;
    let k = key(&v.p, "o2", &v.k1, "carla");
    let (anna, bert) = (app.as_editor("anna"), app.as_editor("bert"));
    let (a, b) = tokio::join!(
        transition(&anna, &k, "SUGGESTED", "ACCEPTED"),
        transition(&bert, &k, "SUGGESTED", "REJECTED"),
    );
    let outcomes = [&a, &b];
    let won: Vec<_> = outcomes
        .iter()
        .filter(|r| r.get("errors").is_none())
        .collect();
    assert_eq!(won.len(), 1, "{a} {b}");
    let lost = outcomes.iter().find(|r| r.get("errors").is_some()).unwrap();
    assert_eq!(code(lost), "CONFLICT");
    let winner_status = won[0]["data"]["transitionAssignment"]["status"].clone();
    assert_eq!(
        lost["errors"][0]["extensions"]["currentStatus"],
        winner_status
    );
    check_views(&app.store, &v.p).await;
}

async fn fifty_concurrent_attempts_apply_exactly_once(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let contributor = app.as_contributor("carla");
    let suggests =
        (0..50).map(|_| contributor.response(SUGGEST, suggestion(&v.p, "o50", &v.k2, &v.c1)));
    let results = futures::future::join_all(suggests).await;
    let created = results.iter().filter(|r| r.get("errors").is_none()).count();
    assert_eq!(created, 1, "one suggestion is created");
    assert!(
        results
            .iter()
            .filter(|r| r.get("errors").is_some())
            .all(|r| code(r) == "CONFLICT")
    );

    let k = key(&v.p, "o50", &v.k2, "carla");
    let editor = app.as_editor("erik");
    let accepts = (0..50).map(|i| {
        let to = if i % 2 == 0 { "ACCEPTED" } else { "REJECTED" };
        transition(&editor, &k, "SUGGESTED", to)
    });
    let results = futures::future::join_all(accepts).await;
    let applied: Vec<&Value> = results
        .iter()
        .filter(|r| r.get("errors").is_none())
        .collect();
    assert_eq!(applied.len(), 1, "exactly one transition applies");
    let status = applied[0]["data"]["transitionAssignment"]["status"].clone();
    for r in results.iter().filter(|r| r.get("errors").is_some()) {
        assert_eq!(code(r), "CONFLICT");
        assert_eq!(r["errors"][0]["extensions"]["currentStatus"], status);
    }
    check_views(&app.store, &v.p).await;
}

both_engines!(
    two_editors_accepting_at_once_one_wins,
    fifty_concurrent_attempts_apply_exactly_once,
);
