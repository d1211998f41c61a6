//! The hostile-input corpus: each defect a probe found (issue 16, D1-D7 and
//! the notes after them), with a variant, against the real `kartei serve`
//! binary on the embedded store. Each case asserts a typed answer and bounds
//! what it cost the server: the time to the answer, and the growth of the
//! server's peak resident memory (VmHWM), both measured here. The bounds are
//! loose on purpose (the defects took minutes and gigabytes); they catch the
//! defect coming back, not a slow machine.

mod corpus;
mod importers;
mod slow_clients;
mod sockets;
mod weights;

use std::io::Cursor;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{SECRET, uid};

/// What any hostile case may cost the server at most.
const TIME_BOUND: Duration = Duration::from_secs(10);
const MEMORY_BOUND_KIB: u64 = 96 * 1024;

/// A `kartei serve` child process with short timeouts, killed on drop.
struct Server {
    child: Child,
    url: String,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
    spool: std::path::PathBuf,
    client: reqwest::Client,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("tmp");
    std::fs::create_dir_all(&spool).unwrap();
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let data = dir.path().join("data");
    let mut args: Vec<String> = [
        "serve",
        "--demo",
        "--listen",
        &addr.to_string(),
        "--data-dir",
        data.to_str().unwrap(),
        "--auth-secret",
        SECRET,
        "--cache-bytes",
        "8388608",
        "--header-timeout",
        "2",
        "--body-timeout",
        "2",
        "--request-timeout",
        "5",
        "--max-upload-bytes",
        "8388608",
        "--fetch-allow",
        "127.0.0.2/32",
        "--fetch-total-timeout",
        "4",
        "--fetch-read-timeout",
        "3",
        "--fetch-attempts",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let child = Command::new(env!("CARGO_BIN_EXE_kartei"))
        .args(&args)
        .env_remove("KARTEI_CASSANDRA")
        .env("TMPDIR", &spool)
        .env("KARTEI_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kartei serve");
    let server = Server {
        child,
        url: format!("http://{addr}"),
        addr,
        _dir: dir,
        spool,
        // No pooled connections: the server closes idle ones after 2 s.
        client: reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap(),
    };
    for _ in 0..200 {
        if let Ok(r) = server
            .client
            .get(format!("{}/healthz", server.url))
            .send()
            .await
            && r.status().is_success()
        {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("kartei serve did not come up");
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
impl Server {
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server is running");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }

    fn token(&self, sub: &str, roles: &[&str]) -> String {
        let claims = json!({"sub": sub, "roles": roles, "exp": jsonwebtoken::get_current_timestamp() + 3600});
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap()
    }

    async fn gql(&self, query: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self
            .client
            .post(format!("{}/graphql", self.url))
            .json(&json!({ "query": query }));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.expect("an answer");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Runs one case and checks what it cost.
    async fn case<F: std::future::Future<Output = ()>>(&self, name: &str, f: F) {
        let before = self.peak_kib();
        let started = Instant::now();
        f.await;
        let took = started.elapsed();
        let grew = self.peak_kib().saturating_sub(before);
        eprintln!(
            "hostile case {name}: {:.0} ms, peak resident +{} KiB",
            took.as_secs_f64() * 1000.0,
            grew
        );
        assert!(took < TIME_BOUND, "{name} took {took:?}");
        assert!(
            grew < MEMORY_BOUND_KIB,
            "{name} grew the server by {grew} KiB"
        );
        // And the server still answers an ordinary query.
        let (status, r) = self.gql("{ portals { id } }", None).await;
        assert_eq!(status, 200, "{name}: the server still serves: {r}");
    }

    fn spool_is_empty(&self) -> bool {
        std::fs::read_dir(&self.spool).unwrap().next().is_none()
    }
}

/// Asserts that `r` is a BAD_USER_INPUT refusal whose message says `says`.
fn refused(r: &Value, says: &str) {
    assert_eq!(code(r), "BAD_USER_INPUT", "{r}");
    let message = r["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains(says), "{r}");
}

fn code(r: &Value) -> &str {
    r["errors"][0]["extensions"]["code"]
        .as_str()
        .or_else(|| r["error"]["code"].as_str())
        .unwrap_or_else(|| panic!("no error code in {r}"))
}

/// Sends `head` and then `body_len` bytes of `fill` in pieces, stopping when
/// the server stops reading; returns the response text (if any came) and how
/// many body bytes were accepted.
async fn push_raw(addr: SocketAddr, head: &str, body_len: usize, fill: u8) -> (String, usize) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let piece = vec![fill; 64 << 10];
    let mut sent = 0;
    while sent < body_len {
        let n = piece.len().min(body_len - sent);
        match tokio::time::timeout(Duration::from_secs(5), s.write_all(&piece[..n])).await {
            Ok(Ok(())) => sent += n,
            _ => break,
        }
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await;
    (String::from_utf8_lossy(&answer).into_owned(), sent)
}

fn jpeg(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Jpeg)
        .unwrap();
    out
}

fn form(fields: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = format!("hostile-{}", uid());
    let mut body = Vec::new();
    for (name, filename, data) in fields {
        let disposition = match filename {
            Some(f) => format!("form-data; name=\"{name}\"; filename=\"{f}\""),
            None => format!("form-data; name=\"{name}\""),
        };
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(srv: &Server, token: &str, context: &[u8], file: &[u8]) -> (u16, Value) {
    let (ct, body) = form(&[("context", None, context), ("file", Some("x"), file)]);
    let r = srv
        .client
        .post(format!("{}/binaries/upload", srv.url))
        .bearer_auth(token)
        .header("content-type", ct)
        .body(body)
        .send()
        .await;
    match r {
        Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
        // The server may answer and close before the client has sent everything.
        Err(_) => (0, Value::Null),
    }
}

async fn status_of(srv: &Server, reference: &str) -> Value {
    let q =
        format!("{{ binary(referenceId: \"{reference}\") {{ status error logs {{ message }} }} }}");
    srv.gql(&q, None).await.1["data"]["binary"].clone()
}

async fn settled(srv: &Server, reference: &str, bound: Duration) -> Value {
    let started = Instant::now();
    loop {
        let b = status_of(srv, reference).await;
        if b["status"] != "PROCESSING" && b["status"] != "RETRY" {
            return b;
        }
        assert!(
            started.elapsed() < bound,
            "{reference} still {b} after {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A web server on 127.0.0.2 that answers every request with one byte a second.
async fn trickle_origin() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = [0u8; 4096];
                let _ = s.read(&mut head).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: 100000\r\n\r\n\xFF")
                    .await;
                for _ in 0..60 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if s.write_all(b"\xD8").await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    format!("http://127.0.0.2:{port}/slow.jpg")
}

/// Runs the `kartei` command line on the embedded store: exit code and stderr.
fn kartei(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kartei"))
        .args(args)
        .env_remove("KARTEI_CASSANDRA")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
