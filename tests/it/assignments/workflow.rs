//! The curation workflow: the transition table, the release run and the
//! reindexer's queue, which holds only what changed.

use std::collections::BTreeSet;

use kartei::domains::assignments::model::AssignmentStatus;
use kartei::domains::assignments::repair::repair_views;
use kartei::domains::assignments::service::Assignments;
use serde_json::{Value, json};

use super::{SUGGEST, check_views, key, principal, release_queue, suggestion, transition};
use crate::both_engines;
use crate::support::{Caller, Engine, Faulty, TestApp, code, uid};

async fn the_workflow_follows_the_transition_table(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let contributor = app.as_contributor("carla");
    let editor = app.as_editor("erik");
    let machine = app.as_machine("bot");
    contributor
        .query(SUGGEST, suggestion(&v.p, "o1", &v.k1, &v.c1))
        .await;
    let k = key(&v.p, "o1", &v.k1, "carla");

    // Not in the table at all.
    for (from, to) in [
        ("SUGGESTED", "PUBLISHED"),
        ("SUGGESTED", "DELETED"),
        ("ACCEPTED", "PUBLISHED"),
        ("REJECTED", "ACCEPTED"),
        ("SUGGESTED", "SUGGESTED"),
    ] {
        let r = transition(&editor, &k, from, to).await;
        assert_eq!(code(&r), "INVALID_TRANSITION", "{from} -> {to}");
    }
    // In the table, but not for this role.
    let r = transition(&contributor, &k, "SUGGESTED", "ACCEPTED").await;
    assert_eq!(code(&r), "FORBIDDEN");
    let r = transition(&machine, &k, "SUGGESTED", "ACCEPTED").await;
    assert_eq!(code(&r), "FORBIDDEN");

    // A stale `expected` names the current status.
    let r = transition(&editor, &k, "AUTOSUGGESTED", "ACCEPTED").await;
    assert_eq!(code(&r), "CONFLICT");
    assert_eq!(r["errors"][0]["extensions"]["currentStatus"], "SUGGESTED");
    // An unknown key.
    let r = transition(
        &editor,
        &key(&v.p, "o1", &v.k1, "nobody"),
        "SUGGESTED",
        "ACCEPTED",
    )
    .await;
    assert_eq!(code(&r), "NOT_FOUND");

    let d = transition(&editor, &k, "SUGGESTED", "ACCEPTED").await;
    assert_eq!(
        d["data"]["transitionAssignment"]["status"], "ACCEPTED",
        "{d}"
    );

    // The release run publishes it and queues the object.
    let run = editor
        .query(
            "mutation($p: ID!) { runRelease(portalId: $p) { portalId successful published time } }",
            json!({"p": v.p}),
        )
        .await;
    assert_eq!(run["runRelease"]["successful"], true);
    assert_eq!(run["runRelease"]["published"], 1);
    let queue = release_queue(&app).await;
    assert!(queue.contains("o1"), "{queue:?}");

    // A contributor proposes deletion, the editor restores, then deletes.
    let d = transition(&contributor, &k, "PUBLISHED", "DELETESUGGESTED").await;
    assert_eq!(
        d["data"]["transitionAssignment"]["status"],
        "DELETESUGGESTED"
    );
    let d = transition(&editor, &k, "DELETESUGGESTED", "PUBLISHED").await;
    assert_eq!(d["data"]["transitionAssignment"]["status"], "PUBLISHED");
    transition(&contributor, &k, "PUBLISHED", "DELETESUGGESTED").await;

    let acked = machine
        .query(
            "mutation($ids: [ID!]!) { acknowledgeRelease(ddbIds: $ids) }",
            json!({"ids": ["o1", "never-queued"]}),
        )
        .await;
    assert_eq!(acked["acknowledgeRelease"], 1);
    assert!(!release_queue(&app).await.contains("o1"));

    // DELETED queues the object at once (the index must drop the keyword).
    let d = transition(&editor, &k, "DELETESUGGESTED", "DELETED").await;
    assert_eq!(d["data"]["transitionAssignment"]["status"], "DELETED");
    assert!(release_queue(&app).await.contains("o1"));

    assert_one_good_run(&app.anonymous(), &v.p).await;
    check_views(&app.store, &v.p).await;
}

/// `releaseRuns` of `portal` as `who` reads them: one successful run of one.
async fn assert_one_good_run(who: &Caller<'_>, portal: &str) {
    let runs = who
        .query(
            "query($p: ID!) { releaseRuns(portalId: $p) { successful published } }",
            json!({"p": portal}),
        )
        .await;
    assert_eq!(
        runs["releaseRuns"],
        json!([{"successful": true, "published": 1}])
    );
}

/// Issue 32: a release with nothing ACCEPTED overwrote the last good run
/// with an empty one, and nobody could see who ran a release.
async fn an_empty_release_is_refused_and_every_run_names_who_ran_it(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let contributor = app.as_contributor("carla");
    let editor = app.as_editor("erik");
    const RUN: &str = "mutation($p: ID!) { runRelease(portalId: $p) { published actor } }";
    const LOG: &str =
        "query($p: ID!) { releaseLog(portalId: $p) { successful published actor time } }";

    let refused = editor.response(RUN, json!({"p": v.p})).await;
    assert_eq!(code(&refused), "NOTHING_TO_RELEASE", "{refused}");
    let log = editor.query(LOG, json!({"p": v.p})).await;
    assert_eq!(log["releaseLog"], json!([]), "a refused run is no run");

    for (ddb, who) in [("o1", "erik"), ("o2", "edda")] {
        contributor
            .query(SUGGEST, suggestion(&v.p, ddb, &v.k1, &v.c1))
            .await;
        let runner = app.as_editor(who);
        transition(
            &runner,
            &key(&v.p, ddb, &v.k1, "carla"),
            "SUGGESTED",
            "ACCEPTED",
        )
        .await;
        let run = runner.query(RUN, json!({"p": v.p})).await;
        assert_eq!(run["runRelease"], json!({"published": 1, "actor": who}));
        // Runs within one second share a log row's key.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
    // Nothing is left: refused again, and the last good run stays.
    let refused = editor.response(RUN, json!({"p": v.p})).await;
    assert_eq!(code(&refused), "NOTHING_TO_RELEASE", "{refused}");
    assert_one_good_run(&editor, &v.p).await;

    let log = editor.query(LOG, json!({"p": v.p})).await;
    let who: Vec<&Value> = log["releaseLog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["actor"])
        .collect();
    assert_eq!(who, [&json!("edda"), &json!("erik")], "newest first: {log}");
    // Each assignment's history: who accepted it, and its publication by
    // the release run; actors for editors only.
    const HISTORY: &str = "query($d: ID!, $p: ID) { objectAssignments(ddbId: $d, portalId: $p) { history { from to actor at } } }";
    let h = editor.query(HISTORY, json!({"d": "o2", "p": v.p})).await;
    let changes = &h["objectAssignments"][0]["history"];
    assert_eq!(changes[0]["from"], "SUGGESTED", "{h}");
    assert_eq!(changes[0]["to"], "ACCEPTED", "{h}");
    assert_eq!(changes[0]["actor"], "edda", "{h}");
    assert_eq!(changes[1]["to"], "PUBLISHED", "{h}");
    assert_eq!(
        changes[1]["actor"],
        Value::Null,
        "a release publishes, nobody in person: {h}"
    );
    assert!(
        changes[0]["at"].as_str() < changes[1]["at"].as_str(),
        "oldest first: {h}"
    );
    let h = app
        .anonymous()
        .query(HISTORY, json!({"d": "o2", "p": v.p}))
        .await;
    assert_eq!(
        h["objectAssignments"][0]["history"][0]["actor"],
        Value::Null,
        "{h}"
    );
    assert_eq!(
        h["objectAssignments"][0]["history"][0]["to"], "ACCEPTED",
        "{h}"
    );

    // Readers without a token see the runs, not who ran them.
    let log = app.anonymous().query(LOG, json!({"p": v.p})).await;
    assert_eq!(log["releaseLog"][0]["actor"], Value::Null, "{log}");
    assert_eq!(log["releaseLog"][0]["published"], 1, "{log}");
}

/// Issue 30: the ids of transitions that failed (CONFLICT, NOT_FOUND,
/// INVALID_TRANSITION) went into the reindexer's queue with the applied ones.
async fn a_bulk_transition_queues_only_the_objects_whose_transition_applied(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let contributor = app.as_contributor("carla");
    let editor = app.as_editor("erik");
    let machine = app.as_machine("bot");
    let u = uid();
    let ddbs: Vec<String> = (0..6).map(|i| format!("bulk-{u}-{i}")).collect();
    let keys: Vec<Value> = ddbs.iter().map(|d| key(&v.p, d, &v.k1, "carla")).collect();
    for d in &ddbs {
        contributor
            .query(SUGGEST, suggestion(&v.p, d, &v.k1, &v.c1))
            .await;
    }
    let bulk = "mutation($k: [AssignmentKeyInput!]!, $e: AssignmentStatus!, $t: AssignmentStatus!) { transitionAssignments(keys: $k, expected: $e, to: $t) { applied key { ddbId } error { code } } }";
    // Each key's ddb id, whether it applied, and its error code.
    let bulk_move = |keys: Vec<Value>, expected: &'static str, to: &'static str| {
        let _app = &app;
        let editor = editor.clone();
        async move {
            let d = editor
                .query(bulk, json!({"k": keys, "e": expected, "t": to}))
                .await;
            d["transitionAssignments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["key"]["ddbId"].as_str().unwrap().to_owned(),
                        r["applied"] == true,
                        r["error"]["code"].clone(),
                    )
                })
                .collect::<Vec<(String, bool, Value)>>()
        }
    };
    // All published by a release run, then taken off the queue.
    let accepted = bulk_move(keys.clone(), "SUGGESTED", "ACCEPTED").await;
    assert!(accepted.iter().all(|(_, applied, _)| *applied));
    editor
        .query(
            "mutation($p: ID!) { runRelease(portalId: $p) { successful } }",
            json!({"p": v.p}),
        )
        .await;
    let acked = machine
        .query(
            "mutation($ids: [ID!]!) { acknowledgeRelease(ddbIds: $ids) }",
            json!({ "ids": ddbs }),
        )
        .await;
    assert_eq!(acked["acknowledgeRelease"], 6);
    let mine = |queue: BTreeSet<String>| -> BTreeSet<String> {
        queue.into_iter().filter(|d| ddbs.contains(d)).collect()
    };
    assert!(mine(release_queue(&app).await).is_empty());

    // Deletion proposed for the first three only.
    for k in &keys[..3] {
        let d = transition(&contributor, k, "PUBLISHED", "DELETESUGGESTED").await;
        assert_eq!(
            d["data"]["transitionAssignment"]["status"],
            "DELETESUGGESTED"
        );
    }
    // A single transition that conflicts, one not in the workflow, one of an unknown key.
    let r = transition(&editor, &keys[4], "DELETESUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "CONFLICT");
    let r = transition(&editor, &keys[5], "SUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "INVALID_TRANSITION");
    let unknown = key(&v.p, &format!("bulk-{u}-unknown"), &v.k1, "carla");
    let r = transition(&editor, &unknown, "DELETESUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "NOT_FOUND");
    assert!(mine(release_queue(&app).await).is_empty());

    // The bulk deletion: three apply, three conflict (still PUBLISHED), one is unknown.
    let mut all = keys.clone();
    all.push(unknown);
    let results = bulk_move(all, "DELETESUGGESTED", "DELETED").await;
    let applied: BTreeSet<String> = results
        .iter()
        .filter(|(_, a, _)| *a)
        .map(|(d, _, _)| d.clone())
        .collect();
    assert_eq!(applied, ddbs[..3].iter().cloned().collect());
    let codes: Vec<&Value> = results.iter().skip(3).map(|(_, _, c)| c).collect();
    assert_eq!(
        codes,
        [
            &json!("CONFLICT"),
            &json!("CONFLICT"),
            &json!("CONFLICT"),
            &json!("NOT_FOUND")
        ],
        "{results:?}"
    );
    let queue = release_queue(&app).await;
    assert!(!queue.contains(&format!("bulk-{u}-unknown")));
    assert_eq!(
        mine(queue),
        applied,
        "only the applied transitions are queued"
    );

    // Three deletions whose writes after the compare-and-set are lost (a
    // crash on Cassandra; the query rows and the queue row are one batch): a
    // retry of the same change queues one, another change that finds it
    // deleted (a client retrying what it sent before the crash) the second,
    // repair-views the third.
    for k in &keys[3..6] {
        transition(&contributor, k, "PUBLISHED", "DELETESUGGESTED").await;
    }
    let faulty = Faulty::new(app.store.clone());
    *faulty.fail_apply_on.lock().unwrap() = vec!["release_ddbids"];
    let crashing = Assignments::new(faulty);
    for d in &ddbs[3..6] {
        let k = kartei::domains::assignments::model::AssignmentKey {
            portal_id: v.p.clone(),
            ddb_id: d.clone(),
            keyword_id: v.k1.clone(),
            creator: "carla".into(),
        };
        crashing
            .transition(
                &principal("erik", "editor"),
                &k,
                AssignmentStatus::Deletesuggested,
                AssignmentStatus::Deleted,
            )
            .await
            .expect("the compare-and-set applied");
    }
    assert_eq!(mine(release_queue(&app).await), applied);
    let r = transition(&editor, &keys[3], "DELETESUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(release_queue(&app).await.contains(&ddbs[3]));
    let r = transition(&contributor, &keys[5], "PUBLISHED", "DELETESUGGESTED").await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(release_queue(&app).await.contains(&ddbs[5]));
    repair_views(&app.store, true, Some(&v.p)).await.unwrap();
    let all_six: BTreeSet<String> = ddbs.iter().cloned().collect();
    assert_eq!(mine(release_queue(&app).await), all_six);
    check_views(&app.store, &v.p).await;
}

/// An undo out of DELETED whose writes after its compare-and-set are lost
/// (the queue row with them): the next change that finds the assignment
/// moved on sees the query rows still showing DELETED and queues its ddb id,
/// so the search index hears that it is back.
async fn a_lost_undo_out_of_deleted_is_queued_by_the_next_change(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let contributor = app.as_contributor("carla");
    let editor = app.as_editor("erik");
    let ddb = format!("undo-lost-{}", uid());
    let k = key(&v.p, &ddb, &v.k1, "carla");
    contributor
        .query(SUGGEST, suggestion(&v.p, &ddb, &v.k1, &v.c1))
        .await;
    let r = transition(&editor, &k, "SUGGESTED", "ACCEPTED").await;
    assert_eq!(
        r["data"]["transitionAssignment"]["status"], "ACCEPTED",
        "{r}"
    );
    editor
        .query(
            "mutation($p: ID!) { runRelease(portalId: $p) { successful } }",
            json!({"p": v.p}),
        )
        .await;
    for (who, from, to) in [
        (&contributor, "PUBLISHED", "DELETESUGGESTED"),
        (&editor, "DELETESUGGESTED", "DELETED"),
    ] {
        let r = transition(who, &k, from, to).await;
        assert_eq!(r["data"]["transitionAssignment"]["status"], to, "{r}");
    }
    app.as_machine("bot")
        .query(
            "mutation($ids: [ID!]!) { acknowledgeRelease(ddbIds: $ids) }",
            json!({ "ids": [ddb] }),
        )
        .await;
    assert!(!release_queue(&app).await.contains(&ddb));

    let faulty = Faulty::new(app.store.clone());
    *faulty.fail_apply_on.lock().unwrap() = vec!["release_ddbids"];
    let crashing = Assignments::new(faulty);
    let typed = kartei::domains::assignments::model::AssignmentKey {
        portal_id: v.p.clone(),
        ddb_id: ddb.clone(),
        keyword_id: v.k1.clone(),
        creator: "carla".into(),
    };
    let undone = crashing
        .undo_many(
            &principal("erik", "editor"),
            vec![typed],
            AssignmentStatus::Deleted,
        )
        .await
        .unwrap();
    assert!(undone[0].1.is_ok(), "{:?}", undone[0].1);
    assert!(
        !release_queue(&app).await.contains(&ddb),
        "the queue row was lost"
    );

    let r = transition(&contributor, &k, "PUBLISHED", "DELETESUGGESTED").await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(release_queue(&app).await.contains(&ddb));
}

both_engines!(
    the_workflow_follows_the_transition_table,
    an_empty_release_is_refused_and_every_run_names_who_ran_it,
    a_bulk_transition_queues_only_the_objects_whose_transition_applied,
    a_lost_undo_out_of_deleted_is_queued_by_the_next_change,
);
