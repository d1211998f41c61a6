//! `undoTransitions`: a curator takes back their own latest change for ten
//! minutes after it, every action of the queue included (accept, reject,
//! a deletion proposal, delete, keep), while nothing changed since.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::{SUGGEST, check_views, key, release_queue, suggestion, transition};
use crate::both_engines;
use crate::support::{Caller, Engine, TestApp, movable_clock};

const UNDO: &str = "mutation($k: [AssignmentKeyInput!]!, $e: AssignmentStatus!) { undoTransitions(keys: $k, expected: $e) { applied assignment { status history { from to actor } } error { code message currentStatus } } }";

/// `who` undoes their change of `k` that left it `expected`: the one result.
async fn undo(who: &Caller<'_>, k: &Value, expected: &str) -> Value {
    let d = who.query(UNDO, json!({"k": [k], "e": expected})).await;
    d["undoTransitions"][0].clone()
}

fn applied(r: &Value, status: &str) {
    assert_eq!(r["applied"], true, "{r}");
    assert_eq!(r["assignment"]["status"], status, "{r}");
}

fn refused(r: &Value, code: &str) {
    assert_eq!(r["applied"], false, "{r}");
    assert_eq!(r["error"]["code"], code, "{r}");
}

async fn a_curator_undoes_their_own_latest_change_within_ten_minutes(engine: Engine) {
    // A clock the test can move forward.
    let (skew, clock) = movable_clock();
    let app = TestApp::on(engine)
        .with_vocabulary()
        .with_clock(clock)
        .build()
        .await;
    let v = app.vocabulary();
    let (erik, eva) = (app.as_editor("erik"), app.as_editor("eva"));
    let carla = app.as_contributor("carla");
    carla
        .query(SUGGEST, suggestion(&v.p, "u1", &v.k1, &v.c1))
        .await;
    let k = key(&v.p, "u1", &v.k1, "carla");

    // Nothing to undo yet: the status was made by the suggestion, not a change.
    refused(&undo(&erik, &k, "SUGGESTED").await, "INVALID_TRANSITION");

    // Accept, undo: SUGGESTED again, both changes in the history.
    transition(&erik, &k, "SUGGESTED", "ACCEPTED").await;
    refused(&undo(&eva, &k, "ACCEPTED").await, "INVALID_TRANSITION");
    refused(&undo(&erik, &k, "REJECTED").await, "CONFLICT");
    let r = undo(&erik, &k, "ACCEPTED").await;
    applied(&r, "SUGGESTED");
    let history = r["assignment"]["history"].as_array().unwrap();
    assert_eq!(
        history
            .iter()
            .map(|c| (
                c["from"].as_str().unwrap(),
                c["to"].as_str().unwrap(),
                c["actor"].as_str().unwrap()
            ))
            .collect::<Vec<_>>(),
        [
            ("SUGGESTED", "ACCEPTED", "erik"),
            ("ACCEPTED", "SUGGESTED", "erik")
        ]
    );
    // An undo is not undone again (there is no way from ACCEPTED back).
    refused(&undo(&erik, &k, "SUGGESTED").await, "INVALID_TRANSITION");

    // Accept, then reject: only the latest change is undone, and only once.
    transition(&erik, &k, "SUGGESTED", "ACCEPTED").await;
    transition(&erik, &k, "ACCEPTED", "REJECTED").await;
    applied(&undo(&erik, &k, "REJECTED").await, "ACCEPTED");
    refused(&undo(&erik, &k, "ACCEPTED").await, "INVALID_TRANSITION");

    // Eleven minutes later the change stays.
    transition(&erik, &k, "ACCEPTED", "REJECTED").await;
    skew.store(11 * 60, Ordering::SeqCst);
    let r = undo(&erik, &k, "REJECTED").await;
    refused(&r, "INVALID_TRANSITION");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("10 minutes"),
        "{r}"
    );
    check_views(&app.store, &v.p).await;
}

async fn a_deletion_and_its_proposal_are_undone_and_the_index_hears_of_it(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let erik = app.as_editor("erik");
    let carla = app.as_contributor("carla");
    let ddb = format!("ud-{}", crate::support::uid());
    carla
        .query(SUGGEST, suggestion(&v.p, &ddb, &v.k1, &v.c1))
        .await;
    let k = key(&v.p, &ddb, &v.k1, "carla");
    transition(&erik, &k, "SUGGESTED", "ACCEPTED").await;
    erik.query(
        "mutation($p: ID!) { runRelease(portalId: $p) { successful } }",
        json!({"p": v.p}),
    )
    .await;

    // A contributor takes back their own deletion proposal (they cannot "keep").
    transition(&carla, &k, "PUBLISHED", "DELETESUGGESTED").await;
    applied(&undo(&carla, &k, "DELETESUGGESTED").await, "PUBLISHED");

    // An editor's deletion, undone: proposed again, and queued for the
    // reindexer, which may have removed the object already.
    transition(&carla, &k, "PUBLISHED", "DELETESUGGESTED").await;
    transition(&erik, &k, "DELETESUGGESTED", "DELETED").await;
    app.as_admin()
        .query(
            "mutation($d: [ID!]!) { acknowledgeRelease(ddbIds: $d) }",
            json!({"d": [ddb]}),
        )
        .await;
    assert!(!release_queue(&app).await.contains(&ddb));
    applied(&undo(&erik, &k, "DELETED").await, "DELETESUGGESTED");
    assert!(
        release_queue(&app).await.contains(&ddb),
        "the undone deletion is not queued"
    );
    check_views(&app.store, &v.p).await;
}

both_engines!(
    a_curator_undoes_their_own_latest_change_within_ten_minutes,
    a_deletion_and_its_proposal_are_undone_and_the_index_hears_of_it
);
