//! A registered URL is fetched, scaled and served; bad ones end in clear errors.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use super::origin::origin;
use super::{BINARY, bomb, dims, get, jpeg, register, settled, upload};
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

async fn a_registered_url_is_fetched_scaled_and_served(engine: Engine) {
    // Keyspaces of its own: on shared ones the landscape's bytes may already
    // be another test's original, and its fetch then never logs its own lines.
    let app = TestApp::on(engine).isolated().crawling().build().await;
    let o = origin().await;
    let context = format!("ctx-{}", uid());
    let url = format!("{}/landscape.jpg", o.base);
    let (status, r) = register(&app, &url, &context).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    assert!(reference.len() >= 16 && reference.chars().all(|c| c.is_ascii_alphanumeric()));
    let b = settled(&app, &reference).await;
    assert_eq!(b["status"], "OK", "{b}");
    assert_eq!(
        (b["width"].clone(), b["height"].clone()),
        (json!(1600), json!(1200))
    );
    assert_eq!(b["mime"], "image/jpeg");
    assert!(b["logs"].as_array().unwrap().len() >= 3, "{b}");
    // The lines written in one call with the derivatives keep their order.
    let lines: Vec<&str> = b["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["message"].as_str())
        .collect();
    let at = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix));
    let (downloaded, scaled) = (at("downloaded "), at("1600×1200 pixels"));
    assert!(downloaded.is_some() && downloaded < scaled, "{lines:?}");
    // "OK" follows the status at once (in its transaction on the embedded store).
    if let Some(ok) = at("OK") {
        assert!(scaled < Some(ok), "{lines:?}");
    }

    let served = get(&app, &format!("/binary/{reference}"), &[]).await;
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(served.headers()[header::CONTENT_TYPE], "image/jpeg");
    let etag = served.headers()[header::ETAG].to_str().unwrap().to_owned();
    let bytes = served.bytes().await.unwrap();
    assert_eq!(&bytes[..], &jpeg(1600, 1200)[..], "the bytes are identical");

    let again = get(
        &app,
        &format!("/binary/{reference}"),
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let part = get(
        &app,
        &format!("/binary/{reference}"),
        &[("range", "bytes=100-199")],
    )
    .await;
    assert_eq!(part.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        part.headers()[header::CONTENT_RANGE],
        format!("bytes 100-199/{}", bytes.len())
    );
    assert_eq!(&part.bytes().await.unwrap()[..], &bytes[100..200]);
    let tail = get(
        &app,
        &format!("/binary/{reference}"),
        &[("range", "bytes=-7")],
    )
    .await;
    assert_eq!(&tail.bytes().await.unwrap()[..], &bytes[bytes.len() - 7..]);
    let outside = get(
        &app,
        &format!("/binary/{reference}"),
        &[("range", "bytes=99999999-")],
    )
    .await;
    assert_eq!(outside.status(), StatusCode::RANGE_NOT_SATISFIABLE);

    for (size, want) in [
        ("!800,600", (800, 600)),
        ("!440,330", (440, 330)),
        ("!140,105", (140, 105)),
        ("!116,87", (116, 87)),
    ] {
        let r = get(
            &app,
            &format!("/binary/{reference}/full/{size}/default.jpg"),
            &[],
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK, "{size}");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "image/jpeg");
        assert_eq!(dims(&r.bytes().await.unwrap()), want, "{size}");
    }
    let r = get(
        &app,
        &format!("/binary/{reference}/full/!10,10/default.jpg"),
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = get(&app, "/binary/NoSuchReference0", &[]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // The same URL again: the same original, no second download.
    let hits = o.hits.load(Ordering::SeqCst);
    let (_, again) = register(&app, &url, &context).await;
    assert_eq!(again["originalId"], r_original(&b));
    assert_eq!(again["status"], "OK");
    assert_eq!(o.hits.load(Ordering::SeqCst), hits, "no second download");
    // Identical bytes from another URL end in the same original.
    let (_, copy) = register(&app, &format!("{}/copy-of-landscape.jpg", o.base), &context).await;
    let copy_ref = copy["referenceId"].as_str().unwrap().to_owned();
    let mut same = false;
    for _ in 0..200 {
        let d = app.anonymous().query(BINARY, json!({"r": copy_ref})).await;
        if d["binary"]["originalId"] == r_original(&b) && d["binary"]["status"] == "OK" {
            same = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(same, "identical content is stored once");
    // A redirect to an allowed address is followed.
    let (_, redirected) = register(&app, &format!("{}/to-landscape", o.base), &context).await;
    let b = settled(&app, redirected["referenceId"].as_str().unwrap()).await;
    assert_eq!(b["status"], "OK", "{b}");
    // Portrait PNG with alpha: fitted by height, never upscaled for the small ones.
    let (_, p) = register(&app, &format!("{}/portrait.png", o.base), &context).await;
    let pref = p["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&app, &pref).await["status"], "OK");
    let r = get(
        &app,
        &format!("/binary/{pref}/full/!800,600/default.jpg"),
        &[],
    )
    .await;
    assert_eq!(dims(&r.bytes().await.unwrap()), (200, 600));
    let r = get(
        &app,
        &format!("/binary/{pref}/full/!140,105/default.jpg"),
        &[],
    )
    .await;
    assert_eq!(dims(&r.bytes().await.unwrap()), (35, 105));
}

async fn bad_binaries_end_in_clear_errors(engine: Engine) {
    let app = TestApp::on(engine).crawling().build().await;
    let o = origin().await;
    let context = format!("bad-{}", uid());
    // Refused at once.
    let (status, body) = upload(&app, &context, b"just some text").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // A PNG signature, then a little more than the limit of 8 MiB (a little,
    // so that the rest fits the socket buffers once the server answers 413
    // and stops reading: this client only reads the answer after sending).
    let mut too_big = b"\x89PNG\r\n\x1a\n".to_vec();
    too_big.resize((8 << 20) + (32 << 10), 0xFF);
    let (status, body) = upload(&app, &context, &too_big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    for url in [
        "http://10.1.2.3/x.jpg".to_owned(),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "http://[::1]/x.jpg".to_owned(),
        format!(
            "http://localhost:{}/landscape.jpg",
            o.base.rsplit(':').next().unwrap()
        ),
        "ftp://example.org/x.jpg".to_owned(),
        "not a url".to_owned(),
    ] {
        let (status, body) = register(&app, &url, &context).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(body["error"]["code"], "BAD_USER_INPUT");
    }
    let r = app
        .client
        .put(format!("{}/binaries", app.url))
        .json(&json!({"url": format!("{}/landscape.jpg", o.base), "context": context}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = app
        .client
        .put(format!("{}/binaries", app.url))
        .bearer_auth(app.token(&["editor"]))
        .json(&json!({"url": format!("{}/landscape.jpg", o.base), "context": context}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // Accepted, then ERROR with a log line saying why.
    // A JPEG signature followed by noise.
    let mut corrupt = vec![0xFF, 0xD8, 0xFF, 0xDB];
    corrupt.extend((0u32..5000).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    let truncated = jpeg(640, 480)[..2000].to_vec();
    let mut cases: Vec<(String, &str)> = Vec::new();
    for (bytes, why) in [
        (corrupt, "corrupt"),
        (truncated, "truncated"),
        (bomb(), "bomb"),
    ] {
        let (status, r) = upload(&app, &context, &bytes).await;
        assert_eq!(status, StatusCode::CREATED, "{why}: {r}");
        cases.push((r["referenceId"].as_str().unwrap().to_owned(), why));
    }
    for (path, why) in [
        ("/missing.jpg", "404"),
        ("/flaky.jpg", "503"),
        ("/text.jpg", "not an image"),
        ("/bomb.png", "bomb"),
        ("/huge.jpg", "too large"),
        ("/to-private", "redirect to a private address"),
        ("/to-localhost", "redirect to a refused host"),
    ] {
        let (status, r) = register(&app, &format!("{}{path}", o.base), &context).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{why}: {r}");
        cases.push((r["referenceId"].as_str().unwrap().to_owned(), why));
    }
    for (reference, why) in &cases {
        let b = settled(&app, reference).await;
        assert_eq!(b["status"], "ERROR", "{why}: {b}");
        assert!(
            b["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{why}: {b}"
        );
        let logs = b["logs"].to_string();
        assert!(logs.contains("ERROR"), "{why}: {logs}");
        if *why == "bomb" && b["url"].is_string() {
            // Downloaded, then refused by the decoder: both lines are there.
            assert!(logs.contains("downloaded "), "{why}: {logs}");
        }
        let r = get(&app, &format!("/binary/{reference}"), &[]).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{why}");
    }
    // The flaky one was retried before giving up.
    let flaky = &cases.iter().find(|c| c.1 == "503").unwrap().0;
    let logs = settled(&app, flaky).await["logs"].to_string();
    assert!(logs.contains("RETRY"), "{logs}");
    // The server is still fine.
    assert_eq!(get(&app, "/healthz", &[]).await.status(), StatusCode::OK);
}

fn r_original(b: &Value) -> Value {
    b["originalId"].clone()
}

both_engines!(
    a_registered_url_is_fetched_scaled_and_served,
    bad_binaries_end_in_clear_errors,
);
