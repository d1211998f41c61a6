//! A process that dies between its writes: what it leaves is healed by
//! repair-views, a release run that died runs again.

use kartei::domains::assignments::model::{AssignmentStatus, OBJECTS_KEYWORDS_STATUS, VIEWS};
use kartei::domains::assignments::repair::repair_views;
use kartei::domains::assignments::service::{Assignments, SuggestInput, Suggester};
use serde_json::json;

use super::{check_views, principal, release_queue};
use crate::both_engines;
use crate::support::{Engine, Faulty, TestApp};

async fn a_crash_between_base_row_and_query_tables_is_healed(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let faulty = Faulty::new(app.store.clone());
    *faulty.fail_apply_on.lock().unwrap() = VIEWS.iter().map(|t| t.name).collect();
    let crashing = Assignments::new(faulty.clone());
    let input = SuggestInput {
        portal_id: v.p.clone(),
        ddb_id: "crash-1".into(),
        keyword_id: v.k1.clone(),
        child_category_id: v.c1.clone(),
        confidence: Some(0.9),
    };
    // The compare-and-set applied, so the suggestion is acknowledged; its
    // query-row writes failed twice and are left to healing.
    crashing
        .suggest(&Suggester::machine("bot"), input.clone())
        .await
        .expect("the row stands, so the suggestion is acknowledged");
    // The base row is there (the LWT ran); the query tables never heard of it.
    let listed = |status: Option<&str>| {
        let app = &app;
        let p = v.p.clone();
        let status = status.map(str::to_owned);
        async move {
            let d = app
                .data(
                    "query($p: ID!, $s: AssignmentStatus) { assignments(portalId: $p, status: $s) { edges { node { ddbId status } } } }",
                    json!({"p": p, "s": status}),
                    None,
                )
                .await;
            d["assignments"]["edges"].as_array().unwrap().len()
        }
    };
    assert_eq!(listed(None).await, 1, "base table");
    assert_eq!(listed(Some("AUTOSUGGESTED")).await, 0, "query table");

    // A transition whose query-table write crashes too.
    let editor = kartei::kernel::roles::Principal {
        sub: Some("erik".into()),
        roles: [kartei::kernel::roles::Role::Editor].into(),
        valid_until: None,
    };
    let k = kartei::domains::assignments::model::AssignmentKey {
        portal_id: v.p.clone(),
        ddb_id: "crash-1".into(),
        keyword_id: v.k1.clone(),
        creator: "bot".into(),
    };
    crashing
        .transition(
            &editor,
            &k,
            AssignmentStatus::Autosuggested,
            AssignmentStatus::Accepted,
        )
        .await
        .expect("the transition applied");

    let check = repair_views(&app.store, false, Some(&v.p)).await.unwrap();
    assert_eq!(
        check.tables[OBJECTS_KEYWORDS_STATUS.name].missing,
        1,
        "{}",
        check.summary()
    );
    assert!(check.differences() >= 5, "{}", check.summary());
    let fixed = repair_views(&app.store, true, Some(&v.p)).await.unwrap();
    assert_eq!(fixed.differences(), check.differences());
    check_views(&app.store, &v.p).await;
    assert_eq!(listed(Some("ACCEPTED")).await, 1);
    assert_eq!(listed(Some("AUTOSUGGESTED")).await, 0);
}

async fn a_crashed_release_run_can_run_again(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let service = Assignments::new(app.store.clone());
    let n = 30;
    let ddbs: Vec<String> = (0..n).map(|i| format!("rel-{i:03}")).collect();
    for d in &ddbs {
        service
            .suggest(
                &Suggester::of(&principal("carla", "contributor")).unwrap(),
                SuggestInput {
                    portal_id: v.p.clone(),
                    ddb_id: d.clone(),
                    keyword_id: v.k1.clone(),
                    child_category_id: v.c1.clone(),
                    confidence: None,
                },
            )
            .await
            .unwrap();
    }
    let editor = principal("erik", "editor");
    let keys: Vec<_> = ddbs
        .iter()
        .map(|d| kartei::domains::assignments::model::AssignmentKey {
            portal_id: v.p.clone(),
            ddb_id: d.clone(),
            keyword_id: v.k1.clone(),
            creator: "carla".into(),
        })
        .collect();
    let accepted = service
        .transition_many(
            &editor,
            keys,
            AssignmentStatus::Suggested,
            AssignmentStatus::Accepted,
        )
        .await
        .unwrap();
    assert!(accepted.iter().all(|(_, r)| r.is_ok()));

    // The run dies after 12 publications.
    let faulty = Faulty::new(app.store.clone());
    *faulty.cas_budget.lock().unwrap() = Some(12);
    let e = Assignments::new(faulty)
        .run_release(&editor, &v.p)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "UNAVAILABLE");
    let runs = service.release_runs(&v.p).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].successful);

    let run = service.run_release(&editor, &v.p).await.unwrap();
    assert!(run.successful);
    assert_eq!(run.published, (n - 12) as i64, "nothing is published twice");
    let published = service
        .list(&v.p, Some(AssignmentStatus::Published), None, 100, None)
        .await
        .unwrap();
    assert_eq!(published.items.len(), n, "nothing is lost");
    let queue = release_queue(&app).await;
    assert!(ddbs.iter().all(|d| queue.contains(d)));
    // Nothing is left: a run again is refused and replaces no run.
    let again = service.run_release(&editor, &v.p).await.unwrap_err();
    assert_eq!(again.code(), "NOTHING_TO_RELEASE");
    let runs = service.release_runs(&v.p).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.successful).collect::<Vec<_>>(),
        [true, false],
        "the last success and the last failure"
    );
    check_views(&app.store, &v.p).await;
}

both_engines!(
    a_crash_between_base_row_and_query_tables_is_healed,
    a_crashed_release_run_can_run_again,
);
