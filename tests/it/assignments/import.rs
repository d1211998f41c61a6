//! The importer of machine suggestions: run again, it changes nothing and
//! heals what a killed run left.

use kartei::domains::assignments::model::{AssignmentStatus, VIEWS};
use kartei::domains::assignments::service::Assignments;
use serde_json::json;

use super::{check_views, principal};
use crate::both_engines;
use crate::support::{Engine, TestApp};

async fn importing_machine_suggestions_is_idempotent(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let mut lines = Vec::new();
    for i in 0..40 {
        lines.push(
            json!({"portalId": v.p, "ddbId": format!("imp-{i}"), "keywordId": v.k1, "childCategoryId": v.c1, "confidence": 0.8})
                .to_string(),
        );
    }
    lines.insert(5, "{not json".into());
    lines.insert(
        10,
        json!({"portalId": v.p, "ddbId": "imp-x", "keywordId": v.kq, "childCategoryId": v.c1})
            .to_string(),
    );
    lines.insert(12, String::new());
    lines.insert(
        20,
        json!({"portalId": v.p, "ddbId": "imp-y", "keywordId": v.k1, "childCategoryId": v.c1, "confidence": 7}).to_string(),
    );
    let text = lines.join("\n");
    let service = Assignments::new(app.store.clone());
    let first = kartei::domains::assignments::import::import(
        &service,
        "ingest-bot",
        kartei::kernel::chunked::Input::new(text.as_bytes(), text.len(), 8),
    )
    .await
    .unwrap();
    assert_eq!(first.created, 40, "{}", first.summary());
    assert_eq!(
        first.errors.iter().map(|e| e.0).collect::<Vec<_>>(),
        [6, 11, 21],
        "{:?}",
        first.errors
    );
    let again = kartei::domains::assignments::import::import(
        &service,
        "ingest-bot",
        kartei::kernel::chunked::Input::new(text.as_bytes(), text.len(), 8),
    )
    .await
    .unwrap();
    assert_eq!((again.created, again.existing), (0, 40));

    // A curator's status survives a re-import, and rows whose query rows are
    // missing (an import killed between its writes) are healed by running it again.
    let key = |d: &str| kartei::domains::assignments::model::AssignmentKey {
        portal_id: v.p.clone(),
        ddb_id: d.into(),
        keyword_id: v.k1.clone(),
        creator: "ingest-bot".into(),
    };
    service
        .transition(
            &principal("erik", "editor"),
            &key("imp-3"),
            AssignmentStatus::Autosuggested,
            AssignmentStatus::Accepted,
        )
        .await
        .unwrap();
    let mut lost = Vec::new();
    for i in 30..40 {
        for a in service
            .of_object(&format!("imp-{i}"), Some(&v.p))
            .await
            .unwrap()
        {
            for t in VIEWS {
                lost.push(kartei::store::Mutation::delete(t, a.row(t).key().unwrap()));
            }
        }
    }
    assert_eq!(lost.len(), 10 * VIEWS.len());
    app.store.apply(lost).await.unwrap();
    let third = kartei::domains::assignments::import::import(
        &service,
        "ingest-bot",
        kartei::kernel::chunked::Input::new(text.as_bytes(), text.len(), 1),
    )
    .await
    .unwrap();
    assert_eq!((third.created, third.existing), (0, 40));
    let a3 = service.of_object("imp-3", Some(&v.p)).await.unwrap();
    assert_eq!(a3[0].status, AssignmentStatus::Accepted);
    check_views(&app.store, &v.p).await;
    // Back to AUTOSUGGESTED for the listing below.
    service
        .transition(
            &principal("erik", "editor"),
            &key("imp-3"),
            AssignmentStatus::Accepted,
            AssignmentStatus::Rejected,
        )
        .await
        .unwrap();

    // One key twice in a file: created once, then "already present".
    let twice = [lines[0].clone(), lines[0].clone()].join("\n");
    let dup = kartei::domains::assignments::import::import(
        &service,
        "dup-bot",
        kartei::kernel::chunked::Input::new(twice.as_bytes(), twice.len(), 2),
    )
    .await
    .unwrap();
    assert_eq!((dup.created, dup.existing), (1, 1), "{}", dup.summary());
    let page = service
        .list(
            &v.p,
            Some(AssignmentStatus::Autosuggested),
            Some("ingest-bot"),
            100,
            None,
        )
        .await
        .unwrap();
    assert_eq!(page.items.len(), 39);
    assert!(page.items.iter().all(|(_, a)| a.confidence == Some(0.8)
        && a.assignment_type == kartei::domains::assignments::model::AssignmentType::Machine));
    check_views(&app.store, &v.p).await;
}

both_engines!(importing_machine_suggestions_is_idempotent);
