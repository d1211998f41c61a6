//! Faults survived (issue 17): kill -9 of the importers and of a server under
//! fifty concurrent writers at random points (each run's seed is printed and
//! `KARTEI_FAULT_SEEDS=1,2,3` replays them), a full disk under the embedded
//! store, and a data directory that cannot be used at start-up.
//!
//! These tests drive the real `kartei` binary as separate processes, so that
//! SIGKILL hits exactly what a crash would.

mod beside_a_server;
mod disk;
mod importers;
mod remote;
mod server_killed;
mod uploads;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kartei::store::{DynStore, Scan, Table, Value as KValue};
use serde_json::{Value, json};

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

/// `repair-views --check` (with `args`, e.g. a portal) passes after a kill.
/// On Cassandra a kill between a change and its counter updates leaves a
/// count short (cql/README.md, "Counters": the only difference the healing
/// of the query rows leaves), so `repair-views` recounts first; on the
/// embedded engine the counts go in each change's transaction and the
/// check must pass as it is.
fn in_step_after_kill(target: &Target, args: &[&str]) {
    let mut check = vec!["repair-views", "--check"];
    check.extend_from_slice(args);
    if let Target::Cluster { .. } = target {
        let out = kartei(&check, target).output().expect("run kartei");
        let report = String::from_utf8_lossy(&out.stdout);
        for line in report.lines().skip(1) {
            assert!(
                line.trim_start().starts_with("assignment_counts:"),
                "a difference besides the counts: {report}"
            );
        }
        let mut repair = vec!["repair-views"];
        repair.extend_from_slice(args);
        finish(&repair, target);
    }
    finish(&check, target);
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

const JOBS: &str = "{ jobs(first: 50) { id kind state startedBy input progress errorCount errors result exitCode } }";

/// The jobs listed to `token`, newest first.
fn listed_jobs(http: &reqwest::Client, url: &str, token: &str) -> Vec<Value> {
    let listed =
        crate::support::run(post(http, url, token, JOBS, json!({}))).expect("the server answers");
    listed["data"]["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .clone()
}

/// The newest `kind` job, once it is in `state` (waiting up to 60 s).
fn run_job(http: &reqwest::Client, url: &str, token: &str, kind: &str, state: &str) -> Value {
    let waited = Instant::now();
    loop {
        let jobs = listed_jobs(http, url, token);
        if let Some(j) = jobs.iter().find(|j| j["kind"] == kind)
            && j["state"] == state
        {
            return j.clone();
        }
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "no {state} {kind} in {jobs:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
