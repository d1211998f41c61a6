//! Slow clients: requests stop at their deadline, slow heads and stalled
//! readers lose their connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Engine, Faulty, TestApp, run, store, test_limits, uid};

/// D1's other half: a request's work is bounded in time, and dropped when
/// its client goes away. The store here answers every read after 3 s.
#[test]
fn slow_requests_stop_at_their_deadline_and_when_the_client_leaves() {
    use std::sync::atomic::Ordering::SeqCst;
    run(async {
        let faulty = std::sync::OnceLock::new();
        let ts = store(Engine::Embedded).await.wrapped(|inner| {
            let f = Faulty::new(inner);
            let _ = faulty.set(f.clone());
            f as kartei::store::DynStore
        });
        let faulty = faulty.get().unwrap().clone();
        let limits = kartei::kernel::limits::Limits {
            request_timeout: 1,
            ..test_limits()
        };
        let app = TestApp::over(ts).with_limits(limits).build().await;
        *faulty.read_delay.lock().unwrap() = Some(Duration::from_secs(3));

        let started = Instant::now();
        let r = app.gql("{ portals { id } }", json!({}), None).await;
        assert_eq!(r["errors"][0]["extensions"]["code"], "TIMEOUT", "{r}");
        assert!(
            started.elapsed() < Duration::from_millis(2900),
            "stopped at the deadline"
        );
        // The same query sent over a WebSocket (the protocol allows queries
        // there) has the same deadline: it had none.
        let (mut ws, acked) = crate::live::connect(&app.url, None).await;
        assert!(acked);
        let started = Instant::now();
        crate::live::subscribe(&mut ws, "q", "{ portals { id } }", json!({})).await;
        let m = crate::live::next_message(&mut ws).await.expect("an answer");
        assert_eq!(m["type"], "next", "{m}");
        assert_eq!(
            m["payload"]["errors"][0]["extensions"]["code"], "TIMEOUT",
            "{m}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(2900),
            "stopped at the deadline over the socket"
        );
        drop(ws);

        // A client that gives up after 300 ms: its request's reads are dropped too.
        let abandoned = app
            .client
            .post(format!("{}/graphql", app.url))
            .timeout(Duration::from_millis(300))
            .json(&json!({"query": "{ portals { id } }"}))
            .send()
            .await;
        assert!(abandoned.is_err(), "the client gave up");
        tokio::time::sleep(Duration::from_millis(3500)).await;
        let (begun, ended) = (
            faulty.reads_begun.load(SeqCst),
            faulty.reads_ended.load(SeqCst),
        );
        assert!(begun >= 2, "both requests reached the store");
        assert_eq!(ended, 0, "no read of a stopped or abandoned request ran on");
        *faulty.read_delay.lock().unwrap() = None;

        // A body dripped a byte a second (each pause well inside the idle
        // timeout) is refused once its average rate is judged: 408.
        let addr = app.url.trim_start_matches("http://").to_owned();
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(
            b"POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
        )
        .await
        .unwrap();
        let started = Instant::now();
        let mut answer = Vec::new();
        while started.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if s.write_all(b" ").await.is_err() {
                break;
            }
            let mut buf = [0u8; 4096];
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(10), s.read(&mut buf)).await
            {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:.300}");
        assert!(answer.contains("slower than"), "{answer:.300}");
    });
}

/// A client that asks for a large original and stops reading: once the
/// socket buffers are full the server's write waits, and after
/// `--write-timeout` the connection is closed (it held a connection place
/// for as long as the client liked).
#[test]
fn a_client_that_stops_reading_loses_the_connection() {
    run(async {
        let limits = kartei::kernel::limits::Limits {
            write_timeout: 1,
            ..test_limits()
        };
        let app = TestApp::embedded()
            .with_limits(limits)
            .crawling()
            .build()
            .await;
        // 8 MiB: more than the server's send buffer (at most 4 MiB by
        // default on Linux) and the client's small receive buffer hold.
        let mut file = crate::binaries::jpeg(64, 48);
        file.resize(8 << 20, 0);
        let (status, r) = crate::binaries::upload(&app, &format!("stall-{}", uid()), &file).await;
        assert_eq!(status, 201, "{r}");
        let reference = r["referenceId"].as_str().unwrap().to_owned();
        let b = crate::binaries::settled(&app, &reference).await;
        assert_eq!(b["status"], "OK", "{b}");

        let addr: SocketAddr = app.url.trim_start_matches("http://").parse().unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut s = socket.connect(addr).await.unwrap();
        s.write_all(format!("GET /binary/{reference} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        // Not reading for well over the write timeout.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => got += n,
                Err(_) => panic!("the connection stayed open ({got} bytes read)"),
            }
        }
        assert!(
            got < file.len(),
            "the whole original arrived ({got} bytes): the stalled write was not cut off"
        );
        // The server goes on serving others.
        let ok = app
            .client
            .get(format!("{}/binary/{reference}", app.url))
            .header("range", "bytes=0-9")
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 206);
    });
}

/// Slow headers: a client that sends its request head a byte at a time
/// (every pause well inside any per-byte timeout) is cut off once
/// `--header-timeout` has passed since the head began, not kept while
/// bytes keep coming. (The probe held a connection 7.75 s against the
/// default 10 s; measured again here against a 2 s bound.)
#[test]
fn slow_headers_are_cut_off_at_the_header_timeout() {
    run(async {
        let limits = kartei::kernel::limits::Limits {
            header_timeout: 2,
            ..test_limits()
        };
        let app = TestApp::embedded().with_limits(limits).build().await;
        let addr = app.url.trim_start_matches("http://").to_owned();
        let head = format!(
            "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: {}\r\n\r\n",
            "a".repeat(300)
        );
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let started = Instant::now();
        let mut cut = false;
        for b in head.bytes() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if s.write_all(&[b]).await.is_err() {
                cut = true;
                break;
            }
            let mut buf = [0u8; 256];
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await {
                assert!(
                    !matches!(r, Ok(n) if n > 0 && buf.starts_with(b"HTTP/1.1 200")),
                    "served"
                );
                cut = true;
                break;
            }
        }
        // The head takes about 17 s to drip; the bound is 2 s from its start.
        assert!(cut, "the connection outlived the whole head");
        let held = started.elapsed();
        assert!(held < Duration::from_secs(8), "held {held:?}");
    });
}
