//! An upload and a garbage collection killed at random points leave whole
//! binaries.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kartei::store::{DynStore, Scan, Table};
use serde_json::{Value, json};

use super::{
    Rng, Server, Target, drop_keyspaces, finish, kill_after, open_dir, own_keyspaces, post, seeds,
    token,
};
use crate::support::run;

/// A JPEG padded to `bytes` (trailing bytes after the image: several chunks).
fn padded_jpeg(w: u32, h: u32, bytes: usize) -> Vec<u8> {
    let mut f = crate::binaries::jpeg(w, h);
    f.resize(bytes.max(f.len()), 0);
    f
}

/// POSTs an upload over a raw connection, `piece` bytes every 5 ms (so that a
/// kill can land in the middle of it); the answer's JSON, or `None` when the
/// connection broke.
async fn slow_upload(url: &str, context: &str, file: &[u8], piece: usize) -> Option<Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let boundary = "kartei-fault-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"context\"\r\n\r\n{context}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    let head = format!(
        "POST /binaries/upload HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        token("uploader", &["machine"]),
        body.len()
    );
    s.write_all(head.as_bytes()).await.ok()?;
    for c in body.chunks(piece) {
        s.write_all(c).await.ok()?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.ok()?;
    let text = String::from_utf8_lossy(&answer);
    let (_, json) = text.split_once("\r\n\r\n")?;
    serde_json::from_str(json.trim()).ok()
}

/// Polls a reference until its original is OK (or fails the test).
async fn settled_ok(http: &reqwest::Client, url: &str, reference: &str) {
    let tok = token("reader", &["admin"]);
    let mut last = Value::Null;
    for _ in 0..600 {
        let r = post(
            http,
            url,
            &tok,
            "query($r: ID!) { binary(referenceId: $r) { status error } }",
            json!({"r": reference}),
        )
        .await
        .expect("answer");
        last = r.clone();
        match r["data"]["binary"]["status"].as_str() {
            Some("OK") => return,
            Some("PROCESSING") | None => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => panic!("{reference} did not become OK: {r}"),
        }
    }
    panic!("{reference} never became OK: {last}");
}

/// What must hold of the binaries' tables at rest: every chunk and every
/// derivative belongs to an original; an original that is OK has exactly its
/// chunks and its four derivatives; nothing else is left but what `allowed`
/// names (originals in work, if any).
async fn binaries_whole(store: &DynStore, seed: u64) -> BTreeMap<String, String> {
    use kartei::domains::binaries::model as b;
    let all = |t: &'static Table| {
        let store = store.clone();
        async move {
            let mut rows = Vec::new();
            let mut after = None;
            loop {
                let page = store
                    .scan(
                        t,
                        Scan {
                            after,
                            limit: 1_000,
                        },
                    )
                    .await
                    .expect("scan");
                rows.extend(page.rows);
                match page.next {
                    Some(n) => after = Some(n),
                    None => return rows,
                }
            }
        }
    };
    let originals: BTreeMap<String, (String, i32)> = all(&b::ORIGINALS)
        .await
        .iter()
        .map(|r| {
            (
                r.string("original_id"),
                (r.string("status"), r.int("parts").unwrap_or(0)),
            )
        })
        .collect();
    let mut chunks: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for r in all(&b::ORIGINALS_DATA).await {
        let id = r.string("original_id");
        assert!(
            originals.contains_key(&id),
            "seed {seed}: a chunk of {id}, which is gone"
        );
        chunks.entry(id).or_default().insert(r.int("part").unwrap());
    }
    for (_, _, t) in &b::DERIVATIVES {
        for r in all(t).await {
            let id = r.string("original_id");
            // OK, or DELETING: a collection killed half-way, which the next one finishes.
            assert!(
                originals
                    .get(&id)
                    .is_some_and(|(s, _)| s == "OK" || s == "DELETING"),
                "seed {seed}: a derivative in {} of {id}, which is neither OK nor being deleted: {:?}",
                t.name,
                originals.get(&id)
            );
        }
    }
    for (id, (status, parts)) in &originals {
        // An upload killed before it was complete: nothing points to it, and
        // the collector takes it once its lease is over.
        if status == "OK" {
            let want: BTreeSet<i32> = (0..*parts).collect();
            assert_eq!(
                chunks.get(id),
                Some(&want),
                "seed {seed}: the chunks of {id}"
            );
            for (_, _, t) in &b::DERIVATIVES {
                assert!(
                    store.get(t, &[id.as_str().into()]).await.unwrap().is_some(),
                    "seed {seed}: {id} is OK without its {}",
                    t.name
                );
            }
        }
    }
    originals.into_iter().map(|(id, (s, _))| (id, s)).collect()
}

/// A server SIGKILLed while an upload streams in (or while it is scaled),
/// the client's upload again on a restarted server, a deleted reference, a
/// garbage collection SIGKILLed at a random point and run again, and, two
/// hours later (the killed upload's lease), one more: at every rest point
/// the binaries are whole, and in the end only the live image is left.
///
/// `open` opens the target's store in the test (the embedded file only while
/// no process has it). Servers hold a scaling claim for 2 s (`--scale-lease`),
/// so on Cassandra, where a dead process's claim is not freed at start-up
/// (another instance may hold it), the restarted server takes it over soon.
async fn upload_and_gc_killed(target: Target, open: &dyn Fn() -> DynStore, seed: u64) {
    let mut rng = Rng(seed);
    const LEASE: &[&str] = &["--scale-lease", "2s"];
    let keep = padded_jpeg(640, 480, 5 << 20);
    let drop_me = padded_jpeg(800, 600, 2 << 20);
    let http = reqwest::Client::new();

    let server = Server::start_with(&target, LEASE);
    let first = slow_upload(&server.url, "fault-a", &drop_me, 1 << 20)
        .await
        .expect("the first upload");
    let dropped = first["referenceId"].as_str().unwrap().to_owned();
    settled_ok(&http, &server.url, &dropped).await;
    let url = server.url.clone();
    let keep2 = keep.clone();
    let upload = tokio::spawn(async move { slow_upload(&url, "fault-b", &keep2, 64 << 10).await });
    let at = Duration::from_millis(rng.between(20, 900));
    tokio::time::sleep(at).await;
    server.kill();
    let answered = upload.await.unwrap().is_some();

    let server = Server::start_with(&target, LEASE);
    let again = slow_upload(&server.url, "fault-b", &keep, 1 << 20)
        .await
        .expect("the upload again");
    let kept = again["referenceId"].as_str().unwrap().to_owned();
    settled_ok(&http, &server.url, &kept).await;
    let r = post(
        &http,
        &server.url,
        &token("admin", &["admin"]),
        "mutation($r: ID!) { deleteBinary(referenceId: $r) }",
        json!({"r": dropped}),
    )
    .await
    .unwrap();
    assert!(r["errors"].is_null(), "{r}");
    server.stop();
    binaries_whole(&open(), seed).await;

    let gc_at = Duration::from_millis(rng.between(2, 120));
    let killed = kill_after(&["gc-binaries", "--gc-grace", "0"], &target, gc_at);
    binaries_whole(&open(), seed).await;
    finish(&["gc-binaries", "--gc-grace", "0"], &target);
    eprintln!(
        "seed {seed}: server killed at {} ms of the upload ({}); gc {} at {} ms",
        at.as_millis(),
        if answered {
            "it had been answered"
        } else {
            "unanswered"
        },
        if killed {
            "killed"
        } else {
            "finished before the kill"
        },
        gc_at.as_millis()
    );

    // Two hours on, the killed upload's lease has run out: collected too.
    let store = open();
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(2);
    let binaries =
        crate::support::binaries_at(&store, kartei::kernel::Clock::from_fn(move || later));
    binaries.collect_garbage().await.expect("collect");
    let left = binaries_whole(&store, seed).await;
    assert_eq!(
        left.values().collect::<Vec<_>>(),
        vec!["OK"],
        "seed {seed}: only the live image is left: {left:?}"
    );
}

#[test]
fn an_upload_and_a_collection_killed_at_random_points_leave_whole_binaries() {
    run(async {
        for seed in seeds(3) {
            let base = tempfile::tempdir().unwrap();
            let dir = base.path().join("data");
            let open = || open_dir(&dir);
            upload_and_gc_killed(Target::Dir(dir.clone()), &open, seed).await;
        }
    });
}

#[test]
fn cassandra_an_upload_and_a_collection_killed_at_random_points_leave_whole_binaries() {
    if crate::support::cassandra_off() {
        return;
    }
    run(async {
        // Keyspaces of its own: the end state is "only the live image left",
        // which other tests' binaries on the shared keyspaces would spoil.
        let (set, target) = own_keyspaces().await;
        let open = || -> DynStore { set.clone() };
        for seed in seeds(1) {
            upload_and_gc_killed(target.clone(), &open, seed).await;
        }
        drop_keyspaces(&set).await;
    });
}
