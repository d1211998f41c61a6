//! The render budget: one client's flood of variants never delays another client.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{StatusCode, header};
use serde_json::Value;

use super::{dims, jpeg, settled, upload};
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

/// Issue 30 §6: distinct upscaled and rotated variants are renders no cache
/// answers. One client address (127.0.0.1) fires many at once: it runs one
/// render at a time within its share, a few wait in its queue, the rest are
/// told to come back (503 RENDER_QUEUE_FULL, Retry-After). Meanwhile another
/// client address (127.0.0.2) gets an ordinary region, a cached variant and
/// the stored derivatives while the flood's renders are still under way:
/// at most the flood render running when it asked ends before it is served.
async fn one_client_s_flood_of_render_variants_never_delays_another_client(engine: Engine) {
    let args = kartei::app::config::BinaryArgs {
        // Each flood render (an 800×600 original made into about 1,800×1,500
        // pixels) counts about 3 M pixels: one at a time fills the share.
        render_pixels_in_flight: 30_000_000,
        render_share_per_client: 4_000_000,
        render_queue_per_client: 3,
        // The waiting renders must not time out on a loaded machine (a CI run
        // with a build beside it saw fewer than four served at the default
        // 30 s): this test is about the queue and the share, not the wait.
        render_wait: std::time::Duration::from_secs(600),
        ..crate::support::test_binary_args()
    };
    let app = TestApp::on(engine)
        .with_binary_args(args)
        .crawling()
        .build()
        .await;
    let (_, r) = upload(&app, &format!("flood-{}", uid()), &jpeg(800, 600)).await;
    let id = r["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&app, &id).await["status"], "OK");
    let other = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let fetch =
        |client: &reqwest::Client, path: String| client.get(format!("{}{path}", app.url)).send();
    let cached = format!("/iiif/3/{id}/0,0,100,100/max/0/default.png");
    assert_eq!(
        fetch(&other, cached.clone()).await.unwrap().status(),
        StatusCode::OK
    );

    let flood = 10;
    let served = Arc::new(AtomicUsize::new(0));
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..flood {
        let request = fetch(
            &app.client,
            format!("/iiif/3/{id}/full/^{},/{}/default.jpg", 1600 + i, 5 + i),
        );
        let (served, answers) = (served.clone(), answers.clone());
        tokio::spawn(async move {
            let r = request.await.unwrap();
            let status = r.status();
            let retry_after = r.headers().get(header::RETRY_AFTER).cloned();
            let body = r.bytes().await.unwrap();
            if status == StatusCode::OK {
                served.fetch_add(1, Ordering::SeqCst);
            }
            answers.send((status, retry_after, body)).unwrap();
        });
    }
    // A refusal shows the flooder's queue full: one render running, three waiting.
    let mut answers_seen = 0;
    let mut refused = 0;
    while refused == 0 {
        let (status, retry_after, body) = answered.recv().await.unwrap();
        answers_seen += 1;
        if status != StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(status, StatusCode::OK);
            assert!(answers_seen < flood, "no render of the flood was refused");
            continue;
        }
        assert!(retry_after.is_some(), "a refusal says when to come back");
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "RENDER_QUEUE_FULL", "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--render-queue-per-client"),
            "{error}"
        );
        refused += 1;
    }

    let before = served.load(Ordering::SeqCst);
    let region = fetch(
        &other,
        format!("/iiif/3/{id}/100,100,300,200/max/0/default.jpg"),
    );
    let again = fetch(&other, cached);
    let stored = fetch(&other, format!("/binary/{id}/full/!140,105/default.jpg"));
    let via_iiif = fetch(&other, format!("/iiif/3/{id}/full/140,105/0/default.jpg"));
    let (region, again, stored, via_iiif) = tokio::join!(region, again, stored, via_iiif);
    let region = region.unwrap();
    assert_eq!(region.status(), StatusCode::OK);
    assert_eq!(dims(&region.bytes().await.unwrap()), (300, 200));
    for r in [again, stored, via_iiif] {
        assert_eq!(r.unwrap().status(), StatusCode::OK);
    }
    let after = served.load(Ordering::SeqCst);
    assert!(
        after - before <= 1,
        "{} flood renders ended while the other client waited",
        after - before
    );

    // The flood's admitted renders all end; the rest were refused, never lost.
    for _ in answers_seen..flood {
        let (status, retry_after, _) = answered.recv().await.unwrap();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            assert!(retry_after.is_some());
            refused += 1;
        } else {
            assert_eq!(status, StatusCode::OK);
        }
    }
    assert_eq!(served.load(Ordering::SeqCst) + refused, flood);
    assert!(
        served.load(Ordering::SeqCst) >= 4,
        "one running and three waiting are served"
    );

    // A render larger than the whole budget is refused before it waits.
    let r = fetch(&other, format!("/iiif/3/{id}/full/^7000,/0/default.jpg"))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let error: Value = r.json().await.unwrap();
    assert_eq!(error["error"]["code"], "PAYLOAD_TOO_LARGE");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--render-pixels-in-flight"),
        "{error}"
    );
}

both_engines!(one_client_s_flood_of_render_variants_never_delays_another_client);
