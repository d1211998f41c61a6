//! Uploads stream into storage and deduplicate; a slow one keeps its lease,
//! a stalled one leaves nothing behind.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use super::{get, jpeg, png, settled, upload};
use crate::both_engines;
use crate::support::{Engine, TestApp, TestServer, uid};

async fn graphql_upload(app: &TestServer, context: &str, file: &[u8]) -> Value {
    // Mixed case, as browsers send it (`fetch` with FormData): a boundary is
    // matched byte for byte, so the server must not lowercase it.
    let boundary = format!("----WebKitFormBoundaryKartei{}", uid());
    let operations = json!({
        "query": "mutation($f: Upload!, $c: String!) { uploadBinary(file: $f, context: $c) { referenceId originalId status } }",
        "variables": {"f": null, "c": context},
    });
    let mut body = Vec::new();
    for (name, value) in [
        ("operations", operations.to_string()),
        ("map", json!({"0": ["variables.f"]}).to_string()),
    ] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"0\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    app.client
        .post(format!("{}/graphql", app.url))
        .bearer_auth(app.token(&["machine"]))
        .header(
            header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The one original row of a store of its own, if any.
async fn originals_in(store: &kartei::store::DynStore) -> Vec<kartei::store::Row> {
    store
        .scan(
            &kartei::domains::binaries::model::ORIGINALS,
            kartei::store::Scan {
                after: None,
                limit: 100,
            },
        )
        .await
        .unwrap()
        .rows
}

async fn uploads_stream_into_storage_and_deduplicate(engine: Engine) {
    let app = TestApp::on(engine).crawling().build().await;
    let context = format!("up-{}", uid());
    // 2.5 MiB: three chunks.
    let big = jpeg(2400, 1800);
    let mut file = big.clone();
    file.resize(file.len().max(5 << 19), 0);
    let (status, r) = upload(&app, &context, &file).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    let b = settled(&app, &reference).await;
    assert_eq!(b["status"], "OK", "{b}");
    assert_eq!(b["size"], json!(file.len() as f64));
    let served = get(&app, &format!("/binary/{reference}"), &[]).await;
    assert_eq!(served.bytes().await.unwrap().len(), file.len());
    let mid = get(
        &app,
        &format!("/binary/{reference}"),
        &[("range", "bytes=1048570-1048585")],
    )
    .await;
    assert_eq!(
        &mid.bytes().await.unwrap()[..],
        &file[1_048_570..1_048_586],
        "a range across chunks"
    );

    // The same bytes again: the same original.
    let (_, again) = upload(&app, &context, &file).await;
    assert_eq!(again["originalId"], b["originalId"]);

    // Through GraphQL's multipart request.
    let g = graphql_upload(&app, &context, &png(64, 48)).await;
    let gref = g["data"]["uploadBinary"]["referenceId"]
        .as_str()
        .unwrap_or_else(|| panic!("{g}"))
        .to_owned();
    let b = settled(&app, &gref).await;
    assert_eq!(
        (b["status"].clone(), b["width"].clone()),
        (json!("OK"), json!(64))
    );
    let listed = app.anonymous().query("query($c: String!) { binaries(context: $c, first: 10) { edges { node { referenceId status created context } } } }", json!({"c": context}))
        .await;
    let edges = listed["binaries"]["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 3);
    assert!(edges.iter().all(|e| {
        e["node"]["created"]
            .as_str()
            .is_some_and(|c| c.starts_with("20"))
            && e["node"]["context"] == json!(context)
    }));
}

/// An upload slower than its lease (1 h) renews it while bytes arrive, so
/// the collector leaves it alone; one that stalls past its lease loses its
/// bytes to the collector and fails when the next bytes come, writing no
/// chunk after the collector's sweep. The service's clock is moved by hand.
async fn a_slow_upload_renews_its_lease_and_a_stalled_one_leaves_nothing(engine: Engine) {
    use bytes::Bytes;
    use futures::channel::mpsc;
    let now = Arc::new(std::sync::Mutex::new(time::OffsetDateTime::now_utc()));
    let clock = {
        let now = now.clone();
        kartei::kernel::Clock::from_fn(move || *now.lock().unwrap())
    };
    let app = TestApp::on(engine)
        .isolated()
        .with_clock(clock)
        .build()
        .await;
    let (store, b) = (app.store.clone(), app.binaries.clone());
    let advance = |minutes: i64| *now.lock().unwrap() += time::Duration::minutes(minutes);
    let mut file = jpeg(64, 48);
    file.resize(3 << 20, 0);
    let pieces: Vec<Bytes> = file.chunks(1 << 20).map(Bytes::copy_from_slice).collect();
    let start = |context: &'static str| {
        let (tx, rx) = mpsc::unbounded::<Result<Bytes, std::io::Error>>();
        let b = b.clone();
        let who =
            kartei::kernel::roles::Principal::local("up", &[kartei::kernel::roles::Role::Machine]);
        (
            tx,
            tokio::spawn(async move { b.upload(&who, context, rx).await }),
        )
    };
    let lease_of = |r: &kartei::store::Row| r.text("next_attempt").map(str::to_owned);

    // Slow but steady: a piece every 40 minutes.
    let (tx, slow) = start("slow");
    tx.unbounded_send(Ok(pieces[0].clone())).unwrap();
    let waited = std::time::Instant::now();
    let first = loop {
        if let Some(r) = originals_in(&store).await.pop() {
            break r;
        }
        assert!(waited.elapsed() < Duration::from_secs(30), "no original");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let id = first.string("original_id");
    advance(40);
    tx.unbounded_send(Ok(pieces[1].clone())).unwrap();
    // The second piece renews the lease.
    let waited = std::time::Instant::now();
    loop {
        let rows = originals_in(&store).await;
        if rows.iter().any(|r| lease_of(r) != lease_of(&first)) {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the lease was not renewed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    advance(40);
    // 80 minutes in: past the first lease, within the renewed one.
    b.collect_garbage().await.unwrap();
    assert_eq!(
        originals_in(&store).await.len(),
        1,
        "the slow upload was collected"
    );
    tx.unbounded_send(Ok(pieces[2].clone())).unwrap();
    drop(tx);
    let done = slow.await.unwrap().expect("the slow upload");
    assert_eq!(done.original_id, id);
    let o = originals_in(&store).await.pop().unwrap();
    assert_eq!(o.bigint("size"), Some(file.len() as i64));

    // Stalled past its lease: collected, and the next bytes fail the upload.
    let (tx, stalled) = start("stalled");
    tx.unbounded_send(Ok(pieces[0].clone())).unwrap();
    let waited = std::time::Instant::now();
    while originals_in(&store).await.len() < 2 {
        assert!(waited.elapsed() < Duration::from_secs(30), "no original");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    advance(120);
    b.collect_garbage().await.unwrap();
    tx.unbounded_send(Ok(pieces[1].clone())).unwrap();
    tx.unbounded_send(Ok(pieces[2].clone())).unwrap();
    drop(tx);
    let failed = stalled
        .await
        .unwrap()
        .expect_err("the stalled upload fails");
    assert_eq!(failed.code(), "TIMEOUT", "{failed:?}");
    let chunks = store
        .scan(
            &kartei::domains::binaries::model::ORIGINALS_DATA,
            kartei::store::Scan {
                after: None,
                limit: 100,
            },
        )
        .await
        .unwrap()
        .rows;
    assert!(
        chunks.iter().all(|c| c.string("original_id") == id),
        "chunks of the stalled upload were left"
    );
    assert_eq!(chunks.len(), 3);
    assert_eq!(originals_in(&store).await.len(), 1);
}

both_engines!(
    uploads_stream_into_storage_and_deduplicate,
    a_slow_upload_renews_its_lease_and_a_stalled_one_leaves_nothing,
);
