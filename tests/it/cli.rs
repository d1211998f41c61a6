//! The command line as users call it: exit codes and messages.

use std::process::Command;

fn kartei() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kartei"));
    c.env_remove("KARTEI_CASSANDRA")
        .env_remove("KARTEI_DATA_DIR")
        .env_remove("KARTEI_AUTH_SECRET");
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
            "0123456789abcdef0123",
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
            "0123456789abcdef0123",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap();
    let auth = kartei::auth::Auth::hs256(b"0123456789abcdef0123");
    let p = auth
        .principal(Some(&format!("Bearer {}", token.trim())))
        .unwrap();
    assert_eq!(p.sub.as_deref(), Some("anna"));
    assert!(p.has(kartei::auth::Role::Editor));
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
        kartei::graphql::sdl()
    );
}
