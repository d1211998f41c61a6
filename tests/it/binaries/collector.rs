//! Deleting references, and the collector that takes only unreferenced originals.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::origin::origin;
use super::{get, jpeg, register, settled, upload};
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

async fn deleting_references_and_collecting_originals(engine: Engine) {
    let app = TestApp::on(engine).crawling().build().await;
    let context = format!("del-{}", uid());
    let other = format!("keep-{}", uid());
    let (_, a) = upload(&app, &context, &jpeg(320, 240)).await;
    let (_, b) = upload(&app, &context, &jpeg(330, 240)).await;
    let (_, kept) = upload(&app, &other, &jpeg(340, 240)).await;
    for r in [&a, &b, &kept] {
        settled(&app, r["referenceId"].as_str().unwrap()).await;
    }
    let logs: Value = get(&app, &format!("/binary/logs/{context}"), &[])
        .await
        .json()
        .await
        .unwrap();
    assert!(logs.as_array().unwrap().len() >= 4, "{logs}");
    let r = app
        .client
        .delete(format!("{}/binaries/context/{context}", app.url))
        .bearer_auth(app.token(&["machine"]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r: Value = app
        .client
        .delete(format!("{}/binaries/context/{context}", app.url))
        .bearer_auth(app.admin())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["deleted"], 2);
    let logs: Value = get(&app, &format!("/binary/logs/{context}"), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(logs, json!([]));
    let gone = a["referenceId"].as_str().unwrap();
    assert_eq!(
        get(&app, &format!("/binary/{gone}"), &[]).await.status(),
        StatusCode::NOT_FOUND
    );
    // (On the shared Cassandra keyspace another test's collection may get there first.)
    app.binaries.collect_garbage().await.unwrap();
    for r in [&a, &b] {
        let id = r["originalId"].as_str().unwrap();
        assert!(app.binaries.original(id).await.unwrap().is_none());
        assert!(app.binaries.part(id, 0).await.is_err(), "chunks are gone");
    }
    let k = kept["referenceId"].as_str().unwrap();
    assert_eq!(
        get(&app, &format!("/binary/{k}"), &[]).await.status(),
        StatusCode::OK
    );
    let delete = "mutation($r: ID!) { deleteBinary(referenceId: $r) }";
    let admin = app.as_admin();
    let d = admin.query(delete, json!({"r": k})).await;
    assert_eq!(d["deleteBinary"], json!(k));
    assert_eq!(admin.query_err(delete, json!({"r": k})).await, "NOT_FOUND");
}

/// Registrations of one URL racing the collector: every reference that was
/// answered must end on an original that exists and serves.
async fn the_collector_never_takes_a_referenced_original(engine: Engine) {
    let app = TestApp::on(engine).crawling().build().await;
    let o = origin().await;
    let url = format!("{}/landscape.jpg", o.base);
    let mut answered = Vec::new();
    for round in 0..6 {
        let context = format!("race-{round}-{}", uid());
        let (_, first) = register(&app, &url, &context).await;
        settled(&app, first["referenceId"].as_str().unwrap()).await;
        // Drop every reference, then register again while collecting.
        let admin = kartei::kernel::roles::Principal::local(
            "tester",
            &[kartei::kernel::roles::Role::Admin],
        );
        app.binaries.delete_context(&admin, &context).await.unwrap();
        let collector = {
            let b = app.binaries.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    b.collect_garbage().await.unwrap();
                }
            })
        };
        let registrations =
            futures::future::join_all((0..4).map(|_| register(&app, &url, &context))).await;
        collector.await.unwrap();
        for (status, r) in registrations {
            assert_eq!(status, StatusCode::ACCEPTED, "{r}");
            answered.push(r["referenceId"].as_str().unwrap().to_owned());
        }
    }
    app.binaries.collect_garbage().await.unwrap();
    for reference in &answered {
        let b = settled(&app, reference).await;
        assert_eq!(b["status"], "OK", "{b}");
        let r = get(&app, &format!("/binary/{reference}"), &[]).await;
        assert_eq!(r.status(), StatusCode::OK, "{reference}");
        assert_eq!(r.bytes().await.unwrap().len(), jpeg(1600, 1200).len());
    }
}

both_engines!(
    deleting_references_and_collecting_originals,
    the_collector_never_takes_a_referenced_original,
);
