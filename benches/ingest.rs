//! Benchmark (not a test): ingest on the embedded store, each figure beside
//! its reference measured in the same run.
//!
//! - `import-vocabulary` and `import-assignments` (the library functions the
//!   commands call) on a group-commit store, against the way they wrote before
//!   (one keyword or one assignment per call, each write its own durable
//!   transaction) on a smaller sample;
//! - a re-import of the same assignments (all "already present");
//! - the data file's growth for the assignments against their NDJSON size;
//! - 50 concurrent writers calling `suggest` (what 50 clients of
//!   `suggestAssignment` cause in the store), with and without group commit;
//! - `import-suggestions` rows/s, and the 100-page multi-get against 100
//!   single-page reads one after the other (median of 50 each).
//!
//! Run: `cargo bench --bench ingest` (optionally `-- ROWS`, default 20,000;
//! `-- --smoke` for a quick pass). Input files come from
//! `scripts/bench_data.py`. Prints a table and one `BENCH|...` line per figure
//! for `scripts/bench.sh`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use kartei::domains::assignments::service::{Assignments, SuggestInput, Suggester};
use kartei::domains::themes::service::Themes;
use kartei::store::embedded::{DEFAULT_CACHE_BYTES, EmbeddedStore};
use kartei::store::{Counted, DynStore};

fn data(kind: &str, n: usize, to: &Path) {
    let out = Command::new("python3")
        .args(["scripts/bench_data.py", kind, &n.to_string()])
        .output()
        .expect("python3 runs scripts/bench_data.py");
    assert!(out.status.success(), "bench_data.py failed");
    std::fs::write(to, out.stdout).expect("write input");
}

fn open(dir: &Path, group: bool) -> DynStore {
    std::sync::Arc::new(Counted::new(
        EmbeddedStore::open_with(dir, DEFAULT_CACHE_BYTES, group).expect("embedded store"),
    ))
}

fn compacted(dir: &Path) -> u64 {
    kartei::store::embedded::compact(dir).expect("compact").1
}

fn bench(figure: &str, ours: String, reference: String, ratio: f64, goal: &str) {
    println!("  {figure}: {ours} (reference {reference}, x{ratio:.2}; goal {goal})");
    println!("BENCH|{figure}|{ours}|{reference}|x{ratio:.2}|{goal}");
}

async fn import_vocabulary(store: &DynStore, file: &Path) -> f64 {
    let themes = Themes::new(store.clone());
    let input = std::io::BufReader::new(std::fs::File::open(file).unwrap());
    let r = kartei::domains::themes::import::import(&themes, input, 16)
        .await
        .unwrap();
    assert!(
        r.errors.is_empty(),
        "{:?}",
        &r.errors[..r.errors.len().min(3)]
    );
    r.records() as f64 / r.elapsed.as_secs_f64()
}

async fn import_assignments(store: &DynStore, file: &Path, expect_created: bool) -> f64 {
    let service = Assignments::new(store.clone());
    let size = std::fs::metadata(file).unwrap().len() as usize;
    let input = std::io::BufReader::new(std::fs::File::open(file).unwrap());
    let r = kartei::domains::assignments::import::import(
        &service,
        "bench",
        kartei::kernel::chunked::Input::new(input, size, 4),
    )
    .await
    .unwrap();
    assert!(r.errors.is_empty(), "{}", r.summary());
    assert_eq!(r.created > 0, expect_created, "{}", r.summary());
    (r.created + r.existing) as f64 / r.elapsed.as_secs_f64()
}

/// The former import paths: one `upsert_keyword` / `suggest` per record, 16 in flight.
async fn one_by_one(store: &DynStore, vocabulary: &Path, assignments: &Path) -> (f64, f64) {
    let themes = Themes::new(store.clone());
    let admin =
        kartei::kernel::roles::Principal::local("bench", &[kartei::kernel::roles::Role::Admin]);
    let text = std::fs::read_to_string(vocabulary).unwrap();
    let mut records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let keywords = records.split_off(21);
    for c in records {
        themes
            .upsert_category(
                &admin,
                kartei::domains::themes::service::CategoryInput {
                    id: c["id"].as_str().unwrap().into(),
                    parent_id: c["parentId"].as_str().map(Into::into),
                    label: c["label"].as_str().unwrap().into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    let started = Instant::now();
    let n = keywords.len();
    let (themes_ref, admin_ref) = (&themes, &admin);
    kartei::kernel::bounded(keywords, 16, |k| async move {
        themes_ref
            .upsert_keyword(
                admin_ref,
                kartei::domains::themes::service::KeywordInput {
                    id: k["id"].as_str().unwrap().into(),
                    label: k["label"].as_str().unwrap().into(),
                    synonyms: vec![k["synonyms"][0].as_str().unwrap().into()],
                    category_ids: vec![k["categoryIds"][0].as_str().unwrap().into()],
                    created_at: Some("2026-01-01T00:00:00Z".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
    })
    .await;
    let vocab_rate = (n + 21) as f64 / started.elapsed().as_secs_f64();

    let service = Assignments::new(store.clone());
    let lines = suggestions(assignments, usize::MAX);
    let n = lines.len();
    let who = Suggester::machine("bench");
    let started = Instant::now();
    let (service_ref, who_ref) = (&service, &who);
    kartei::kernel::bounded(lines, 16, |i| async move {
        service_ref.suggest(who_ref, i).await.unwrap()
    })
    .await;
    (vocab_rate, n as f64 / started.elapsed().as_secs_f64())
}

/// The first `n` lines of an assignments file.
fn suggestions(file: &Path, n: usize) -> Vec<SuggestInput> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .take(n)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            SuggestInput {
                portal_id: v["portalId"].as_str().unwrap().into(),
                ddb_id: v["ddbId"].as_str().unwrap().into(),
                keyword_id: v["keywordId"].as_str().unwrap().into(),
                child_category_id: v["childCategoryId"].as_str().unwrap().into(),
                confidence: v["confidence"].as_f64(),
            }
        })
        .collect()
}

/// 50 tasks, each suggesting `each` assignments one after the other.
async fn fifty_writers(store: &DynStore, assignments: &Path, each: usize) -> f64 {
    let service = Assignments::new(store.clone());
    let lines = suggestions(assignments, 50 * each);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for chunk in lines.chunks(each) {
        let service = service.clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            let who = Suggester::machine("writer");
            for i in chunk {
                service.suggest(&who, i).await.unwrap();
            }
        }));
    }
    let n = lines.len();
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / started.elapsed().as_secs_f64()
}

async fn suggestion_figures(dir: &Path, file: &Path, smoke: bool) {
    use kartei::domains::suggestions::service::{ReadOptions, Suggestions};
    let store = open(dir, true);
    let s = Suggestions::new(store.clone());
    let who =
        kartei::kernel::roles::Principal::local("bench", &[kartei::kernel::roles::Role::Machine]);
    let r = kartei::domains::suggestions::import::import(
        &s,
        &who,
        std::fs::File::open(file).unwrap(),
        kartei::domains::suggestions::import::ImportOptions {
            wiki: "benchwiki".into(),
            source: None,
            max_errors: 0,
            keep: 1,
            concurrency: 4,
            size: 0,
        },
    )
    .await
    .unwrap();
    assert!(r.published, "{}", r.summary());
    let rate = r.rows as f64 / r.elapsed.as_secs_f64();
    bench(
        "import-suggestions, embedded",
        format!("{rate:.0} rows/s"),
        "50,000 rows/s (goal)".into(),
        rate / 50_000.0,
        ">= 50,000 rows/s",
    );
    let pages: Vec<i32> = (0..100).map(|i| i * 7).collect();
    let samples = if smoke { 5 } else { 50 };
    let (mut many, mut one_by_one) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let t = Instant::now();
        let got = s
            .pages("benchwiki", &pages, ReadOptions::default())
            .await
            .unwrap();
        many.push(t.elapsed());
        assert_eq!(got.len(), 100);
        let t = Instant::now();
        for p in &pages {
            s.page("benchwiki", *p, ReadOptions::default())
                .await
                .unwrap();
        }
        one_by_one.push(t.elapsed());
    }
    many.sort();
    one_by_one.sort();
    let (m, o) = (many[samples / 2], one_by_one[samples / 2]);
    bench(
        "100-page multi-get of suggestions, embedded (median)",
        format!("{:.2} ms", m.as_secs_f64() * 1e3),
        format!("{:.2} ms as 100 single reads", o.as_secs_f64() * 1e3),
        m.as_secs_f64() / o.as_secs_f64(),
        "< x1 (3 store calls)",
    );
}

fn main() {
    kartei::tune_allocator();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let rows: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(if smoke { 2_000 } else { 20_000 });
    let sample = (rows / 10).max(500);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let (vocab, assign, small_assign) = (
            tmp.path().join("v.ndjson"),
            tmp.path().join("a.ndjson"),
            tmp.path().join("a-small.ndjson"),
        );
        data("vocabulary", rows.max(2_000), &vocab);
        data("assignments", rows, &assign);
        data("assignments", sample, &small_assign);
        println!("ingest on the embedded store: {rows} keywords, {rows} assignments");

        let dir = tmp.path().join("grouped");
        let store = open(&dir, true);
        let vocab_rate = import_vocabulary(&store, &vocab).await;
        drop(store);
        // Sizes of the file compacted (redb grows it ahead of use).
        let before = compacted(&dir);
        let store = open(&dir, true);
        let assign_rate = import_assignments(&store, &assign, true).await;
        drop(store);
        let after = compacted(&dir);
        let store = open(&dir, true);
        let again_rate = import_assignments(&store, &assign, false).await;
        drop(store);

        let small_vocab = tmp.path().join("v-small.ndjson");
        data("vocabulary", 2_000, &small_vocab);
        let ref_dir = tmp.path().join("one-by-one");
        let ref_store = open(&ref_dir, false);
        let (ref_vocab, ref_assign) = one_by_one(&ref_store, &small_vocab, &small_assign).await;
        drop(ref_store);

        let ndjson = std::fs::metadata(&assign).unwrap().len();
        let growth = after.saturating_sub(before);
        bench(
            "import-vocabulary, embedded",
            format!("{vocab_rate:.0} rows/s"),
            format!("{ref_vocab:.0} rows/s one by one"),
            vocab_rate / ref_vocab,
            ">= 10,000 rows/s",
        );
        bench(
            "import-assignments, embedded",
            format!("{assign_rate:.0} rows/s"),
            format!("{ref_assign:.0} rows/s one by one"),
            assign_rate / ref_assign,
            ">= 20,000 rows/s",
        );
        bench(
            "import-assignments again (all present), embedded",
            format!("{again_rate:.0} rows/s"),
            format!("{assign_rate:.0} rows/s first import"),
            again_rate / assign_rate,
            "as fast as the first",
        );
        bench(
            &format!("data file growth for {rows} assignments, embedded"),
            format!("{:.1} MB", growth as f64 / 1e6),
            format!("{:.1} MB NDJSON", ndjson as f64 / 1e6),
            growth as f64 / ndjson as f64,
            "<= x3",
        );

        let each = if smoke { 10 } else { 40 };
        let w_dir = tmp.path().join("writers");
        let w_store = open(&w_dir, true);
        import_vocabulary(&w_store, &small_vocab).await;
        let grouped = fifty_writers(&w_store, &small_assign, each).await;
        drop(w_store);
        let u_dir = tmp.path().join("writers-ungrouped");
        let u_store = open(&u_dir, false);
        import_vocabulary(&u_store, &small_vocab).await;
        let single = fifty_writers(&u_store, &small_assign, each).await;
        drop(u_store);
        let sugg = tmp.path().join("s.ndjson");
        data("suggestions", rows * 5, &sugg);
        suggestion_figures(&tmp.path().join("suggestions"), &sugg, smoke).await;

        bench(
            "50 concurrent writers (suggest), embedded",
            format!("{grouped:.0} writes/s"),
            format!("{single:.0} writes/s one commit each"),
            grouped / single,
            ">= x5",
        );
    });
}
