//! A full disk under the embedded store; a data directory that cannot be used.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;

use super::{
    BIN, PORTAL, SECRET, SUGGEST, Server, Target, assignments_file, child, dump, finish, kartei,
    open_dir, post, statuses, token, vocabulary_file,
};
use crate::support::run;

/// A tmpfs of `mb` MiB mounted on a fresh directory, unmounted on drop.
/// `None` where mounting is not allowed (not root): the test says so and skips.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(mb: u32) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs here (needs root); the full-disk test did not run"
            );
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn remount(&self, opts: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(self.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount {opts}");
    }

    /// Fills the file system with 64 KiB ballast files, then frees `keep_kb` KiB.
    fn fill(&self, keep_kb: usize) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let block = vec![7u8; 64 << 10];
        for i in 0.. {
            let p = self.path().join(format!("ballast-{i}"));
            match std::fs::write(&p, &block) {
                Ok(()) => files.push(p),
                Err(_) => {
                    let _ = std::fs::remove_file(&p);
                    break;
                }
            }
        }
        for _ in 0..keep_kb.div_ceil(64) {
            if let Some(p) = files.pop() {
                std::fs::remove_file(p).unwrap();
            }
        }
        files
    }
}
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn a_full_disk_refuses_writes_with_a_code_keeps_reads_and_recovers() {
    let Some(fs) = Tmpfs::mount(24) else { return };
    let data = fs.path().join("data");
    let target = Target::Dir(data.clone());
    let work = tempfile::tempdir().unwrap();
    finish(
        &[
            "import-vocabulary",
            vocabulary_file(work.path(), 200).to_str().unwrap(),
        ],
        &target,
    );
    run(async {
        let server = Server::start(&target);
        let http = reqwest::Client::new();
        let tok = token("filler", &["editor"]);
        let ballast = fs.fill(256);
        // Suggestions until the disk is full: every refusal is STORAGE_FULL
        // (a refused commit's pages are free again, so a smaller write may
        // still fit: stop after three refusals in a row).
        let mut acked = 0usize;
        let mut refused = 0usize;
        let mut in_a_row = 0;
        for i in 0..200_000usize {
            let k = i % 200;
            let input = json!({"portalId": PORTAL, "ddbId": format!("FULL-{i:07}"),
                               "keywordId": format!("kf-{k:05}"), "childCategoryId": child(k)});
            let r = post(&http, &server.url, &tok, SUGGEST, json!({"i": input}))
                .await
                .expect("the server answers on a full disk");
            if r["data"]["suggestAssignment"].is_object() {
                acked += 1;
                in_a_row = 0;
            } else {
                assert_eq!(r["errors"][0]["extensions"]["code"], "STORAGE_FULL", "{r}");
                refused += 1;
                in_a_row += 1;
                if in_a_row == 3 {
                    eprintln!(
                        "disk full after {acked} suggestions ({refused} refused): {}",
                        r["errors"][0]["message"]
                    );
                    break;
                }
            }
        }
        assert_eq!(in_a_row, 3, "the disk never filled");
        // Reads go on, with every acknowledged row.
        let found = statuses(&http, &server.url).await;
        assert_eq!(found.len(), acked, "reads on a full disk");
        let health = http
            .get(format!("{}/healthz", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        // Space freed: writes succeed again, without a restart.
        for p in &ballast {
            std::fs::remove_file(p).unwrap();
        }
        let r = post(
            &http,
            &server.url,
            &tok,
            SUGGEST,
            json!({"i": {"portalId": PORTAL,
            "ddbId": "FULL-after", "keywordId": "kf-00001", "childCategoryId": child(1)}}),
        )
        .await
        .unwrap();
        assert_eq!(r["data"]["suggestAssignment"]["status"], "SUGGESTED", "{r}");
        server.stop();
        // Nothing corrupted: the store opens, holds every acknowledged row, and its views are in step.
        let store = open_dir(&data);
        let rows = dump(
            &store,
            &[&kartei::domains::assignments::model::OBJECTS_KEYWORDS],
        )
        .await;
        assert_eq!(rows["objects_keywords"].len(), acked + 1);
        drop(store);
        finish(&["repair-views", "--check"], &target);

        // An importer on a full disk: a non-zero exit with a clear message; rerun once freed.
        let ballast = fs.fill(64);
        let file = assignments_file(work.path(), 3_000, 200);
        let out = kartei(
            &[
                "import-assignments",
                file.to_str().unwrap(),
                "--creator",
                "full-machine",
            ],
            &target,
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the import on a full disk succeeded");
        assert!(
            stderr.contains("error: the import stopped at line") && stderr.contains("disk is full"),
            "importer's message: {stderr}"
        );
        for p in &ballast {
            std::fs::remove_file(p).unwrap();
        }
        finish(
            &[
                "import-assignments",
                file.to_str().unwrap(),
                "--creator",
                "full-machine",
            ],
            &target,
        );
        finish(&["repair-views", "--check"], &target);
    });
}

#[test]
fn a_read_only_or_unreadable_data_dir_is_one_sentence_and_exit_2() {
    let Some(fs) = Tmpfs::mount(8) else { return };
    let data = fs.path().join("data");
    let target = Target::Dir(data.clone());
    let work = tempfile::tempdir().unwrap();
    finish(
        &[
            "import-vocabulary",
            vocabulary_file(work.path(), 20).to_str().unwrap(),
        ],
        &target,
    );
    fs.remount("ro");
    for args in [
        vec!["serve", "--listen", "127.0.0.1:0", "--auth-secret", SECRET],
        vec![
            "import-vocabulary",
            work.path()
                .join("vocabulary.ndjson")
                .to_str()
                .unwrap()
                .to_owned()
                .leak(),
        ],
        vec!["repair-views", "--check"],
    ] {
        let out = kartei(&args, &target).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} on a read-only data dir: {stderr}"
        );
        assert!(
            stderr.contains("data directory") && stderr.contains("Read-only file system"),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "one sentence: {stderr}");
    }
    fs.remount("rw");
    // Unreadable for the user the server runs as (root reads everything, so
    // the command runs as nobody, where setpriv is there to make it so).
    std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let setpriv = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BIN,
            "repair-views",
            "--check",
        ])
        .args(target.args())
        .output();
    match setpriv {
        Ok(out)
            if out.status.code() != Some(127)
                && !String::from_utf8_lossy(&out.stderr).contains("setpriv:") =>
        {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "unreadable data dir: {stderr}");
            assert!(stderr.contains("Permission denied"), "{stderr}");
        }
        other => eprintln!("SKIPPED the unreadable case: cannot run as nobody here ({other:?})"),
    }
}
