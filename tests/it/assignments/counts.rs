//! `assignmentCounts`: a portal's counts by status and by creator, with each
//! creator's acceptance rate, exact after suggestions, single and bulk
//! changes, undo, release runs and imports; `repair-views` finds and mends
//! counts that went wrong.

use kartei::domains::assignments::model::{AssignmentStatus, count_change};
use kartei::domains::assignments::repair::repair_views;
use serde_json::{Value, json};

use super::{SUGGEST, check_views, import_text, key, suggestion, transition};
use crate::both_engines;
use crate::support::{Caller, Engine, TestApp};

const COUNTS: &str = "query($p: ID!) { assignmentCounts(portalId: $p) { portalId total byStatus { status count } byCreator { creator status count } creators { creator total open accepted rejected acceptanceRate } } }";
const BULK: &str = "mutation($k: [AssignmentKeyInput!]!, $e: AssignmentStatus!, $t: AssignmentStatus!) { transitionAssignments(keys: $k, expected: $e, to: $t) { applied } }";
const UNDO: &str = "mutation($k: [AssignmentKeyInput!]!, $e: AssignmentStatus!) { undoTransitions(keys: $k, expected: $e) { applied } }";

async fn counts(who: &Caller<'_>, portal: &str) -> Value {
    who.query(COUNTS, json!({"p": portal})).await["assignmentCounts"].clone()
}

/// The non-zero statuses of `c`, as `STATUS=n`.
fn statuses(c: &Value) -> Vec<String> {
    c["byStatus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["count"] != 0)
        .map(|s| format!("{}={}", s["status"].as_str().unwrap(), s["count"]))
        .collect()
}

/// `c`'s counts by creator, as `creator STATUS=n`.
fn by_creator(c: &Value) -> Vec<String> {
    c["byCreator"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} {}={}",
                s["creator"].as_str().unwrap(),
                s["status"].as_str().unwrap(),
                s["count"]
            )
        })
        .collect()
}

async fn counts_follow_every_change_of_a_portal(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let (erik, bot, carla) = (
        app.as_editor("erik"),
        app.as_machine("bot"),
        app.as_contributor("carla"),
    );
    let anonymous = app.anonymous();

    // Nothing yet: every status listed, all zero.
    let c = counts(&anonymous, &v.p).await;
    assert_eq!(c["portalId"], v.p.as_str());
    assert_eq!(c["total"], 0);
    assert_eq!(c["byStatus"].as_array().unwrap().len(), 7);
    assert!(statuses(&c).is_empty() && by_creator(&c).is_empty());

    for o in ["o1", "o2", "o3", "o4"] {
        bot.query(SUGGEST, suggestion(&v.p, o, &v.k1, &v.c1)).await;
    }
    carla
        .query(SUGGEST, suggestion(&v.p, "o1", &v.k2, &v.c2))
        .await;
    // Another portal's suggestion counts there only.
    bot.query(SUGGEST, suggestion(&v.q, "o1", &v.kq, &v.qc))
        .await;
    // A refused suggestion (again the same key) counts nothing.
    bot.response(SUGGEST, suggestion(&v.p, "o1", &v.k1, &v.c1))
        .await;
    let c = counts(&anonymous, &v.p).await;
    assert_eq!(c["total"], 5);
    assert_eq!(statuses(&c), ["AUTOSUGGESTED=4", "SUGGESTED=1"]);
    assert_eq!(by_creator(&c), ["bot AUTOSUGGESTED=4", "carla SUGGESTED=1"]);

    // One accept, a bulk reject of two (one of them refused: not AUTOSUGGESTED
    // any more), an undo.
    let k = |o: &str| key(&v.p, o, &v.k1, "bot");
    transition(&erik, &k("o1"), "AUTOSUGGESTED", "ACCEPTED").await;
    let d = erik
        .query(
            BULK,
            json!({"k": [k("o1"), k("o2"), k("o3")], "e": "AUTOSUGGESTED", "t": "REJECTED"}),
        )
        .await;
    let applied: Vec<bool> = d["transitionAssignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["applied"].as_bool().unwrap())
        .collect();
    assert_eq!(applied, [false, true, true]);
    let d = erik
        .query(UNDO, json!({"k": [k("o3")], "e": "REJECTED"}))
        .await;
    assert_eq!(d["undoTransitions"][0]["applied"], true);
    let c = counts(&erik, &v.p).await;
    assert_eq!(
        statuses(&c),
        ["AUTOSUGGESTED=2", "SUGGESTED=1", "ACCEPTED=1", "REJECTED=1"]
    );
    let bot_figures = &c["creators"][0];
    assert_eq!(
        bot_figures,
        &json!({"creator": "bot", "total": 4, "open": 2, "accepted": 1, "rejected": 1, "acceptanceRate": 0.5})
    );
    assert_eq!(c["creators"][1]["acceptanceRate"], Value::Null);

    // A release run moves ACCEPTED to PUBLISHED.
    erik.query(
        "mutation($p: ID!) { runRelease(portalId: $p) { published } }",
        json!({"p": v.p}),
    )
    .await;
    let c = counts(&erik, &v.p).await;
    assert_eq!(
        statuses(&c),
        [
            "AUTOSUGGESTED=2",
            "SUGGESTED=1",
            "REJECTED=1",
            "PUBLISHED=1"
        ]
    );
    assert_eq!(c["creators"][0]["accepted"], 1);

    // An import counts each new row once, a re-import nothing.
    let text = [
        json!({"portalId": v.p, "ddbId": "i1", "keywordId": v.k1, "childCategoryId": v.c1}),
        json!({"portalId": v.p, "ddbId": "i2", "keywordId": v.k1, "childCategoryId": v.c1}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    for _ in 0..2 {
        import_text(&app.store, "ingest-bot", &text).await;
    }
    let c = counts(&anonymous, &v.p).await;
    assert_eq!(c["total"], 7);
    assert!(by_creator(&c).contains(&"ingest-bot AUTOSUGGESTED=2".to_owned()));
    assert_eq!(
        statuses(&counts(&anonymous, &v.q).await),
        ["AUTOSUGGESTED=1"]
    );

    // And they agree with the rows themselves.
    check_views(&app.store, &v.p).await;
    check_views(&app.store, &v.q).await;

    // A category that is not a portal, an id that names nothing.
    for id in [&v.c1, "nothing-here"] {
        assert_eq!(
            anonymous.query_err(COUNTS, json!({"p": id})).await,
            "BAD_USER_INPUT"
        );
    }
}

async fn repair_views_recounts_counts_that_went_wrong(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let bot = app.as_machine("bot");
    for o in ["r1", "r2", "r3"] {
        bot.query(SUGGEST, suggestion(&v.p, o, &v.k1, &v.c1)).await;
    }
    // Counts as a lost or doubled update would leave them: one short, one
    // that should not be there at all.
    app.store
        .apply(vec![
            count_change(&v.p, "bot", AssignmentStatus::Autosuggested, -1),
            count_change(&v.p, "ghost", AssignmentStatus::Accepted, 2),
        ])
        .await
        .unwrap();
    let report = repair_views(&app.store, false, Some(&v.p)).await.unwrap();
    let counted = report.tables["assignment_counts"];
    assert_eq!(
        (counted.different, counted.stale),
        (1, 1),
        "{}",
        report.summary()
    );
    // Checking changed nothing.
    assert_eq!(
        statuses(&counts(&app.anonymous(), &v.p).await),
        ["AUTOSUGGESTED=2", "ACCEPTED=2"]
    );
    repair_views(&app.store, true, Some(&v.p)).await.unwrap();
    let c = counts(&app.anonymous(), &v.p).await;
    assert_eq!(statuses(&c), ["AUTOSUGGESTED=3"]);
    assert_eq!(by_creator(&c), ["bot AUTOSUGGESTED=3"]);
    check_views(&app.store, &v.p).await;
}

both_engines!(
    counts_follow_every_change_of_a_portal,
    repair_views_recounts_counts_that_went_wrong,
);
