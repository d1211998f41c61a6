//! Batch commands against a server on another machine (issue 35): `--server
//! URL` with a token runs the job over the HTTP API, on both engines, with
//! the roles of the command line and a bound on the input.

use std::path::Path;
use std::process::Output;

use serde_json::json;

use super::{
    PORTAL, Server, Target, drop_keyspaces, kartei, own_keyspaces, post, token, vocabulary_file,
};
use crate::support::run;

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `kartei ARGS --server URL` with `token` (in KARTEI_TOKEN, as operators
/// give it); the store flags of `target` are there and unused.
fn remote(args: &[&str], target: &Target, url: &str, token: Option<&str>) -> Output {
    let mut c = kartei(args, target);
    c.args(["--server", url]).env_remove("KARTEI_TOKEN");
    if let Some(t) = token {
        c.env("KARTEI_TOKEN", t);
    }
    c.output().unwrap()
}

fn story(dir: &Path, target: &Target) {
    let server = Server::start_with(target, &["--max-job-input-bytes", "100000"]);
    let url = server.url.clone();
    let machine = token("importer", &["machine"]);
    let admin = token("ada", &["admin"]);
    let contributor = token("carla", &["contributor"]);
    let vocabulary = vocabulary_file(dir, 40);
    let file = vocabulary.to_str().unwrap();

    let out = remote(&["import-vocabulary", file], target, &url, Some(&machine));
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("imported 49 records"), "{}", said(&out));
    let portals = run(post(
        &reqwest::Client::new(),
        &url,
        &admin,
        "{ portals { id } }",
        json!({}),
    ))
    .expect("the server answers");
    assert!(portals.to_string().contains(PORTAL), "{portals}");

    // Refusals say which and what to do; nothing runs.
    for (who, code, hint) in [
        (None, "UNAUTHENTICATED", "KARTEI_TOKEN"),
        (Some(contributor.as_str()), "FORBIDDEN", "admin or machine"),
    ] {
        let out = remote(&["import-vocabulary", file], target, &url, who);
        assert_eq!(out.status.code(), Some(2), "{}", said(&out));
        assert!(said(&out).contains(code), "{}", said(&out));
        assert!(said(&out).contains(hint), "{}", said(&out));
    }
    // Maintenance is the admin's.
    let out = remote(&["repair-views", "--check"], target, &url, Some(&machine));
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("FORBIDDEN"), "{}", said(&out));
    let out = remote(&["repair-views", "--check"], target, &url, Some(&admin));
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("0 differences"), "{}", said(&out));

    // A file past --max-job-input-bytes is refused before it is sent.
    let big = dir.join("big.ndjson");
    let lines: Vec<String> = (1..=2_000)
        .map(|p| crate::suggestions::line(p, &format!("Gross {p}.jpg"), 0.7))
        .collect();
    std::fs::write(&big, lines.join("\n")).unwrap();
    let out = remote(
        &[
            "import-suggestions",
            "--wiki",
            "frwiki",
            big.to_str().unwrap(),
        ],
        target,
        &url,
        Some(&machine),
    );
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("JOB_INPUT_TOO_LARGE"), "{}", said(&out));
    assert!(
        said(&out).contains("--max-job-input-bytes"),
        "{}",
        said(&out)
    );
    // The same from standard input (its size unknown until it arrives):
    // refused where the limit is passed, and the command reads the refusal.
    let mut piped = super::kartei(
        &[
            "import-suggestions",
            "--wiki",
            "frwiki",
            "-",
            "--server",
            &url,
        ],
        target,
    )
    .env("KARTEI_TOKEN", &machine)
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    {
        use std::io::Write;
        let mut stdin = piped.stdin.take().unwrap();
        let _ = stdin.write_all(&std::fs::read(&big).unwrap());
    }
    let out = piped.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("JOB_INPUT_TOO_LARGE"), "{}", said(&out));
    let out = remote(
        &["suggestions", "list", "--wiki", "frwiki"],
        target,
        &url,
        Some(&machine),
    );
    assert!(out.status.success(), "{}", said(&out));
    assert!(!said(&out).contains("(current)"), "{}", said(&out));

    // Each job is recorded under the token's subject; a refused one is not.
    let jobs = super::listed_jobs(&reqwest::Client::new(), &url, &admin);
    let by = |kind: &str, who: &str| {
        jobs.iter()
            .find(|j| j["kind"] == kind && j["startedBy"] == who)
            .unwrap_or_else(|| panic!("no {kind} by {who} in {jobs:#?}"))
            .clone()
    };
    assert_eq!(by("import-vocabulary", "importer")["state"], "DONE");
    assert_eq!(by("repair-views", "ada")["state"], "DONE");
    // Refused at the door (the token, the role, a file's size past the
    // limit): no job, nothing recorded. Standard input refused on the way
    // is one job, FAILED, that says why.
    assert!(!jobs.iter().any(|j| j["startedBy"] == "carla"), "{jobs:#?}");
    let imports: Vec<_> = jobs
        .iter()
        .filter(|j| j["kind"] == "import-suggestions")
        .collect();
    assert_eq!(imports.len(), 1, "{jobs:#?}");
    assert_eq!(imports[0]["input"], "stdin", "{jobs:#?}");
    assert_eq!(imports[0]["state"], "FAILED", "{jobs:#?}");
    assert!(
        imports[0]["result"][0]
            .as_str()
            .unwrap()
            .contains("--max-job-input-bytes"),
        "{jobs:#?}"
    );
    server.stop();
}

#[test]
fn embedded_batch_commands_run_on_a_server_over_http() {
    let dir = tempfile::tempdir().unwrap();
    story(dir.path(), &Target::Dir(dir.path().join("data")));
}

#[test]
fn cassandra_batch_commands_run_on_a_server_over_http() {
    if crate::support::cassandra_off() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (set, target) = run(own_keyspaces());
    story(dir.path(), &target);
    run(drop_keyspaces(&set));
}
