//! The command line as users call it: exit codes and messages.

use std::process::Command;

/// The binary, without the settings of the environment the tests run in.
pub(crate) fn kartei() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kartei"));
    c.env_remove("KARTEI_CASSANDRA")
        .env_remove("KARTEI_DATA_DIR")
        .env_remove("KARTEI_AUTH_SECRET")
        .env_remove("KARTEI_DEMO");
    c
}

#[test]
fn contradictory_or_missing_flags_exit_with_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["serve", "--data-dir", d, "--cassandra", "127.0.0.1:9042"],
        vec!["serve", "--env", "Bad-Name"],
        vec!["token", "--sub", "x"],
        vec![
            "token",
            "--sub",
            "x",
            "--roles",
            "wizard",
            "--auth-secret",
            "0123456789abcdef0123456789abcdef",
        ],
        vec![
            "import-vocabulary",
            "/does/not/exist.ndjson",
            "--data-dir",
            d,
        ],
        vec!["serve", "--demo", "--cassandra", "127.0.0.1:1"],
    ] {
        let out = kartei().args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn token_mints_a_verifiable_jwt() {
    let out = kartei()
        .args([
            "token",
            "--sub",
            "anna",
            "--roles",
            "editor,admin",
            "--auth-secret",
            "0123456789abcdef0123456789abcdef",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap();
    let auth = kartei::edge::auth::Auth::hs256(b"0123456789abcdef0123456789abcdef").unwrap();
    let p = auth
        .principal(Some(&format!("Bearer {}", token.trim())))
        .unwrap();
    assert_eq!(p.sub.as_deref(), Some("anna"));
    assert!(p.has(kartei::kernel::roles::Role::Editor));
}

#[test]
fn import_vocabulary_reports_bad_lines_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/vocabulary-sample.ndjson"
    );
    let out = kartei()
        .args([
            "import-vocabulary",
            file,
            "--data-dir",
            dir.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for line in [":18:", ":31:", ":58:"] {
        assert!(err.contains(line), "{line} in {err}");
    }
    assert!(err.contains("imported 79 records"), "{err}");
    assert!(err.contains("3 errors") && err.contains("rows/s"), "{err}");
}

#[test]
fn schema_prints_the_sdl() {
    let out = kartei().arg("schema").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        kartei::api::schema::sdl()
    );
}

#[test]
fn import_assignments_and_repair_views_exit_codes() {
    use kartei::domains::assignments::model::OBJECTS_KEYWORDS_STATUS;
    use kartei::store::{Mutation, Store, Value, buckets::bucket_of};

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let vocabulary = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/vocabulary.ndjson");
    let out = kartei()
        .args(["import-vocabulary", vocabulary, "--data-dir", d])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut lines: Vec<String> = (0..25)
        .map(|i| format!(r#"{{"portalId":"c-wr","ddbId":"DDB{i:04}","keywordId":"k-0131","childCategoryId":"c-wr-orte","confidence":0.75}}"#))
        .collect();
    lines.insert(3, r#"{"portalId":"c-wr","ddbId":"DDBX","keywordId":"k-0131","childCategoryId":"c-wr-orte","confidence":2}"#.into());
    lines.insert(9, r#"{"portalId":"c-wr","ddbId":"DDBY"}"#.into());
    let file = dir.path().join("suggestions.ndjson");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let import = || {
        kartei()
            .args([
                "import-assignments",
                file.to_str().unwrap(),
                "--creator",
                "ingest-bot",
                "--data-dir",
                d,
            ])
            .output()
            .unwrap()
    };
    let out = import();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("suggestions.ndjson:4: confidence must be between 0 and 1"),
        "{err}"
    );
    assert!(
        err.contains("suggestions.ndjson:10: invalid record"),
        "{err}"
    );
    assert!(
        err.contains("25 assignments created, 0 already present, 2 errors"),
        "{err}"
    );
    assert!(err.contains("rows/s"), "{err}");
    let err = String::from_utf8_lossy(&import().stderr).into_owned();
    assert!(
        err.contains("0 assignments created, 25 already present"),
        "{err}"
    );

    let repair = |args: &[&str]| {
        let out = kartei()
            .arg("repair-views")
            .args(args)
            .args(["--data-dir", d])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (status, text) = repair(&["--check"]);
    assert_eq!(status, Some(0), "{text}");
    assert!(
        text.contains("25 assignments checked, 0 differences"),
        "{text}"
    );

    // Lose one query row behind the server's back.
    crate::support::run(async {
        let store = kartei::store::embedded::EmbeddedStore::open(dir.path()).unwrap();
        let key: Vec<Value> = vec![
            "c-wr".into(),
            bucket_of("DDB0007").into(),
            "AUTOSUGGESTED".into(),
            "DDB0007".into(),
            "k-0131".into(),
            "ingest-bot".into(),
        ];
        store
            .apply(vec![Mutation::delete(&OBJECTS_KEYWORDS_STATUS, key)])
            .await
            .unwrap();
    });
    let (status, text) = repair(&["--check"]);
    assert_eq!(status, Some(1), "{text}");
    assert!(
        text.contains("objects_keywords_status: 1 missing, 0 different, 0 stale"),
        "{text}"
    );
    let (status, text) = repair(&["--portal", "c-wr"]);
    assert_eq!(status, Some(0), "{text}");
    assert!(text.contains("(repaired)"), "{text}");
    let (status, text) = repair(&["--check"]);
    assert_eq!(status, Some(0), "{text}");
}

/// Issue 35: no command prints a storage library's message. An unreachable
/// cluster is one sentence that says what to check.
#[test]
fn an_unreachable_cluster_is_one_sentence_without_the_driver_s_words() {
    let out = kartei()
        .env_remove("KARTEI_LOG")
        .args(["repair-views", "--check", "--cassandra", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.starts_with("error: cannot reach the Cassandra cluster at 127.0.0.1:1"),
        "{said}"
    );
    for driver in ["pool", "ConnectionPoolError", "metadata", "scylla"] {
        assert!(!said.contains(driver), "{said}");
    }
}

/// Issue 35: a token never goes over plain http to another machine unless
/// the operator says the network is theirs; to this machine it may.
#[test]
fn a_token_is_not_sent_over_plain_http_to_another_machine() {
    let out = kartei()
        .args(["repair-views", "--check", "--server", "http://192.0.2.1:9"])
        .env("KARTEI_TOKEN", "secret-token")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("plain http to another machine"), "{said}");
    assert!(said.contains("--insecure-http"), "{said}");
    assert!(!said.contains("secret-token"), "{said}");
    // To this machine no flag is needed (nothing listens there: it fails
    // to connect, for another reason).
    let out = kartei()
        .args(["repair-views", "--check", "--server", "http://127.0.0.1:1"])
        .env("KARTEI_TOKEN", "secret-token")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!said.contains("plain http"), "{said}");
}
