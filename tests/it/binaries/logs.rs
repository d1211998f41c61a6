//! A context's logs, streamed a page of references at a time.

use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use super::get;
use super::origin::origin;
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

/// A context's logs are streamed a page of references at a time; the answer
/// is one JSON array holding every reference's lines, across pages.
async fn a_context_s_logs_come_in_one_array_across_pages(engine: Engine) {
    use kartei::domains::binaries::service::LOG_PAGE;
    // No crawler, in keyspaces of its own: the hundred links are never
    // fetched (other tests' crawlers would spend minutes on them).
    let app = TestApp::on(engine).isolated().build().await;
    let o = origin().await;
    let context = format!("logs-{}", uid());
    let machine =
        kartei::kernel::roles::Principal::local("logs", &[kartei::kernel::roles::Role::Machine]);
    let n = LOG_PAGE * 2 + 3;
    for i in 0..n {
        app.binaries
            .register_url(
                &machine,
                &format!("{}/landscape.jpg?n={i}", o.base),
                &context,
                None,
            )
            .await
            .expect("register");
    }
    let r = get(&app, &format!("/binary/logs/{context}"), &[]).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
    let logs: Value = r.json().await.unwrap();
    let registered: std::collections::HashSet<&str> = logs
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("registered "))
        })
        .map(|l| l["referenceId"].as_str().unwrap())
        .collect();
    assert_eq!(registered.len(), n, "{logs:.500}");
    let none: Value = get(&app, &format!("/binary/logs/none-{}", uid()), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(none, json!([]));
}

both_engines!(a_context_s_logs_come_in_one_array_across_pages);
