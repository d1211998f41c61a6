//! The binaries domain over real HTTP, on both engines: a local image server
//! on 127.0.0.x (the internal addresses downloads may reach in tests),
//! registrations, uploads, serving, derivatives, bad input, deletion and
//! the collector.

mod collector;
mod fetching;
mod history;
mod iiif;
mod logs;
mod origin;
mod presentation;
mod recheck;
mod renders;
mod tiles;
mod uploads;

use std::io::Cursor;
use std::time::Duration;

use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use crate::support::{TestServer, uid};

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

pub(crate) fn png(w: u32, h: u32) -> Vec<u8> {
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

fn dims(bytes: &[u8]) -> (u32, u32) {
    let img = image::load_from_memory(bytes).unwrap();
    (img.width(), img.height())
}
