//! Datasets: published at once, invisible until then, rolled back, and never
//! served when their import failed or was killed.

use kartei::domains::suggestions::model::DatasetState;
use kartei::domains::suggestions::service::{ReadOptions, Suggestions};
use kartei::kernel::roles::{Principal, Role};
use kartei::store::DynStore;
use serde_json::json;

use super::{images, line, machine, rows_of, run_import};
use crate::both_engines;
use crate::support::{Engine, server, uid};

async fn publishing_switches_datasets_at_once(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    assert!(
        images(&s, &wiki, 1).await.is_empty(),
        "nothing before any import"
    );
    let a = run_import(
        &s,
        &wiki,
        vec![
            line(1, "A1.jpg", 0.9),
            line(1, "A2.jpg", 0.5),
            line(2, "A3.jpg", 0.7),
        ],
        0,
        1,
    )
    .await;
    assert!(a.published, "{}", a.summary());
    let a_id = a.dataset.clone().unwrap();
    assert_eq!(
        images(&s, &wiki, 1).await,
        [
            ("A1.jpg".into(), a_id.clone()),
            ("A2.jpg".into(), a_id.clone())
        ]
    );

    // B is written but not published: readers still see only A.
    let b = s.begin(&machine(), &wiki, None).await.unwrap();
    let rec = |l: String| kartei::domains::suggestions::import::parse(&l).unwrap();
    s.write(
        &b,
        vec![rec(line(1, "B1.jpg", 0.8)), rec(line(3, "B3.jpg", 0.6))],
    )
    .await
    .unwrap();
    assert_eq!(images(&s, &wiki, 1).await.len(), 2);
    assert!(images(&s, &wiki, 1).await.iter().all(|(_, d)| *d == a_id));
    assert!(images(&s, &wiki, 3).await.is_empty());
    // One write publishes it: only B from then on; page 2 is not in B.
    s.publish(&b, 2, 0, 1).await.unwrap();
    assert_eq!(
        images(&s, &wiki, 1).await,
        [("B1.jpg".into(), b.id.clone())]
    );
    assert!(images(&s, &wiki, 2).await.is_empty());
    assert_eq!(images(&s, &wiki, 3).await.len(), 1);

    // minConfidence filters.
    let high = s
        .page(
            &wiki,
            1,
            ReadOptions {
                min_confidence: Some(0.85),
                include_reviewed: false,
            },
        )
        .await
        .unwrap();
    assert!(high.is_empty());
}

async fn failed_imports_stay_invisible_and_leave_nothing(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let a = run_import(&s, &wiki, vec![line(1, "A.jpg", 0.9)], 0, 1).await;
    assert!(a.published);
    // Bad lines, each with its number and reason.
    let lines = vec![
        line(1, "B.jpg", 0.9),
        line(2, "B2.jpg", 0.9),
        "{not json".into(),
        line(3, "B3.jpg", 0.4),
        json!({"page_id": 4, "image": "x", "origin_wiki": "w", "confidence": 3}).to_string(),
    ];
    let b = run_import(&s, &wiki, lines.clone(), 0, 1).await;
    assert!(!b.published, "{}", b.summary());
    assert_eq!(
        b.errors.iter().map(|e| e.0).collect::<Vec<_>>(),
        [3, 5],
        "{:?}",
        b.errors
    );
    assert!(b.errors[1].1.contains("confidence"), "{:?}", b.errors);
    let b_id = b.dataset.unwrap();
    assert_eq!(images(&s, &wiki, 1).await[0].0, "A.jpg");
    assert!(images(&s, &wiki, 2).await.is_empty());
    assert_eq!(
        rows_of(&srv.store, &wiki, 1, &b_id).await,
        0,
        "rows removed"
    );
    let state = |id: String| {
        let s = s.clone();
        let wiki = wiki.clone();
        async move {
            s.datasets(&wiki)
                .await
                .unwrap()
                .into_iter()
                .find(|d| d.id == id)
                .unwrap()
                .state
        }
    };
    assert_eq!(state(b_id).await, DatasetState::Purged);
    // With --max-errors 2 the same file is published, without its bad lines.
    let c = run_import(&s, &wiki, lines, 2, 1).await;
    assert!(c.published, "{}", c.summary());
    assert_eq!(c.rows, 3);
    assert_eq!(images(&s, &wiki, 2).await[0].0, "B2.jpg");
}

async fn rollback_and_keep(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let mut ids = Vec::new();
    for name in ["A", "B", "C"] {
        let r = run_import(&s, &wiki, vec![line(1, &format!("{name}.jpg"), 0.9)], 0, 1).await;
        assert!(r.published);
        ids.push(r.dataset.unwrap());
    }
    // keep 1: A is purged, B stays for a rollback.
    let all = s.datasets(&wiki).await.unwrap();
    let state = |id: &str| all.iter().find(|d| d.id == id).unwrap().state;
    assert_eq!(state(&ids[0]), DatasetState::Purged);
    assert_eq!(state(&ids[1]), DatasetState::Complete);
    assert_eq!(rows_of(&srv.store, &wiki, 1, &ids[0]).await, 0);
    let back = s.rollback(&machine(), &wiki).await.unwrap();
    assert_eq!(back.id, ids[1]);
    assert_eq!(images(&s, &wiki, 1).await[0].0, "B.jpg");
    // Nothing complete before B any more.
    let e = s.rollback(&machine(), &wiki).await.unwrap_err();
    assert_eq!(e.code(), "NOT_FOUND");
    // Roles: a contributor may not roll back or import.
    let contributor = Principal::local("c", &[Role::Contributor]);
    assert_eq!(
        s.rollback(&contributor, &wiki).await.unwrap_err().code(),
        "FORBIDDEN"
    );
    assert_eq!(
        s.begin(&contributor, &wiki, None).await.unwrap_err().code(),
        "FORBIDDEN"
    );
}

/// `kartei import-suggestions` killed with SIGKILL half-way: readers keep the
/// previous dataset; the next import purges the orphan and publishes.
async fn a_killed_import_is_never_served(engine: Engine) {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let wiki = format!("w{}", uid());
    let store_args: Vec<String> = match engine {
        Engine::Embedded => vec!["--data-dir".into(), dir.path().display().to_string()],
        Engine::Cassandra => {
            let c = crate::support::cluster().await;
            vec![
                "--cassandra".into(),
                std::env::var("KARTEI_TEST_CASSANDRA").unwrap(),
                "--env".into(),
                c.engine.env().to_owned(),
            ]
        }
    };
    let kartei = |extra: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_kartei"));
        c.args(["import-suggestions", "--wiki", &wiki, "--dead-after", "0"])
            .args(extra)
            .args(&store_args)
            .env_remove("KARTEI_CASSANDRA")
            .env_remove("KARTEI_DATA_DIR");
        c
    };
    let a_file = dir.path().join("a.ndjson");
    std::fs::write(
        &a_file,
        format!("{}\n{}\n", line(1, "A.jpg", 0.9), line(2, "A2.jpg", 0.9)),
    )
    .unwrap();
    let out = kartei(&[a_file.to_str().unwrap()]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // B arrives on stdin, part of it, then the process is killed.
    let mut child = kartei(&["-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut chunk = String::new();
    for p in 0..3_000 {
        chunk.push_str(&line(p, "B.jpg", 0.5));
        chunk.push('\n');
    }
    stdin.write_all(chunk.as_bytes()).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);

    let open = || async {
        let (store, _keep): (DynStore, Option<crate::support::TestStore>) = match engine {
            Engine::Embedded => (
                std::sync::Arc::new(kartei::store::Counted::new(
                    kartei::store::embedded::EmbeddedStore::open(dir.path()).unwrap(),
                )),
                None,
            ),
            Engine::Cassandra => (crate::support::cluster().await, None),
        };
        store
    };
    {
        let store = open().await;
        let s = Suggestions::new(store.clone());
        let shown = images(&s, &wiki, 1).await;
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].0, "A.jpg", "only A is served");
        let all = s.datasets(&wiki).await.unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].state, DatasetState::Importing, "B is an orphan");
    }

    // The rerun purges the orphan and publishes.
    let b_file = dir.path().join("b.ndjson");
    std::fs::write(&b_file, format!("{}\n", line(1, "B.jpg", 0.5))).unwrap();
    let out = kartei(&[b_file.to_str().unwrap()]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = open().await;
    let s = Suggestions::new(store.clone());
    assert_eq!(images(&s, &wiki, 1).await[0].0, "B.jpg");
    assert!(images(&s, &wiki, 2).await.is_empty());
    let all = s.datasets(&wiki).await.unwrap();
    let orphan = &all[1];
    assert_eq!(orphan.state, DatasetState::Purged, "{all:?}");
    assert_eq!(rows_of(&store, &wiki, 5, &orphan.id).await, 0);
}

both_engines!(
    publishing_switches_datasets_at_once,
    failed_imports_stay_invisible_and_leave_nothing,
    rollback_and_keep,
    a_killed_import_is_never_served,
);
