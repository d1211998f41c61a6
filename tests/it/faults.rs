//! Faults survived (issue 17): kill -9 of the importers and of a server under
//! fifty concurrent writers at random points (each run's seed is printed and
//! `KARTEI_FAULT_SEEDS=1,2,3` replays them), a full disk under the embedded
//! store, and a data directory that cannot be used at start-up.
//!
//! These tests drive the real `kartei` binary as separate processes, so that
//! SIGKILL hits exactly what a crash would.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kartei::store::{DynStore, Table, Value as KValue};
use serde_json::{Value, json};

use crate::support::run;

const BIN: &str = env!("CARGO_BIN_EXE_kartei");
const SECRET: &str = "kartei-fault-secret-0123456789-0123456789";
const PORTAL: &str = "c-fault";
const CHILDREN: usize = 8;

// ---------------------------------------------------------------------------
// Seeds and a small deterministic generator (splitmix64)
// ---------------------------------------------------------------------------

/// The seeds of this run: `KARTEI_FAULT_SEEDS` (comma-separated) or `n` random ones.
fn seeds(n: usize) -> Vec<u64> {
    if let Ok(s) = std::env::var("KARTEI_FAULT_SEEDS") {
        return s
            .split(',')
            .map(|x| x.trim().parse().expect("KARTEI_FAULT_SEEDS: numbers"))
            .collect();
    }
    (0..n)
        .map(|_| {
            let mut b = [0u8; 4];
            getrandom::fill(&mut b).expect("random");
            u64::from(u32::from_le_bytes(b))
        })
        .collect()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `lo..hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

// ---------------------------------------------------------------------------
// Input files
// ---------------------------------------------------------------------------

fn child(i: usize) -> String {
    format!("{PORTAL}-{:02}", i % CHILDREN)
}

/// A portal, its children and `keywords` keywords, as `import-vocabulary` reads them.
fn vocabulary_file(dir: &Path, keywords: usize) -> PathBuf {
    let path = dir.join("vocabulary.ndjson");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let line = |out: &mut std::io::BufWriter<std::fs::File>, v: Value| {
        writeln!(out, "{v}").unwrap();
    };
    line(
        &mut out,
        json!({"type": "category", "id": PORTAL, "label": "Fault-Portal"}),
    );
    for i in 0..CHILDREN {
        line(
            &mut out,
            json!({"type": "category", "id": child(i), "parentId": PORTAL, "label": format!("Bereich {i}")}),
        );
    }
    for i in 0..keywords {
        line(
            &mut out,
            json!({"type": "keyword", "id": format!("kf-{i:05}"), "label": format!("Schlagwort {i}"),
                   "synonyms": [format!("Synonym {i}")], "categoryIds": [child(i)],
                   "createdAt": "2026-01-01T00:00:00Z"}),
        );
    }
    out.flush().unwrap();
    path
}

/// `n` machine suggestions over the first `keywords` keywords.
fn assignments_file(dir: &Path, n: usize, keywords: usize) -> PathBuf {
    let path = dir.join("assignments.ndjson");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for i in 0..n {
        let k = (i * 7919) % keywords;
        writeln!(
            out,
            "{}",
            json!({"portalId": PORTAL, "ddbId": format!("FDDB{:08}", i / 3 * 7 + k % 3),
                   "keywordId": format!("kf-{k:05}"), "childCategoryId": child(k),
                   "confidence": ((i * 37) % 100) as f64 / 100.0})
        )
        .unwrap();
    }
    out.flush().unwrap();
    path
}

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

/// Where a command's store is: an embedded directory or a Cassandra keyspace set.
#[derive(Clone)]
enum Target {
    Dir(PathBuf),
    Cluster { nodes: String, env: String },
}

impl Target {
    fn args(&self) -> Vec<String> {
        match self {
            Target::Dir(d) => vec!["--data-dir".into(), d.display().to_string()],
            Target::Cluster { nodes, env } => vec![
                "--cassandra".into(),
                nodes.clone(),
                "--env".into(),
                env.clone(),
            ],
        }
    }
}

fn kartei(args: &[&str], target: &Target) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .args(target.args())
        .env_remove("KARTEI_DATA_DIR")
        .env_remove("KARTEI_CASSANDRA")
        .env("KARTEI_LOG", "warn");
    c
}

/// Runs a command to its end; panics with its output unless it exits 0.
fn finish(args: &[&str], target: &Target) {
    let out = kartei(args, target).output().expect("run kartei");
    assert!(
        out.status.success(),
        "kartei {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts a command and SIGKILLs it after `after`; true if it was still running
/// then (one that ended before must have succeeded).
fn kill_after(args: &[&str], target: &Target, after: Duration) -> bool {
    let mut child = kartei(args, target)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kartei");
    let deadline = Instant::now() + after;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(
                status.success(),
                "kartei {args:?} failed before the kill: {status}"
            );
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    true
}

// ---------------------------------------------------------------------------
// Dumps
// ---------------------------------------------------------------------------

/// The tables the importers and the assignment workflow write.
fn workflow_tables() -> Vec<&'static Table> {
    use kartei::domains::assignments::model as a;
    use kartei::domains::themes::model as t;
    vec![
        &t::CATEGORIES,
        &t::CATEGORIES_PARENTS,
        &t::PORTALS,
        &t::KEYWORDS,
        &t::KEYWORDS_CATEGORIES,
        &t::KEYWORDS_HIERARCHIES,
        &t::KEYWORDS_SEARCH,
        &t::GND_ENTITIES,
        &a::OBJECTS_KEYWORDS,
        &a::OBJECTS_KEYWORDS_CREATOR,
        &a::OBJECTS_KEYWORDS_STATUS,
        &a::OBJECTS_KEYWORDS_DDBID,
        &a::OBJECTS_KEYWORDS_KEYWORD,
        &a::OBJECTS_KEYWORDS_CREATORS_WITH_STATUS,
        &a::RELEASE_DDBIDS,
    ]
}

/// Every row of `tables`, one line per row; the clock columns an assignment
/// gets when it is written (created_at, modified_at, enqueued_at) read as "T",
/// since two runs write at different times.
async fn dump(store: &DynStore, tables: &[&'static Table]) -> BTreeMap<&'static str, Vec<String>> {
    let mut out = BTreeMap::new();
    for t in tables {
        let clocked = t.name.starts_with("objects_keywords") || t.name == "release_ddbids";
        let mut lines = Vec::new();
        let mut after = None;
        loop {
            let page = store.scan(t, after, 1_000).await.expect("scan");
            for row in &page.rows {
                let cells: Vec<String> = t
                    .all_columns()
                    .zip(&row.values)
                    .map(|(c, v)| match v {
                        Some(_)
                            if clocked
                                && matches!(
                                    c.name,
                                    "created_at" | "modified_at" | "enqueued_at"
                                ) =>
                        {
                            format!("{}=T", c.name)
                        }
                        Some(KValue::Double(d)) => format!("{}={d:.4}", c.name),
                        Some(v) => format!("{}={v:?}", c.name),
                        None => format!("{}=null", c.name),
                    })
                    .collect();
                lines.push(cells.join(" "));
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        lines.sort();
        out.insert(t.name, lines);
    }
    out
}

fn open_dir(dir: &Path) -> DynStore {
    Arc::new(kartei::store::embedded::EmbeddedStore::open(dir).expect("open the store"))
}

fn assert_same(
    reference: &BTreeMap<&str, Vec<String>>,
    got: &BTreeMap<&str, Vec<String>>,
    seed: u64,
) {
    for (table, rows) in reference {
        let other = &got[table];
        if rows != other {
            let a: BTreeSet<_> = rows.iter().collect();
            let b: BTreeSet<_> = other.iter().collect();
            let missing: Vec<_> = a.difference(&b).take(3).collect();
            let extra: Vec<_> = b.difference(&a).take(3).collect();
            panic!(
                "seed {seed}: {table} differs from the uninterrupted run ({} rows vs {}): missing {missing:?}, extra {extra:?}",
                rows.len(),
                other.len()
            );
        }
    }
}

// ---------------------------------------------------------------------------
// 1. Importers killed at random points, then rerun
// ---------------------------------------------------------------------------

const IMPORTS: [&str; 2] = ["import-vocabulary", "import-assignments"];

fn import_args<'a>(which: &'a str, files: &'a (PathBuf, PathBuf)) -> Vec<&'a str> {
    match which {
        "import-vocabulary" => vec![which, files.0.to_str().unwrap()],
        _ => vec![
            which,
            files.1.to_str().unwrap(),
            "--creator",
            "fault-machine",
        ],
    }
}

/// Imports both files into `reference` without interruption, then, per seed,
/// into a fresh target where each importer is SIGKILLed at a random moment
/// within its uninterrupted run time and run again; the end state must equal
/// the reference's, and the query tables must be in step.
async fn importers_killed(
    reference: Target,
    mut fresh: impl FnMut(u64) -> Target,
    open: impl Fn(&Target) -> DynStore,
    sizes: (usize, usize),
    seeds: Vec<u64>,
) {
    let work = tempfile::tempdir().unwrap();
    let files = (
        vocabulary_file(work.path(), sizes.0),
        assignments_file(work.path(), sizes.1, sizes.0),
    );
    let mut took = Vec::new();
    for which in IMPORTS {
        let started = Instant::now();
        finish(&import_args(which, &files), &reference);
        took.push(started.elapsed());
    }
    let tables = workflow_tables();
    let expected = dump(&open(&reference), &tables).await;
    assert!(
        expected["objects_keywords"].len() > sizes.1 / 2,
        "the reference import wrote too little"
    );
    for seed in seeds {
        let mut rng = Rng(seed);
        let target = fresh(seed);
        let mut report = Vec::new();
        for (which, took) in IMPORTS.iter().zip(&took) {
            let at = Duration::from_millis(rng.between(5, (took.as_millis() as u64).max(10)));
            let killed = kill_after(&import_args(which, &files), &target, at);
            finish(&import_args(which, &files), &target);
            report.push(format!(
                "{which} {} at {} ms of {} ms",
                if killed {
                    "killed"
                } else {
                    "finished before the kill"
                },
                at.as_millis(),
                took.as_millis()
            ));
        }
        eprintln!("seed {seed}: {}", report.join("; "));
        let got = dump(&open(&target), &tables).await;
        assert_same(&expected, &got, seed);
        finish(&["repair-views", "--check"], &target);
    }
}

#[test]
fn embedded_importers_killed_at_random_points_rerun_to_the_same_end_state() {
    run(async {
        let base = tempfile::tempdir().unwrap();
        let reference = Target::Dir(base.path().join("reference"));
        let root = base.path().to_owned();
        importers_killed(
            reference,
            |seed| Target::Dir(root.join(format!("seed-{seed}"))),
            |t| match t {
                Target::Dir(d) => open_dir(d),
                Target::Cluster { .. } => unreachable!(),
            },
            (3_000, 40_000),
            seeds(3),
        )
        .await;
    });
}

#[test]
fn cassandra_importers_killed_at_a_random_point_rerun_to_the_same_end_state() {
    if crate::support::cassandra_off() {
        return;
    }
    run(async {
        // Two keyspace sets of their own (the reference and the killed run),
        // dropped at the end: one seed per run keeps the test node's memory low.
        let sets = [own_keyspaces().await, own_keyspaces().await];
        let target = |i: usize| sets[i].1.clone();
        let store_of = |t: &Target| -> DynStore {
            match t {
                Target::Cluster { env, .. } => {
                    sets.iter().find(|(s, _)| s.env() == env).unwrap().0.clone()
                }
                Target::Dir(_) => unreachable!(),
            }
        };
        importers_killed(target(0), |_| target(1), store_of, (600, 6_000), seeds(1)).await;
        for (s, _) in &sets {
            drop_keyspaces(s).await;
        }
    });
}

/// A keyspace set of the test's own on the test node, and the flags that
/// point a command at it; drop it with [`drop_keyspaces`].
async fn own_keyspaces() -> (Arc<kartei::store::cql::CqlStore>, Target) {
    let set = Arc::new(crate::support::fresh_keyspaces().await);
    let target = Target::Cluster {
        nodes: std::env::var("KARTEI_TEST_CASSANDRA").unwrap(),
        env: set.env().to_owned(),
    };
    (set, target)
}

/// Drops a test's own keyspace set, to keep the 1 GiB test node's memory
/// (best effort: a node busy with other tests may time the DDL out).
async fn drop_keyspaces(store: &kartei::store::cql::CqlStore) {
    for family in ["themes", "target", "binaries", "suggestions", "crawl"] {
        let ks = format!("{family}_{}", store.env());
        if let Err(e) = store.ddl(&format!("DROP KEYSPACE IF EXISTS {ks}")).await {
            eprintln!("could not drop {ks}: {e}");
        }
    }
}

// ---------------------------------------------------------------------------
// 2. A server killed under fifty concurrent writers, a release and bulk transitions
// ---------------------------------------------------------------------------

struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// `kartei serve` on a free port; returns once it answers /healthz.
    fn start(target: &Target) -> Server {
        Server::start_with(target, &[])
    }

    /// `start` with more flags.
    fn start_with(target: &Target, extra: &[&str]) -> Server {
        let mut child = kartei(
            &["serve", "--listen", "127.0.0.1:0", "--crawl", "off"],
            target,
        )
        .args(["--auth-secret", SECRET])
        .args(extra)
        .env("KARTEI_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kartei serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let verbose = std::env::var_os("KARTEI_FAULT_VERBOSE").is_some();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if verbose {
                    eprintln!("server: {line}");
                }
                if let Some(rest) = line.strip_prefix("kartei serves on ") {
                    let url = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let _ = tx.send(url);
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server said where it listens");
        Server { child, url }
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    /// SIGTERM, and wait for the graceful stop.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().expect("stopped");
    }
}

impl Drop for Server {
    /// A failing test does not leave its server behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn token(sub: &str, roles: &[&str]) -> String {
    let roles: Vec<String> = roles.iter().map(|r| r.to_string()).collect();
    kartei::edge::auth::Auth::hs256(SECRET.as_bytes())
        .expect("secret")
        .mint(sub, &roles, 3600)
        .expect("mint")
}

/// POSTs a GraphQL request; `None` when the server did not answer (it was killed).
async fn post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    query: &str,
    vars: Value,
) -> Option<Value> {
    let r = http
        .post(format!("{url}/graphql"))
        .bearer_auth(token)
        .json(&json!({"query": query, "variables": vars}))
        .send()
        .await
        .ok()?;
    r.json().await.ok()
}

const SUGGEST: &str =
    "mutation($i: SuggestAssignmentInput!) { suggestAssignment(input: $i) { status } }";
const BULK: &str = "mutation($k: [AssignmentKeyInput!]!) { transitionAssignments(keys: $k, expected: SUGGESTED, to: ACCEPTED) { applied error { code } } }";
const RELEASE: &str = "mutation($p: ID!) { runRelease(portalId: $p) { successful published } }";

/// What the writers were told: per assignment key, the last acknowledged
/// status, and whether a later change was sent without an answer.
#[derive(Default)]
struct Ledger {
    acked: BTreeMap<(String, String, String), &'static str>,
    /// Suggestions sent and not (yet) answered, with their input.
    unanswered_suggest: BTreeMap<(String, String, String), Value>,
    unanswered_bulk: BTreeSet<(String, String, String)>,
}

async fn writer(
    http: reqwest::Client,
    url: String,
    w: usize,
    ledger: Arc<Mutex<Ledger>>,
    keywords: usize,
) {
    let sub = format!("writer-{w:02}");
    let tok = token(&sub, &["editor"]);
    let mut i = 0usize;
    loop {
        let mut batch = Vec::new();
        for _ in 0..5 {
            let k = (w * 31 + i * 7) % keywords;
            let ddb = format!("W{w:02}-{i:06}");
            i += 1;
            let input = json!({"portalId": PORTAL, "ddbId": ddb, "keywordId": format!("kf-{k:05}"),
                               "childCategoryId": child(k), "confidence": 0.5});
            let key = (ddb, format!("kf-{k:05}"), sub.clone());
            ledger
                .lock()
                .unwrap()
                .unanswered_suggest
                .insert(key.clone(), input.clone());
            match post(&http, &url, &tok, SUGGEST, json!({"i": input})).await {
                Some(r) if r["data"]["suggestAssignment"]["status"] == "SUGGESTED" => {
                    let mut l = ledger.lock().unwrap();
                    l.unanswered_suggest.remove(&key);
                    l.acked.insert(key.clone(), "SUGGESTED");
                    batch.push(key);
                }
                Some(r) => panic!("writer {w}: suggest refused: {r}"),
                None => return,
            }
        }
        let keys: Vec<Value> = batch
            .iter()
            .map(|(d, k, c)| json!({"portalId": PORTAL, "ddbId": d, "keywordId": k, "creator": c}))
            .collect();
        ledger
            .lock()
            .unwrap()
            .unanswered_bulk
            .extend(batch.iter().cloned());
        match post(&http, &url, &tok, BULK, json!({"k": keys})).await {
            Some(r) => {
                let results = r["data"]["transitionAssignments"]
                    .as_array()
                    .unwrap_or_else(|| panic!("writer {w}: bulk refused: {r}"));
                let mut l = ledger.lock().unwrap();
                for (key, res) in batch.iter().zip(results) {
                    assert_eq!(res["applied"], true, "writer {w}: {r}");
                    l.unanswered_bulk.remove(key);
                    l.acked.insert(key.clone(), "ACCEPTED");
                }
            }
            None => return,
        }
    }
}

async fn releaser(http: reqwest::Client, url: String, runs: Arc<Mutex<u64>>) {
    let tok = token("releaser", &["editor"]);
    loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        match post(&http, &url, &tok, RELEASE, json!({"p": PORTAL})).await {
            Some(r) if r["data"]["runRelease"]["successful"] == true => *runs.lock().unwrap() += 1,
            Some(r) => panic!("release failed: {r}"),
            None => return,
        }
    }
}

/// Every page of a connection: `field` of `query` (which takes `$a`, the
/// cursor), each page's items under `items` passed to `each`.
async fn all_pages(
    http: &reqwest::Client,
    url: &str,
    query: &str,
    mut vars: Value,
    field: &str,
    items: &str,
    mut each: impl FnMut(&Value),
) {
    let tok = token("reader", &["editor"]);
    loop {
        let r = post(http, url, &tok, query, vars.clone())
            .await
            .expect("the restarted server answers");
        let c = &r["data"][field];
        for n in c[items].as_array().unwrap_or_else(|| panic!("{r}")) {
            each(n);
        }
        if c["pageInfo"]["hasNextPage"] != true {
            return;
        }
        vars["a"] = c["pageInfo"]["endCursor"].clone();
    }
}

/// Every assignment of the fault portal, by key, with its status.
async fn statuses(http: &reqwest::Client, url: &str) -> BTreeMap<(String, String, String), String> {
    let mut out = BTreeMap::new();
    all_pages(
        http,
        url,
        "query($p: ID!, $a: String) { assignments(portalId: $p, first: 100, after: $a) { pageInfo { hasNextPage endCursor } nodes { ddbId keywordId creator status } } }",
        json!({"p": PORTAL, "a": null}),
        "assignments",
        "nodes",
        |n| {
            let text = |f: &str| n[f].as_str().unwrap().to_owned();
            out.insert(
                (text("ddbId"), text("keywordId"), text("creator")),
                text("status"),
            );
        },
    )
    .await;
    out
}

/// The release queue's ddb ids.
async fn queued(http: &reqwest::Client, url: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    all_pages(
        http,
        url,
        "query($a: String) { releaseQueue(first: 100, after: $a) { pageInfo { hasNextPage endCursor } edges { node } } }",
        json!({"a": null}),
        "releaseQueue",
        "edges",
        |e| {
            out.insert(e["node"].as_str().unwrap().to_owned());
        },
    )
    .await;
    out
}

/// Fifty writers (each: five suggestions, then one bulk transition of them to
/// ACCEPTED) and a release loop against a server process, which is SIGKILLed
/// at a random moment. After a restart on the same store: every acknowledged
/// write is there with its acknowledged status (or the status a later change,
/// sent but unanswered, or the release gives it); a release run again
/// publishes what is left, and every published object is queued; the query
/// tables are in step with the base table (`repair-views --check`).
async fn server_killed(target: Target, seed: u64, keywords: usize, atomic: bool) {
    let mut rng = Rng(seed);
    let server = Server::start(&target);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let runs = Arc::new(Mutex::new(0u64));
    let mut tasks = Vec::new();
    for w in 0..50 {
        tasks.push(tokio::spawn(writer(
            http.clone(),
            server.url.clone(),
            w,
            ledger.clone(),
            keywords,
        )));
    }
    tasks.push(tokio::spawn(releaser(
        http.clone(),
        server.url.clone(),
        runs.clone(),
    )));
    // The random point counts from the first acknowledged write: a loaded
    // machine (CI) can take longer than the shortest delay to answer one.
    let first = std::time::Instant::now();
    while ledger.lock().unwrap().acked.is_empty() && first.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at = Duration::from_millis(rng.between(400, 2_500));
    tokio::time::sleep(at).await;
    server.kill();
    for t in tasks {
        t.await.expect("a writer panicked");
    }
    let (acked, unanswered, unanswered_suggest) = {
        let l = ledger.lock().unwrap();
        (
            l.acked.clone(),
            l.unanswered_bulk.clone(),
            l.unanswered_suggest.clone(),
        )
    };
    if atomic {
        // The embedded store writes a row and its query rows in one
        // transaction: in step right after the kill, before any retry.
        finish(&["repair-views", "--check"], &target);
    }
    eprintln!(
        "seed {seed}: killed at {} ms: {} acknowledged writes, {} bulk transitions unanswered, {} release runs",
        at.as_millis(),
        acked.len(),
        unanswered.len(),
        runs.lock().unwrap()
    );
    assert!(
        !acked.is_empty(),
        "seed {seed}: nothing was written before the kill"
    );

    let server = Server::start(&target);
    let found = statuses(&http, &server.url).await;
    for (key, status) in &acked {
        let got = found.get(key).map(String::as_str);
        let allowed: &[&str] = match (*status, unanswered.contains(key)) {
            ("SUGGESTED", false) => &["SUGGESTED"],
            ("SUGGESTED", true) => &["SUGGESTED", "ACCEPTED", "PUBLISHED"],
            _ => &["ACCEPTED", "PUBLISHED"],
        };
        assert!(
            got.is_some_and(|g| allowed.contains(&g)),
            "seed {seed}: {key:?} was acknowledged as {status}, found {got:?}"
        );
    }
    // The clients send again what got no answer (a CONFLICT says it was done).
    for ((_, _, creator), input) in &unanswered_suggest {
        let r = post(
            &http,
            &server.url,
            &token(creator, &["editor"]),
            SUGGEST,
            json!({"i": input}),
        )
        .await
        .expect("retry");
        assert!(
            r["data"]["suggestAssignment"]["status"] == "SUGGESTED"
                || r["errors"][0]["extensions"]["code"] == "CONFLICT",
            "seed {seed}: a retried suggestion: {r}"
        );
    }
    for (ddb, kw, creator) in &unanswered {
        let key = json!([{"portalId": PORTAL, "ddbId": ddb, "keywordId": kw, "creator": creator}]);
        let r = post(
            &http,
            &server.url,
            &token(creator, &["editor"]),
            BULK,
            json!({"k": key}),
        )
        .await
        .expect("retry");
        let res = &r["data"]["transitionAssignments"][0];
        assert!(
            res["applied"] == true || res["error"].is_object(),
            "seed {seed}: a retried transition: {r}"
        );
    }
    let r = post(
        &http,
        &server.url,
        &token("releaser", &["editor"]),
        RELEASE,
        json!({"p": PORTAL}),
    )
    .await
    .expect("release after the restart");
    assert_eq!(
        r["data"]["runRelease"]["successful"], true,
        "seed {seed}: {r}"
    );
    let after = statuses(&http, &server.url).await;
    assert!(
        after.values().all(|s| s != "ACCEPTED"),
        "seed {seed}: a release after the restart left ACCEPTED rows"
    );
    let queue = queued(&http, &server.url).await;
    for ((ddb, _, _), s) in &after {
        if s == "PUBLISHED" {
            assert!(
                queue.contains(ddb),
                "seed {seed}: {ddb} is PUBLISHED but not queued for the reindexer"
            );
        }
    }
    server.stop();
    finish(&["repair-views", "--check", "--portal", PORTAL], &target);
}

fn prepared_dir(base: &Path, name: &str, keywords: usize) -> Target {
    let target = Target::Dir(base.join(name));
    let vocabulary = vocabulary_file(base, keywords);
    finish(
        &["import-vocabulary", vocabulary.to_str().unwrap()],
        &target,
    );
    target
}

#[test]
fn a_killed_embedded_server_keeps_every_acknowledged_write() {
    run(async {
        for seed in seeds(3) {
            let base = tempfile::tempdir().unwrap();
            let target = prepared_dir(base.path(), "data", 200);
            server_killed(target, seed, 200, true).await;
        }
    });
}

#[test]
fn a_killed_server_on_cassandra_keeps_every_acknowledged_write() {
    if crate::support::cassandra_off() {
        return;
    }
    run(async {
        // The shared keyspaces: the test's own portal keeps it apart, and
        // `repair-views --check` runs on that portal only.
        let nodes = std::env::var("KARTEI_TEST_CASSANDRA").unwrap();
        let target = Target::Cluster {
            nodes,
            env: crate::support::cluster().await.engine.env().to_owned(),
        };
        let base = tempfile::tempdir().unwrap();
        finish(
            &[
                "import-vocabulary",
                vocabulary_file(base.path(), 200).to_str().unwrap(),
            ],
            &target,
        );
        for seed in seeds(1) {
            server_killed(target.clone(), seed, 200, false).await;
        }
    });
}

// ---------------------------------------------------------------------------
// 3. A full disk under the embedded store; an unusable data directory
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 4. An upload and a garbage collection killed at random points
// ---------------------------------------------------------------------------

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
                let page = store.scan(t, after, 1_000).await.expect("scan");
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
