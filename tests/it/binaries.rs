//! The binaries domain over real HTTP, on both engines: a local image server
//! on 127.0.0.x (the internal addresses downloads may reach in tests),
//! registrations, uploads, serving, derivatives, bad input, deletion and
//! the collector.

use std::io::Cursor;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get as route_get;
use serde_json::{Value, json};

use crate::both_engines;
use crate::support::{Engine, TestServer, binary_server as server, code, uid};

/// A JPEG of `w`×`h` with a gradient (so it compresses like a photo, not a blank).
pub fn jpeg(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Jpeg)
        .unwrap();
    out
}

fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(w, h, |x, _| image::Rgba([200, 10, 10, (x % 256) as u8]));
    let mut out = Vec::new();
    image::DynamicImage::ImageRgba8(img)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// A PNG whose header claims 60000×60000 pixels.
fn bomb() -> Vec<u8> {
    let mut p = png(8, 8);
    p[16..20].copy_from_slice(&60_000u32.to_be_bytes());
    p[20..24].copy_from_slice(&60_000u32.to_be_bytes());
    p
}

struct Origin {
    base: String,
    hits: Arc<AtomicUsize>,
    version: Arc<AtomicUsize>,
    /// The `Authorization` headers `/private.jpg` was sent.
    authorizations: Arc<std::sync::Mutex<Vec<String>>>,
}

#[derive(Clone)]
struct OriginState {
    hits: Arc<AtomicUsize>,
    /// Which version `/changing.jpg` serves (its ETag is `"v<n>"`).
    version: Arc<AtomicUsize>,
    landscape: Arc<Vec<u8>>,
    /// This origin's own image (no other test's content is folded into it).
    private: Arc<Vec<u8>>,
    authorizations: Arc<std::sync::Mutex<Vec<String>>>,
    ip: String,
    port: u16,
}

/// The password in the URLs of the credential tests.
const URL_PASSWORD: &str = "hunter2-in-the-url";

async fn origin() -> Origin {
    let ip = crate::support::origin_ip();
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let salt = u32::from_str_radix(&uid()[..6], 16).unwrap();
    let state = OriginState {
        hits: Arc::new(AtomicUsize::new(0)),
        version: Arc::new(AtomicUsize::new(1)),
        landscape: Arc::new(jpeg(1600, 1200)),
        private: Arc::new(jpeg(64 + salt % 1000, 48 + (salt / 1000) % 200)),
        authorizations: Arc::default(),
        ip: ip.clone(),
        port,
    };
    let hits = state.hits.clone();
    let version = state.version.clone();
    let authorizations = state.authorizations.clone();
    let app = axum::Router::new()
        .route(
            "/changing.jpg",
            route_get(
                |State(s): State<OriginState>, headers: axum::http::HeaderMap| async move {
                    let v = s.version.load(Ordering::SeqCst);
                    let etag = format!("\"v{v}\"");
                    if headers
                        .get(header::IF_NONE_MATCH)
                        .and_then(|h| h.to_str().ok())
                        == Some(etag.as_str())
                    {
                        return StatusCode::NOT_MODIFIED.into_response();
                    }
                    let body = if v == 1 {
                        jpeg(640, 480)
                    } else {
                        jpeg(300, 600)
                    };
                    (
                        [
                            (header::CONTENT_TYPE, "image/jpeg".to_owned()),
                            (header::ETAG, etag),
                        ],
                        body,
                    )
                        .into_response()
                },
            ),
        )
        .route(
            "/landscape.jpg",
            route_get(|State(s): State<OriginState>| async move {
                s.hits.fetch_add(1, Ordering::SeqCst);
                ([(header::CONTENT_TYPE, "image/jpeg")], s.landscape.to_vec())
            }),
        )
        .route(
            "/copy-of-landscape.jpg",
            route_get(|State(s): State<OriginState>| async move {
                ([(header::CONTENT_TYPE, "image/jpeg")], s.landscape.to_vec())
            }),
        )
        .route(
            "/portrait.png",
            route_get(|| async { ([(header::CONTENT_TYPE, "image/png")], png(300, 900)) }),
        )
        .route(
            "/missing.jpg",
            route_get(|| async { StatusCode::NOT_FOUND }),
        )
        .route(
            "/flaky.jpg",
            route_get(|| async { StatusCode::SERVICE_UNAVAILABLE }),
        )
        .route(
            "/text.jpg",
            route_get(|| async { "<html>not an image</html>" }),
        )
        .route("/bomb.png", route_get(|| async { bomb() }))
        .route("/huge.jpg", route_get(|| async { vec![0xFFu8; 9 << 20] }))
        .route(
            "/to-private",
            route_get(|| async { Redirect::temporary("http://10.255.255.1/x.jpg") }),
        )
        .route(
            "/to-localhost",
            route_get(|State(s): State<OriginState>| async move {
                Redirect::temporary(&format!("http://localhost:{}/landscape.jpg", s.port))
            }),
        )
        .route(
            "/to-landscape",
            route_get(|| async { Redirect::temporary("/landscape.jpg") }),
        )
        .route(
            "/private.jpg",
            route_get(
                |State(s): State<OriginState>, headers: axum::http::HeaderMap| async move {
                    if let Some(a) = headers.get(header::AUTHORIZATION) {
                        let a = String::from_utf8_lossy(a.as_bytes()).into_owned();
                        s.authorizations.lock().unwrap().push(a);
                    }
                    (
                        [
                            (header::CONTENT_TYPE, "image/jpeg"),
                            (header::SET_COOKIE, "session=s3cr3t-cookie; HttpOnly"),
                            (
                                header::HeaderName::from_static("set-cookie2"),
                                "old=s3cr3t-cookie",
                            ),
                            (header::WWW_AUTHENTICATE, "Basic realm=\"s3cr3t-realm\""),
                            (header::PROXY_AUTHENTICATE, "Basic realm=\"s3cr3t-realm\""),
                            (header::AUTHORIZATION, "Bearer s3cr3t-token"),
                            (
                                header::HeaderName::from_static("x-served-by"),
                                "kartei-test",
                            ),
                        ],
                        s.private.to_vec(),
                    )
                },
            ),
        )
        .route(
            "/to-credentials/{target}",
            route_get(
                |State(s): State<OriginState>, Path(target): Path<String>| async move {
                    Redirect::temporary(&format!(
                        "http://someone:{URL_PASSWORD}@{}:{}/{target}",
                        s.ip, s.port
                    ))
                },
            ),
        )
        .with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Origin {
        base: format!("http://{ip}:{port}"),
        hits,
        version,
        authorizations,
    }
}

async fn register(srv: &TestServer, url: &str, context: &str) -> (StatusCode, Value) {
    let r = srv
        .client
        .put(format!("{}/binaries", srv.url))
        .bearer_auth(srv.token(&["machine"]))
        .json(&json!({"url": url, "context": context}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

const BINARY: &str = "query($r: ID!) { binary(referenceId: $r) { referenceId originalId context status mime size checksum width height url error logs { message } derivatives { size url } } }";

/// Asks for a re-crawl of `url` (admin).
async fn recrawl(srv: &TestServer, url: &str) {
    let d = srv
        .data(
            "mutation($u: String!) { recrawl(url: $u) }",
            json!({"u": url}),
            Some(&srv.token(&["admin"])),
        )
        .await;
    assert_eq!(d["recrawl"], json!(true));
}

/// Polls until the binary is as `done` says.
async fn eventually(srv: &TestServer, reference: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..300 {
        let d = srv.data(BINARY, json!({"r": reference}), None).await;
        if done(&d["binary"]) {
            return d["binary"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{reference} never got there");
}

/// Polls until the binary leaves PROCESSING/RETRY.
pub(crate) async fn settled(srv: &TestServer, reference: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let d = srv.data(BINARY, json!({"r": reference}), None).await;
        let b = d["binary"].clone();
        if b["status"] != "PROCESSING" && b["status"] != "RETRY" {
            return b;
        }
        last = b;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{reference} never settled: {last}");
}

async fn get(srv: &TestServer, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = srv.client.get(format!("{}{path}", srv.url));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

fn multipart(context: &str, file: &[u8]) -> (String, Vec<u8>) {
    let boundary = format!("kartei-{}", uid());
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"context\"\r\n\r\n{context}\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

pub(crate) async fn upload(srv: &TestServer, context: &str, file: &[u8]) -> (StatusCode, Value) {
    let (ct, body) = multipart(context, file);
    let r = srv
        .client
        .post(format!("{}/binaries/upload", srv.url))
        .bearer_auth(srv.token(&["machine"]))
        .header(header::CONTENT_TYPE, ct)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn graphql_upload(srv: &TestServer, context: &str, file: &[u8]) -> Value {
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
    srv.client
        .post(format!("{}/graphql", srv.url))
        .bearer_auth(srv.token(&["machine"]))
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

fn dims(bytes: &[u8]) -> (u32, u32) {
    let img = image::load_from_memory(bytes).unwrap();
    (img.width(), img.height())
}

async fn a_registered_url_is_fetched_scaled_and_served(engine: Engine) {
    let srv = server(engine).await;
    let o = origin().await;
    let context = format!("ctx-{}", uid());
    let url = format!("{}/landscape.jpg", o.base);
    let (status, r) = register(&srv, &url, &context).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    assert!(reference.len() >= 16 && reference.chars().all(|c| c.is_ascii_alphanumeric()));
    let b = settled(&srv, &reference).await;
    assert_eq!(b["status"], "OK", "{b}");
    assert_eq!(
        (b["width"].clone(), b["height"].clone()),
        (json!(1600), json!(1200))
    );
    assert_eq!(b["mime"], "image/jpeg");
    assert!(b["logs"].as_array().unwrap().len() >= 3, "{b}");

    let served = get(&srv, &format!("/binary/{reference}"), &[]).await;
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(served.headers()[header::CONTENT_TYPE], "image/jpeg");
    let etag = served.headers()[header::ETAG].to_str().unwrap().to_owned();
    let bytes = served.bytes().await.unwrap();
    assert_eq!(&bytes[..], &jpeg(1600, 1200)[..], "the bytes are identical");

    let again = get(
        &srv,
        &format!("/binary/{reference}"),
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let part = get(
        &srv,
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
        &srv,
        &format!("/binary/{reference}"),
        &[("range", "bytes=-7")],
    )
    .await;
    assert_eq!(&tail.bytes().await.unwrap()[..], &bytes[bytes.len() - 7..]);
    let outside = get(
        &srv,
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
            &srv,
            &format!("/binary/{reference}/full/{size}/default.jpg"),
            &[],
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK, "{size}");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "image/jpeg");
        assert_eq!(dims(&r.bytes().await.unwrap()), want, "{size}");
    }
    let r = get(
        &srv,
        &format!("/binary/{reference}/full/!10,10/default.jpg"),
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = get(&srv, "/binary/NoSuchReference0", &[]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // The same URL again: the same original, no second download.
    let hits = o.hits.load(Ordering::SeqCst);
    let (_, again) = register(&srv, &url, &context).await;
    assert_eq!(again["originalId"], r_original(&b));
    assert_eq!(again["status"], "OK");
    assert_eq!(o.hits.load(Ordering::SeqCst), hits, "no second download");
    // Identical bytes from another URL end in the same original.
    let (_, copy) = register(&srv, &format!("{}/copy-of-landscape.jpg", o.base), &context).await;
    let copy_ref = copy["referenceId"].as_str().unwrap().to_owned();
    let mut same = false;
    for _ in 0..200 {
        let d = srv.data(BINARY, json!({"r": copy_ref}), None).await;
        if d["binary"]["originalId"] == r_original(&b) && d["binary"]["status"] == "OK" {
            same = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(same, "identical content is stored once");
    // A redirect to an allowed address is followed.
    let (_, redirected) = register(&srv, &format!("{}/to-landscape", o.base), &context).await;
    let b = settled(&srv, redirected["referenceId"].as_str().unwrap()).await;
    assert_eq!(b["status"], "OK", "{b}");
    // Portrait PNG with alpha: fitted by height, never upscaled for the small ones.
    let (_, p) = register(&srv, &format!("{}/portrait.png", o.base), &context).await;
    let pref = p["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&srv, &pref).await["status"], "OK");
    let r = get(
        &srv,
        &format!("/binary/{pref}/full/!800,600/default.jpg"),
        &[],
    )
    .await;
    assert_eq!(dims(&r.bytes().await.unwrap()), (200, 600));
    let r = get(
        &srv,
        &format!("/binary/{pref}/full/!140,105/default.jpg"),
        &[],
    )
    .await;
    assert_eq!(dims(&r.bytes().await.unwrap()), (35, 105));
}

fn r_original(b: &Value) -> Value {
    b["originalId"].clone()
}

async fn uploads_stream_into_storage_and_deduplicate(engine: Engine) {
    let srv = server(engine).await;
    let context = format!("up-{}", uid());
    // 2.5 MiB: three chunks.
    let big = jpeg(2400, 1800);
    let mut file = big.clone();
    file.resize(file.len().max(5 << 19), 0);
    let (status, r) = upload(&srv, &context, &file).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    let b = settled(&srv, &reference).await;
    assert_eq!(b["status"], "OK", "{b}");
    assert_eq!(b["size"], json!(file.len() as f64));
    let served = get(&srv, &format!("/binary/{reference}"), &[]).await;
    assert_eq!(served.bytes().await.unwrap().len(), file.len());
    let mid = get(
        &srv,
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
    let (_, again) = upload(&srv, &context, &file).await;
    assert_eq!(again["originalId"], b["originalId"]);

    // Through GraphQL's multipart request.
    let g = graphql_upload(&srv, &context, &png(64, 48)).await;
    let gref = g["data"]["uploadBinary"]["referenceId"]
        .as_str()
        .unwrap_or_else(|| panic!("{g}"))
        .to_owned();
    let b = settled(&srv, &gref).await;
    assert_eq!(
        (b["status"].clone(), b["width"].clone()),
        (json!("OK"), json!(64))
    );
    let listed = srv
        .data(
            "query($c: String!) { binaries(context: $c, first: 10) { edges { node { referenceId status created context } } } }",
            json!({"c": context}),
            None,
        )
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

async fn bad_binaries_end_in_clear_errors(engine: Engine) {
    let srv = server(engine).await;
    let o = origin().await;
    let context = format!("bad-{}", uid());
    // Refused at once.
    let (status, body) = upload(&srv, &context, b"just some text").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // A PNG signature, then a little more than the limit of 8 MiB (a little,
    // so that the rest fits the socket buffers once the server answers 413
    // and stops reading: this client only reads the answer after sending).
    let mut too_big = b"\x89PNG\r\n\x1a\n".to_vec();
    too_big.resize((8 << 20) + (32 << 10), 0xFF);
    let (status, body) = upload(&srv, &context, &too_big).await;
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
        let (status, body) = register(&srv, &url, &context).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(body["error"]["code"], "BAD_USER_INPUT");
    }
    let r = srv
        .client
        .put(format!("{}/binaries", srv.url))
        .json(&json!({"url": format!("{}/landscape.jpg", o.base), "context": context}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = srv
        .client
        .put(format!("{}/binaries", srv.url))
        .bearer_auth(srv.token(&["editor"]))
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
        let (status, r) = upload(&srv, &context, &bytes).await;
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
        let (status, r) = register(&srv, &format!("{}{path}", o.base), &context).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{why}: {r}");
        cases.push((r["referenceId"].as_str().unwrap().to_owned(), why));
    }
    for (reference, why) in &cases {
        let b = settled(&srv, reference).await;
        assert_eq!(b["status"], "ERROR", "{why}: {b}");
        assert!(
            b["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{why}: {b}"
        );
        let logs = b["logs"].to_string();
        assert!(logs.contains("ERROR"), "{why}: {logs}");
        let r = get(&srv, &format!("/binary/{reference}"), &[]).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{why}");
    }
    // The flaky one was retried before giving up.
    let flaky = &cases.iter().find(|c| c.1 == "503").unwrap().0;
    let logs = settled(&srv, flaky).await["logs"].to_string();
    assert!(logs.contains("RETRY"), "{logs}");
    // The server is still fine.
    assert_eq!(get(&srv, "/healthz", &[]).await.status(), StatusCode::OK);
}

async fn deleting_references_and_collecting_originals(engine: Engine) {
    let srv = server(engine).await;
    let context = format!("del-{}", uid());
    let other = format!("keep-{}", uid());
    let (_, a) = upload(&srv, &context, &jpeg(320, 240)).await;
    let (_, b) = upload(&srv, &context, &jpeg(330, 240)).await;
    let (_, kept) = upload(&srv, &other, &jpeg(340, 240)).await;
    for r in [&a, &b, &kept] {
        settled(&srv, r["referenceId"].as_str().unwrap()).await;
    }
    let logs: Value = get(&srv, &format!("/binary/logs/{context}"), &[])
        .await
        .json()
        .await
        .unwrap();
    assert!(logs.as_array().unwrap().len() >= 4, "{logs}");
    let admin = srv.admin();
    let r = srv
        .client
        .delete(format!("{}/binaries/context/{context}", srv.url))
        .bearer_auth(srv.token(&["machine"]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r: Value = srv
        .client
        .delete(format!("{}/binaries/context/{context}", srv.url))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["deleted"], 2);
    let logs: Value = get(&srv, &format!("/binary/logs/{context}"), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(logs, json!([]));
    let gone = a["referenceId"].as_str().unwrap();
    assert_eq!(
        get(&srv, &format!("/binary/{gone}"), &[]).await.status(),
        StatusCode::NOT_FOUND
    );
    // (On the shared Cassandra keyspace another test's collection may get there first.)
    srv.binaries.collect_garbage().await.unwrap();
    for r in [&a, &b] {
        let id = r["originalId"].as_str().unwrap();
        assert!(srv.binaries.original(id).await.unwrap().is_none());
        assert!(srv.binaries.part(id, 0).await.is_err(), "chunks are gone");
    }
    let k = kept["referenceId"].as_str().unwrap();
    assert_eq!(
        get(&srv, &format!("/binary/{k}"), &[]).await.status(),
        StatusCode::OK
    );
    let d = srv
        .data(
            "mutation($r: ID!) { deleteBinary(referenceId: $r) }",
            json!({"r": k}),
            Some(&admin),
        )
        .await;
    assert_eq!(d["deleteBinary"], json!(k));
    let r = srv
        .gql(
            "mutation($r: ID!) { deleteBinary(referenceId: $r) }",
            json!({"r": k}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "NOT_FOUND");
}

/// Registrations of one URL racing the collector: every reference that was
/// answered must end on an original that exists and serves.
async fn the_collector_never_takes_a_referenced_original(engine: Engine) {
    let srv = server(engine).await;
    let o = origin().await;
    let url = format!("{}/landscape.jpg", o.base);
    let mut answered = Vec::new();
    for round in 0..6 {
        let context = format!("race-{round}-{}", uid());
        let (_, first) = register(&srv, &url, &context).await;
        settled(&srv, first["referenceId"].as_str().unwrap()).await;
        // Drop every reference, then register again while collecting.
        let admin = kartei::kernel::roles::Principal::local(
            "tester",
            &[kartei::kernel::roles::Role::Admin],
        );
        srv.binaries.delete_context(&admin, &context).await.unwrap();
        let collector = {
            let b = srv.binaries.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    b.collect_garbage().await.unwrap();
                }
            })
        };
        let registrations =
            futures::future::join_all((0..4).map(|_| register(&srv, &url, &context))).await;
        collector.await.unwrap();
        for (status, r) in registrations {
            assert_eq!(status, StatusCode::ACCEPTED, "{r}");
            answered.push(r["referenceId"].as_str().unwrap().to_owned());
        }
    }
    srv.binaries.collect_garbage().await.unwrap();
    for reference in &answered {
        let b = settled(&srv, reference).await;
        assert_eq!(b["status"], "OK", "{b}");
        let r = get(&srv, &format!("/binary/{reference}"), &[]).await;
        assert_eq!(r.status(), StatusCode::OK, "{reference}");
        assert_eq!(r.bytes().await.unwrap().len(), jpeg(1600, 1200).len());
    }
}

/// A 400×300 PNG: left half red, right half blue, a green 40×30 block at (0,0).
fn quadrants() -> Vec<u8> {
    let img = image::RgbImage::from_fn(400, 300, |x, y| {
        if x < 40 && y < 30 {
            image::Rgb([0, 255, 0])
        } else if x < 200 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 255])
        }
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

async fn image_at(srv: &TestServer, path: &str) -> image::DynamicImage {
    let r = get(srv, path, &[]).await;
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
    image::load_from_memory(&r.bytes().await.unwrap()).unwrap()
}

fn near(p: image::Rgba<u8>, want: [u8; 3]) -> bool {
    (0..3).all(|i| (i32::from(p[i]) - i32::from(want[i])).abs() < 40)
}

async fn the_iiif_image_api_answers_level_2_requests(engine: Engine) {
    use image::GenericImageView;
    let srv = server(engine).await;
    let (_, r) = upload(&srv, &format!("iiif-{}", uid()), &quadrants()).await;
    let id = r["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&srv, &id).await["status"], "OK");
    let base = format!("/iiif/3/{id}");

    let redirect = srv
        .client
        .get(format!("{}{base}", srv.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        redirect.url().path(),
        format!("{base}/info.json"),
        "303 to info.json"
    );
    let ld = get(
        &srv,
        &format!("{base}/info.json"),
        &[("accept", "application/ld+json")],
    )
    .await;
    assert_eq!(ld.status(), StatusCode::OK);
    assert!(
        ld.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/ld+json")
    );
    let info: Value = ld.json().await.unwrap();
    assert_eq!(info["@context"], "http://iiif.io/api/image/3/context.json");
    assert_eq!(info["type"], "ImageService3");
    assert_eq!(info["profile"], "level2");
    assert_eq!(
        (info["width"].clone(), info["height"].clone()),
        (json!(400), json!(300))
    );
    assert!(info["id"].as_str().unwrap().ends_with(&base));
    // Without --public-url the id comes from the Host header, and the
    // answer says so: a cache must not give it to a client of another Host.
    let other = get(
        &srv,
        &format!("{base}/info.json"),
        &[("host", "other.example:8080")],
    )
    .await;
    assert_eq!(other.headers()[header::VARY], "host");
    let info: Value = other.json().await.unwrap();
    assert_eq!(
        info["id"],
        json!(format!("http://other.example:8080{base}"))
    );

    let i = image_at(&srv, &format!("{base}/full/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (400, 300));
    assert!(near(i.get_pixel(10, 10), [0, 255, 0]) && near(i.get_pixel(300, 150), [0, 0, 255]));
    let i = image_at(&srv, &format!("{base}/0,0,40,30/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (40, 30));
    assert!(near(i.get_pixel(20, 15), [0, 255, 0]));
    let i = image_at(&srv, &format!("{base}/pct:50,0,50,100/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (200, 300));
    assert!(near(i.get_pixel(100, 150), [0, 0, 255]));
    let i = image_at(&srv, &format!("{base}/square/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (300, 300));
    for (size, want) in [
        ("200,", (200, 150)),
        (",150", (200, 150)),
        ("pct:25", (100, 75)),
        ("!100,100", (100, 75)),
        ("50,50", (50, 50)),
        ("^800,", (800, 600)),
        ("^!1000,1000", (1000, 750)),
    ] {
        let i = image_at(&srv, &format!("{base}/full/{size}/0/default.png")).await;
        assert_eq!(i.dimensions(), want, "{size}");
    }
    let i = image_at(&srv, &format!("{base}/full/max/90/default.png")).await;
    assert_eq!(i.dimensions(), (300, 400));
    // Spellings of one request share their ETag (and cache entry).
    let etag_of = |size: &'static str| {
        let path = format!("{base}/full/{size}/0/default.jpg");
        let srv = &srv;
        async move {
            let r = get(srv, &path, &[]).await;
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            r.headers()[header::ETAG].to_str().unwrap().to_owned()
        }
    };
    let e = etag_of("pct:50").await;
    assert_eq!(e, etag_of("pct:50.0").await);
    assert_eq!(e, etag_of("pct:050").await);
    assert_ne!(e, etag_of("pct:51").await);
    assert!(
        near(i.get_pixel(290, 10), [0, 255, 0]),
        "the top-left block goes top-right"
    );
    let i = image_at(&srv, &format!("{base}/full/max/!0/default.png")).await;
    assert!(near(i.get_pixel(390, 10), [0, 255, 0]), "mirrored");
    let i = image_at(&srv, &format!("{base}/full/max/45/default.png")).await;
    assert!(i.width() > 400 && i.height() > 300);
    let i = image_at(&srv, &format!("{base}/full/max/0/gray.png")).await;
    let p = i.get_pixel(300, 150);
    assert!(p[0] == p[1] && p[1] == p[2], "gray");
    let i = image_at(&srv, &format!("{base}/full/max/0/bitonal.png")).await;
    assert!(
        i.to_luma8().pixels().all(|p| p[0] == 0 || p[0] == 255),
        "bitonal"
    );
    for f in ["jpg", "webp"] {
        let i = image_at(&srv, &format!("{base}/full/100,/0/default.{f}")).await;
        assert_eq!(i.dimensions(), (100, 75), "{f}");
    }
    // Stored derivatives answer what they are.
    let stored = get(
        &srv,
        &format!("/binary/{id}/full/!140,105/default.jpg"),
        &[],
    )
    .await;
    let via_iiif = get(&srv, &format!("{base}/full/!140,105/0/default.jpg"), &[]).await;
    assert_eq!(
        stored.bytes().await.unwrap(),
        via_iiif.bytes().await.unwrap()
    );

    for (path, status) in [
        ("full/800,/0/default.png", StatusCode::BAD_REQUEST),
        ("full/full/0/default.png", StatusCode::BAD_REQUEST),
        ("500,0,10,10/max/0/default.png", StatusCode::BAD_REQUEST),
        ("full/max/400/default.png", StatusCode::BAD_REQUEST),
        ("full/max/0/sepia.png", StatusCode::BAD_REQUEST),
        ("full/max/0/default.tif", StatusCode::NOT_IMPLEMENTED),
        ("full/^99999,/0/default.png", StatusCode::BAD_REQUEST),
        ("bogus/max/0/default.png", StatusCode::BAD_REQUEST),
    ] {
        let r = get(&srv, &format!("{base}/{path}"), &[]).await;
        assert_eq!(r.status(), status, "{path}");
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
    }
    let r = get(&srv, "/iiif/3/NoSuchReference0/full/max/0/default.jpg", &[]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

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
        ..crate::support::test_binary_args()
    };
    let srv = crate::support::server_full(engine, crate::support::test_limits(), args, true).await;
    let (_, r) = upload(&srv, &format!("flood-{}", uid()), &jpeg(800, 600)).await;
    let id = r["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&srv, &id).await["status"], "OK");
    let other = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let fetch =
        |client: &reqwest::Client, path: String| client.get(format!("{}{path}", srv.url)).send();
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
            &srv.client,
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

async fn rechecking_revalidates_and_rederives_changed_content(engine: Engine) {
    let srv = server(engine).await;
    let o = origin().await;
    let (_, r) = register(
        &srv,
        &format!("{}/changing.jpg", o.base),
        &format!("re-{}", uid()),
    )
    .await;
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    let before = settled(&srv, &reference).await;
    assert_eq!(before["width"], 640);
    let original = before["originalId"].as_str().unwrap().to_owned();
    // Unchanged: the crawler re-fetches with the stored ETag and gets a 304.
    let url = format!("{}/changing.jpg", o.base);
    recrawl(&srv, &url).await;
    let same = eventually(&srv, &reference, |b| {
        b["logs"].to_string().contains("not modified")
    })
    .await;
    assert_eq!(same["originalId"], json!(original));
    // Changed: a new original, scaled, and the reference follows it.
    o.version.store(2, Ordering::SeqCst);
    recrawl(&srv, &url).await;
    let after = eventually(&srv, &reference, |b| {
        b["originalId"] != json!(original) && b["status"] == "OK"
    })
    .await;
    assert_eq!(
        (after["status"].clone(), after["width"].clone()),
        (json!("OK"), json!(300))
    );
    // The history: first sighting, the fetch, the 304, the changed fetch.
    // The fetch's history row is written just after the body settled the
    // binary, so it may come a moment after the status.
    let h = srv
        .data_until(
            "query($u: String!) { crawlLink(url: $u) { firstSighting status } }",
            json!({"u": url}),
            Some(&srv.token(&["admin"])),
            |h| h["crawlLink"].as_array().is_some_and(|a| a.len() >= 4),
        )
        .await;
    assert_eq!(
        h["crawlLink"],
        json!([
            {"firstSighting": true, "status": null},
            {"firstSighting": false, "status": 200},
            {"firstSighting": false, "status": 304},
            {"firstSighting": false, "status": 200}
        ])
    );
    let r = get(
        &srv,
        &format!("/binary/{reference}/full/!800,600/default.jpg"),
        &[],
    )
    .await;
    assert_eq!(dims(&r.bytes().await.unwrap()), (300, 600));
    // The old original is now unreferenced and goes with the next collection.
    srv.binaries.collect_garbage().await.unwrap();
    assert!(srv.binaries.original(&original).await.unwrap().is_none());
}

/// A context's logs are streamed a page of references at a time; the answer
/// is one JSON array holding every reference's lines, across pages.
async fn a_context_s_logs_come_in_one_array_across_pages(engine: Engine) {
    use kartei::domains::binaries::service::LOG_PAGE;
    // No crawler, in keyspaces of its own: the hundred links are never
    // fetched (other tests' crawlers would spend minutes on them).
    let srv = crate::support::serve_crawling(
        crate::support::isolated_store(engine).await,
        crate::support::test_limits(),
        crate::support::test_binary_args(),
        None,
    )
    .await;
    let o = origin().await;
    let context = format!("logs-{}", uid());
    let machine =
        kartei::kernel::roles::Principal::local("logs", &[kartei::kernel::roles::Role::Machine]);
    let n = LOG_PAGE * 2 + 3;
    for i in 0..n {
        srv.binaries
            .register_url(
                &machine,
                &format!("{}/landscape.jpg?n={i}", o.base),
                &context,
                None,
            )
            .await
            .expect("register");
    }
    let r = get(&srv, &format!("/binary/logs/{context}"), &[]).await;
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
    let none: Value = get(&srv, &format!("/binary/logs/none-{}", uid()), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(none, json!([]));
}

const CRAWLS: &str = "query($r: ID!) { binary(referenceId: $r) {
    url error logs { message } crawls { url status redirectedTo error headers } } }";

/// A binary with its crawl history as `token` sees it, once a fetch of its
/// URL is recorded (the history row follows the binary's status).
async fn crawled(srv: &TestServer, reference: &str, token: Option<&str>) -> Value {
    let d = srv
        .data_until(CRAWLS, json!({"r": reference}), token, |d| {
            d["binary"]["crawls"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|f| !f["status"].is_null() || !f["error"].is_null())
            })
        })
        .await;
    d["binary"].clone()
}

/// A link's history through `crawlLink`, as `token` sees it.
async fn crawl_link(srv: &TestServer, url: &str, token: &str) -> Value {
    srv.data(
        "query($u: String!) { crawlLink(url: $u) { url status redirectedTo error headers } }",
        json!({"u": url}),
        Some(token),
    )
    .await["crawlLink"]
        .clone()
}

/// The stored history rows of a link (the `links` table), read directly.
async fn link_rows(srv: &TestServer, url: &str) -> Vec<kartei::store::Row> {
    use kartei::store::{Slice, Store};
    let key = kartei::domains::crawl::model::LinkKey::of(url).unwrap();
    srv.store
        .slice(
            &kartei::domains::crawl::model::LINKS,
            &Slice::partition(vec![key.dom.as_str().into(), key.bucket().into()]).prefix(vec![
                key.subdom.as_str().into(),
                key.path.as_str().into(),
                key.proto.as_str().into(),
            ]),
        )
        .await
        .unwrap()
        .rows
}

/// A site answers with cookies, an authentication challenge and an
/// `Authorization` header: none of them is stored, and the headers that are
/// kept are shown to the crawl's operators (machine, admin) only; everybody
/// else gets an empty list.
async fn fetched_headers_keep_no_cookies_or_credentials_and_only_operators_see_them(
    engine: Engine,
) {
    let srv = server(engine).await;
    let o = origin().await;
    let url = format!("{}/private.jpg", o.base);
    let (status, r) = register(&srv, &url, &format!("ctx-{}", uid())).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&srv, &reference).await["status"], "OK");

    let machine = srv.token(&["machine"]);
    let seen = crawled(&srv, &reference, Some(&machine)).await;
    let fetch = seen["crawls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["status"] == 200)
        .cloned()
        .unwrap_or_else(|| panic!("no fetch recorded: {seen:#}"));
    let headers = fetch["headers"].to_string();
    assert!(headers.contains("x-served-by: kartei-test"), "{headers}");
    assert!(headers.contains("content-type: image/jpeg"), "{headers}");
    assert!(!seen.to_string().contains("s3cr3t"), "{seen:#}");
    for name in [
        "set-cookie",
        "www-authenticate",
        "proxy-authenticate",
        "authorization",
    ] {
        assert!(
            !headers.to_ascii_lowercase().contains(name),
            "{name}: {headers}"
        );
    }
    let as_admin = crawl_link(&srv, &url, &srv.admin()).await;
    assert!(as_admin.to_string().contains("x-served-by"), "{as_admin:#}");
    assert!(!as_admin.to_string().contains("s3cr3t"), "{as_admin:#}");

    // Readers, contributors and editors: the same history, without headers.
    let contributor = srv.token(&["contributor"]);
    let editor = srv.token(&["editor"]);
    for token in [None, Some(contributor.as_str()), Some(editor.as_str())] {
        let b = crawled(&srv, &reference, token).await;
        let crawls = b["crawls"].as_array().unwrap();
        assert!(
            crawls.iter().any(|f| f["status"] == 200),
            "{token:?}: {b:#}"
        );
        assert!(
            crawls.iter().all(|f| f["headers"] == json!([])),
            "{token:?}: {b:#}"
        );
    }
    let as_editor = crawl_link(&srv, &url, &editor).await;
    assert!(
        as_editor
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["headers"] == json!([])),
        "{as_editor:#}"
    );

    // Never stored: the history rows themselves hold none of them.
    let rows = link_rows(&srv, &url).await;
    let stored: Vec<String> = rows.iter().flat_map(|r| r.text_list("headers")).collect();
    assert!(
        stored.iter().any(|h| h.starts_with("x-served-by")),
        "{stored:?}"
    );
    assert!(stored.iter().all(|h| !h.contains("s3cr3t")), "{stored:?}");
}

/// A URL registered with `user:password@`: registered, fetched and shown
/// without them (the same original as the plain URL), never sent to the
/// site; a redirect to a URL with credentials, and a failed fetch whose
/// error names such a URL, keep them out of every answer and every row too.
async fn credentials_in_a_url_are_never_stored_shown_nor_sent(engine: Engine) {
    let srv = server(engine).await;
    let o = origin().await;
    let context = format!("ctx-{}", uid());
    let plain = format!("{}/private.jpg", o.base);
    let with = plain.replacen("http://", &format!("http://someone:{URL_PASSWORD}@"), 1);
    let (status, r) = register(&srv, &with, &context).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    assert!(!r.to_string().contains(URL_PASSWORD), "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    let b = settled(&srv, &reference).await;
    assert_eq!(b["status"], "OK", "fetched without them: {b:#}");
    assert_eq!(b["url"], plain.as_str());
    assert!(
        b["logs"].to_string().contains("credentials"),
        "the logs say they were dropped: {b:#}"
    );
    let (_, again) = register(&srv, &plain, &context).await;
    assert_eq!(
        again["originalId"], r["originalId"],
        "one URL, one original"
    );

    let redirect = format!("{}/to-credentials/private.jpg", o.base);
    let (_, redirected) = register(&srv, &redirect, &context).await;
    let redirected = redirected["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&srv, &redirected).await["status"], "OK");
    // On to a private address from there: the refusal's error names the URL
    // it was at, credentials and all.
    let dead = format!("{}/to-credentials/to-private", o.base);
    let (_, failed) = register(&srv, &dead, &context).await;
    let failed = failed["referenceId"].as_str().unwrap().to_owned();
    let f = settled(&srv, &failed).await;
    assert_eq!(f["status"], "ERROR", "{f:#}");

    let admin = srv.admin();
    let mut seen = Vec::new();
    for r in [&reference, &redirected, &failed] {
        seen.push(crawled(&srv, r, None).await);
        seen.push(crawled(&srv, r, Some(&admin)).await);
    }
    let to_credentials = crawl_link(&srv, &redirect, &admin).await;
    assert!(
        to_credentials
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["redirectedTo"]
                .as_str()
                .is_some_and(|u| u.ends_with("/private.jpg"))),
        "the redirect is recorded: {to_credentials:#}"
    );
    seen.push(to_credentials);
    let to_dead = crawl_link(&srv, &dead, &admin).await;
    assert!(
        to_dead.to_string().contains("/to-private"),
        "the error names the URL: {to_dead:#}"
    );
    seen.push(to_dead);
    seen.push(crawl_link(&srv, &plain, &admin).await);
    let logs: Value = get(&srv, &format!("/binary/logs/{context}"), &[])
        .await
        .json()
        .await
        .unwrap();
    seen.push(logs);
    for answer in &seen {
        assert!(!answer.to_string().contains(URL_PASSWORD), "{answer:#}");
    }
    for url in [&plain, &redirect, &dead] {
        let rows = link_rows(&srv, url).await;
        assert!(!rows.is_empty(), "{url}");
        for row in rows {
            assert!(!format!("{row:?}").contains(URL_PASSWORD), "{row:?}");
        }
    }
    // The URL is mapped to its original without them, never with them.
    let mapped = |url: &str| {
        use kartei::store::Store;
        let key = [url.into()];
        let store = srv.store.clone();
        async move {
            let row = store
                .get(&kartei::domains::binaries::model::URLS, &key)
                .await;
            row.unwrap().is_some()
        }
    };
    assert!(!mapped(&with).await);
    assert!(mapped(&plain).await);
    assert!(
        o.authorizations.lock().unwrap().is_empty(),
        "credentials were sent: {:?}",
        o.authorizations.lock().unwrap()
    );
}

/// The one original row of a store of its own, if any.
async fn originals_in(store: &kartei::store::DynStore) -> Vec<kartei::store::Row> {
    store
        .scan(&kartei::domains::binaries::model::ORIGINALS, None, 100)
        .await
        .unwrap()
        .rows
}

/// An upload slower than its lease (1 h) renews it while bytes arrive, so
/// the collector leaves it alone; one that stalls past its lease loses its
/// bytes to the collector and fails when the next bytes come, writing no
/// chunk after the collector's sweep. The service's clock is moved by hand.
async fn a_slow_upload_renews_its_lease_and_a_stalled_one_leaves_nothing(engine: Engine) {
    use bytes::Bytes;
    use futures::channel::mpsc;
    let ts = crate::support::isolated_store(engine).await;
    let store = ts.store.clone();
    let now = Arc::new(std::sync::Mutex::new(time::OffsetDateTime::now_utc()));
    let clock = {
        let now = now.clone();
        kartei::kernel::Clock::from_fn(move || *now.lock().unwrap())
    };
    let b = crate::support::binaries_at(&store, clock);
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
        .scan(&kartei::domains::binaries::model::ORIGINALS_DATA, None, 100)
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
    fetched_headers_keep_no_cookies_or_credentials_and_only_operators_see_them,
    credentials_in_a_url_are_never_stored_shown_nor_sent,
    rechecking_revalidates_and_rederives_changed_content,
    the_iiif_image_api_answers_level_2_requests,
    one_client_s_flood_of_render_variants_never_delays_another_client,
    a_registered_url_is_fetched_scaled_and_served,
    uploads_stream_into_storage_and_deduplicate,
    bad_binaries_end_in_clear_errors,
    deleting_references_and_collecting_originals,
    the_collector_never_takes_a_referenced_original,
    a_context_s_logs_come_in_one_array_across_pages,
    a_slow_upload_renews_its_lease_and_a_stalled_one_leaves_nothing,
);
