//! Batch commands beside a live server on the embedded store (issue 35):
//! each hands its job to the server that holds the data directory and ends
//! as it would have alone; Ctrl-C makes nothing current; what cannot run
//! beside a server (compact, a second server) says so and names the server.

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::json;

use super::{PORTAL, Server, Target, kartei, listed_jobs, post, run_job, token, vocabulary_file};
use crate::support::run;

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `n` image suggestions for pages `1..=n` of a wiki, gzipped.
fn suggestions_gz(path: &std::path::Path, n: i32, bad_line_at: Option<i32>) {
    let file = std::fs::File::create(path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    for page in 1..=n {
        if Some(page) == bad_line_at {
            writeln!(gz, "{{not json").unwrap();
            continue;
        }
        writeln!(
            gz,
            "{}",
            crate::suggestions::line(page, &format!("Bild {page}.jpg"), 0.8)
        )
        .unwrap();
    }
    gz.finish().unwrap();
}

/// Runs a command to its end; what it said, or a panic unless it exits 0.
fn ok(args: &[&str], target: &Target) -> String {
    let out = kartei(args, target).output().unwrap();
    assert!(out.status.success(), "kartei {args:?}: {}", said(&out));
    said(&out)
}

fn current_dataset(target: &Target, wiki: &str) -> Option<String> {
    let out = kartei(&["suggestions", "list", "--wiki", wiki], target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("(current)"))
        .map(|l| l.to_owned())
}

/// An `import-suggestions` from standard input that has sent `lines` lines
/// and waits for more: the command, and its input to end or drop.
fn import_without_end(
    target: &Target,
    lines: i32,
) -> (std::process::Child, std::process::ChildStdin) {
    let mut slow = kartei(&["import-suggestions", "--wiki", "dewiki", "-"], target)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = slow.stdin.take().unwrap();
    for page in 1..=lines {
        writeln!(stdin, "{}", crate::suggestions::line(page, "Neu.jpg", 0.5)).unwrap();
    }
    stdin.flush().unwrap();
    (slow, stdin)
}

#[test]
fn batch_commands_hand_their_jobs_to_the_server_that_holds_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::Dir(dir.path().join("data"));
    let server = Server::start(&target);
    let pid = server.child.id().to_string();

    // The vocabulary: handed over, imported by the server, readable at once.
    let vocabulary = vocabulary_file(dir.path(), 40);
    let out = ok(
        &["import-vocabulary", vocabulary.to_str().unwrap()],
        &target,
    );
    assert!(out.contains("handed to the server that holds"), "{out}");
    assert!(out.contains(&format!("pid {pid}")), "{out}");
    assert!(out.contains("imported 49 records"), "{out}");
    let http = reqwest::Client::new();
    let editor = token("erika", &["editor"]);
    let portals = run(post(
        &http,
        &server.url,
        &editor,
        "{ portals { id } }",
        json!({}),
    ))
    .expect("the server answers");
    assert_eq!(portals["data"]["portals"][0]["id"], PORTAL, "{portals}");

    // Objects: handed over too, their context readable at once.
    let objects = dir.path().join("objects.ndjson");
    std::fs::write(
        &objects,
        "{\"ddbId\": \"OBJ1\", \"title\": \"Ein Krug\", \"institution\": \"Museum\"}\n",
    )
    .unwrap();
    let out = ok(&["import-objects", objects.to_str().unwrap()], &target);
    assert!(out.contains("handed to the server that holds"), "{out}");
    assert!(out.contains("1 objects created"), "{out}");
    let object = run(post(
        &http,
        &server.url,
        &editor,
        "{ catalogueObject(ddbId: \"OBJ1\") { title institution } }",
        json!({}),
    ))
    .expect("the server answers");
    assert_eq!(
        object["data"]["catalogueObject"],
        json!({"title": "Ein Krug", "institution": "Museum"})
    );

    // Bad lines: line-numbered, under the name the operator typed, exit 1.
    let bad = dir.path().join("bad.ndjson");
    std::fs::write(&bad, "{\"type\": \"category\"}\nnot json\n").unwrap();
    let out = kartei(&["import-vocabulary", bad.to_str().unwrap()], &target)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains(&format!("{}:2: ", bad.display())),
        "{}",
        said(&out)
    );

    // A gzipped dataset switches in whole while the server serves.
    let first = dir.path().join("first.ndjson.gz");
    suggestions_gz(&first, 3_000, None);
    let out = kartei(
        &[
            "import-suggestions",
            "--wiki",
            "dewiki",
            first.to_str().unwrap(),
        ],
        &target,
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let current = current_dataset(&target, "dewiki").expect("a current dataset");
    assert!(current.contains("COMPLETE\t3000\t0"), "{current}");
    assert!(current.ends_with("first.ndjson.gz"), "{current}");

    // One bad line with --max-errors 0: not published, exit 1, the first
    // dataset stays current.
    let broken = dir.path().join("broken.ndjson.gz");
    suggestions_gz(&broken, 500, Some(250));
    let out = kartei(
        &[
            "import-suggestions",
            "--wiki",
            "dewiki",
            broken.to_str().unwrap(),
        ],
        &target,
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains(":250: "), "{}", said(&out));
    assert_eq!(current_dataset(&target, "dewiki").as_ref(), Some(&current));

    // Ctrl-C while the input still arrives: the server stops the job, and
    // no new dataset becomes current.
    let (slow, stdin) = import_without_end(&target, 20);
    // Once the server spools the input, the command waits for Ctrl-C.
    let spool = dir.path().join("data").join("jobs");
    let waited = std::time::Instant::now();
    while std::fs::read_dir(&spool).unwrap().count() == 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "the input never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The running job is listed, and an editor can follow it to its end.
    let running = run_job(&http, &server.url, &editor, "import-suggestions", "RUNNING");
    assert!(
        running["startedBy"].as_str().unwrap().starts_with("local:"),
        "{running}"
    );
    assert_eq!(running["input"], "stdin", "{running}");
    let (mut ws, acked) = run(crate::live::connect(&server.url, Some(&editor)));
    assert!(acked);
    run(crate::live::subscribe(
        &mut ws,
        "p",
        "subscription($id: ID!) { jobProgress(id: $id) { state bytesRead } }",
        json!({"id": running["id"]}),
    ));
    let first = run(crate::live::next_message(&mut ws)).expect("the job as it is");
    assert_eq!(
        first["payload"]["data"]["jobProgress"]["state"], "RUNNING",
        "{first}"
    );
    let status = std::process::Command::new("kill")
        .args(["-INT", &slow.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    drop(stdin);
    let out = slow.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", said(&out));
    assert!(said(&out).contains("cancelled"), "{}", said(&out));
    // The subscription's last item is how the job ended; then it completes.
    let mut last = first;
    loop {
        let m = run(crate::live::next_message(&mut ws)).expect("the job until it ends");
        if m["type"] == "complete" {
            break;
        }
        assert_eq!(m["type"], "next", "{m}");
        last = m;
    }
    assert_eq!(
        last["payload"]["data"]["jobProgress"]["state"], "CANCELLED",
        "{last}"
    );
    assert_eq!(current_dataset(&target, "dewiki").as_ref(), Some(&current));
    assert_eq!(
        std::fs::read_dir(dir.path().join("data").join("jobs"))
            .unwrap()
            .count(),
        0,
        "a stopped job's spooled input is removed"
    );

    // Maintenance beside the server.
    let out = kartei(&["repair-views", "--check"], &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("0 differences"), "{}", said(&out));

    // What cannot run beside it says so, naming the server.
    let data = dir.path().join("data");
    let out = std::process::Command::new(super::BIN)
        .args(["compact", "--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains(&format!("pid {pid}")), "{}", said(&out));
    assert!(said(&out).contains("stop that server"), "{}", said(&out));
    let out = kartei(&["serve", "--listen", "127.0.0.1:0"], &target)
        .args(["--auth-secret", super::SECRET])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let address = server.url.trim_start_matches("http://");
    assert!(
        said(&out).contains(&format!("pid {pid}, http://{address}")),
        "{}",
        said(&out)
    );
    assert!(
        !said(&out).contains("Database already open"),
        "{}",
        said(&out)
    );

    // Every job it ran is counted by kind and outcome, none still running.
    let metrics = run(async {
        reqwest::get(format!("{}/metrics", server.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    for counted in [
        r#"kartei_jobs_ended_total{kind="import-vocabulary",outcome="done"} 1"#,
        r#"kartei_jobs_ended_total{kind="import-vocabulary",outcome="failed"} 1"#,
        r#"kartei_jobs_ended_total{kind="import-suggestions",outcome="done"} 1"#,
        r#"kartei_jobs_ended_total{kind="import-suggestions",outcome="failed"} 1"#,
        r#"kartei_jobs_ended_total{kind="repair-views",outcome="done"} 1"#,
        r#"kartei_jobs_running{kind="import-suggestions"} 0"#,
    ] {
        assert!(metrics.contains(counted), "{counted} in\n{metrics}");
    }

    // Every job is recorded: who ran it, its input, how far it read, its
    // bad lines and how it ended, newest first; for editors only.
    let jobs = listed_jobs(&http, &server.url, &editor);
    assert_eq!(jobs[0]["kind"], "repair-views", "{jobs:#?}");
    assert_eq!(jobs[0]["state"], "DONE");
    assert!(
        jobs[0]["result"][0]
            .as_str()
            .unwrap()
            .contains("0 differences"),
        "{jobs:#?}"
    );
    let find = |kind: &str, state: &str| {
        jobs.iter()
            .find(|j| j["kind"] == kind && j["state"] == state)
            .unwrap_or_else(|| panic!("no {state} {kind} in {jobs:#?}"))
            .clone()
    };
    let switched = find("import-suggestions", "DONE");
    assert!(
        switched["input"]
            .as_str()
            .unwrap()
            .ends_with("first.ndjson.gz"),
        "{switched}"
    );
    assert_eq!(switched["progress"], 1.0, "{switched}");
    assert_eq!(switched["errorCount"], 0.0, "{switched}");
    assert_eq!(switched["exitCode"], 0, "{switched}");
    let refused = find("import-suggestions", "FAILED");
    assert_eq!(refused["exitCode"], 1, "{refused}");
    assert!(
        refused["errors"][0].as_str().unwrap().contains(":250: "),
        "{refused}"
    );
    find("import-suggestions", "CANCELLED");
    let bad = find("import-vocabulary", "FAILED");
    assert_eq!(bad["errorCount"], 2.0, "{bad}");
    assert!(
        bad["errors"][1]
            .as_str()
            .unwrap()
            .contains("bad.ndjson:2: "),
        "{bad}"
    );
    let good = find("import-vocabulary", "DONE");
    assert!(
        good["result"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("imported 49 records")),
        "{good}"
    );
    assert!(
        jobs.iter()
            .all(|j| j["startedBy"].as_str().unwrap().starts_with("local:")),
        "{jobs:#?}"
    );
    let anonymous = run(http
        .post(format!("{}/graphql", server.url))
        .json(&json!({"query": "{ jobs { id } }"}))
        .send())
    .unwrap();
    let anonymous: serde_json::Value = run(anonymous.json()).unwrap();
    assert_eq!(
        anonymous["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
        "{anonymous}"
    );

    // Stopped, the server takes its socket and its name away; the same
    // command then runs on its own.
    server.stop();
    assert!(!data.join("kartei.server").exists());
    assert!(!data.join("kartei.sock").exists());
    let out = ok(&["repair-views", "--check"], &target);
    assert!(!out.contains("handed to"), "{out}");
}

#[test]
fn a_server_killed_outright_leaves_no_claim_on_its_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::Dir(dir.path().join("data"));
    let server = Server::start(&target);
    let data = dir.path().join("data");
    assert!(data.join("kartei.server").exists());
    // A job runs in it when it dies.
    let (slow, stdin) = import_without_end(&target, 1);
    let http = reqwest::Client::new();
    let admin = token("root", &["admin"]);
    run_job(&http, &server.url, &admin, "import-suggestions", "RUNNING");
    server.kill();
    drop(stdin);
    let out = slow.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", said(&out));
    // Its file names a process that is gone: commands run alone, and a new
    // server starts and takes the directory over.
    let out = ok(&["repair-views", "--check"], &target);
    assert!(!out.contains("handed to"), "{out}");
    let again = Server::start(&target);
    let vocabulary = vocabulary_file(dir.path(), 5);
    let out = ok(
        &["import-vocabulary", vocabulary.to_str().unwrap()],
        &target,
    );
    assert!(out.contains(&format!("pid {}", again.child.id())), "{out}");
    // The new server marked the job its predecessor died in as interrupted,
    // never done.
    let interrupted = run_job(
        &http,
        &again.url,
        &admin,
        "import-suggestions",
        "INTERRUPTED",
    );
    assert!(interrupted["exitCode"].is_null(), "{interrupted}");
    again.stop();
}
