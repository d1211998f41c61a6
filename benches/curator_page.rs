//! Benchmark (not a test): the curator's review page over HTTP against the
//! minimal direct plan for the same data, in one process and one run.
//!
//! The page: `assignments(portalId, status: SUGGESTED, first: 50)` with each
//! node's ddb id, its keyword's label and its child category's label, sent
//! as a GraphQL POST to a real server on 127.0.0.1. The direct plan: the same
//! reads issued straight against the store seam (the merged bucket slice of
//! the status query table, then one multi-key read of the page's keywords and
//! one of their categories), no HTTP, no GraphQL. On Cassandra the reference
//! is the same plan straight through the scylla driver ([`RawPlan`]: prepared
//! statements, only the columns shown); the seam's plan is printed beside it.
//! Also measured in the same rounds: the page run in process without HTTP
//! (the engine's share) and `{ __typename }` over HTTP (the HTTP floor). Both
//! run on the embedded store, and on a Cassandra node too when
//! `KARTEI_BENCH_CASSANDRA=host:port` is set (keyspaces `*_bench<random>`,
//! dropped at the end). Prints median and p99 of each and the ratios.
//!
//! Run: `cargo bench --bench curator_page` (optionally `-- 20000` rows).
//! `KARTEI_PROFILE_ENGINE=1` runs only the in-process query, 3,000 times,
//! then exits: for `perf record` of the GraphQL engine's share.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kartei::domains::assignments::model::{
    Assignment, AssignmentKey, AssignmentStatus, AssignmentType, OBJECTS_KEYWORDS,
};
use kartei::domains::assignments::service::Assignments;
use kartei::domains::themes::service::{CategoryInput, KeywordInput, Themes};
use kartei::edge::auth::Auth;
use kartei::kernel::roles::{Principal, Role};
use kartei::store::{Counted, DynStore, Mutation};

#[path = "common/cassandra.rs"]
mod cassandra;
use cassandra::BenchKeyspaces;

const PORTAL: &str = "c-bench";
const CHILD: &str = "c-bench-orte";
const KEYWORDS: usize = 400;
const PAGE: usize = 50;
const SAMPLES: usize = 300;
const PAGE_QUERY: &str = "query($p: ID!) { assignments(portalId: $p, status: SUGGESTED, first: 50) { edges { node { ddbId keyword { label } childCategory { label } } } } }";

fn assignment(i: usize) -> Assignment {
    let status = if i.is_multiple_of(2) {
        AssignmentStatus::Suggested
    } else {
        AssignmentStatus::Autosuggested
    };
    Assignment {
        key: AssignmentKey {
            portal_id: PORTAL.into(),
            ddb_id: format!("DDB{:010}", (i as u64 * 2_654_435_761) % 10_000_000_000),
            keyword_id: format!("k-{:04}", i % KEYWORDS),
            creator: "bot".into(),
        },
        child_category_id: CHILD.into(),
        assignment_type: AssignmentType::Machine,
        status,
        created_at: "2026-12-03T12:00:00Z".into(),
        modified_at: "2026-12-03T12:00:00Z".into(),
        confidence: Some(0.5),
    }
}

async fn load(store: &DynStore, rows: usize) {
    let themes = Themes::new(store.clone());
    let admin = Principal::local("bench", &[Role::Admin]);
    for (id, parent, label) in [(PORTAL, None, "Bench"), (CHILD, Some(PORTAL), "Orte")] {
        themes
            .upsert_category(
                &admin,
                CategoryInput {
                    id: id.into(),
                    parent_id: parent.map(Into::into),
                    label: label.into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{}", e.message()));
    }
    for k in 0..KEYWORDS {
        themes
            .upsert_keyword(
                &admin,
                KeywordInput {
                    id: format!("k-{k:04}"),
                    label: format!("Ort {k}"),
                    category_ids: vec![CHILD.into()],
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{}", e.message()));
    }
    let mut i = 0;
    while i < rows {
        let end = (i + 500).min(rows);
        let mut batch = Vec::new();
        for n in i..end {
            let a = assignment(n);
            batch.push(Mutation::upsert(a.row(&OBJECTS_KEYWORDS)));
            batch.extend(a.view_rows().into_iter().map(Mutation::upsert));
        }
        // One partition's worth at a time keeps Cassandra batches small.
        for m in batch.chunks(60) {
            store.apply(m.to_vec()).await.expect("bulk write");
        }
        i = end;
    }
}

/// The direct plan: the reads the page needs, straight against the store.
async fn direct(assignments: &Assignments, themes: &Themes) -> usize {
    let page = assignments
        .list(PORTAL, Some(AssignmentStatus::Suggested), None, PAGE, None)
        .await
        .expect("page");
    let mut keyword_ids: Vec<String> = page
        .items
        .iter()
        .map(|(_, a)| a.key.keyword_id.clone())
        .collect();
    keyword_ids.sort();
    keyword_ids.dedup();
    let keywords = themes.keywords(&keyword_ids).await.expect("keywords");
    let mut category_ids: Vec<String> = page
        .items
        .iter()
        .map(|(_, a)| a.child_category_id.clone())
        .collect();
    category_ids.sort();
    category_ids.dedup();
    let categories = themes.categories(&category_ids).await.expect("categories");
    assert!(!keywords.is_empty() && !categories.is_empty());
    page.items.len()
}

/// A page row as the driver plan reads it: ddb id, keyword id, creator, child category id.
type PageRow = (String, String, String, String);

/// The direct plan on Cassandra straight through the scylla driver, with no
/// store seam: prepared statements, token-aware single-partition reads at
/// LOCAL_QUORUM (as the store reads), only the columns the page shows. The
/// page is merged from the 32 bucket partitions as the store does it: a few
/// rows from each, more only from a bucket whose rows all made the page.
struct RawPlan {
    session: scylla::client::session::Session,
    page: scylla::statement::prepared::PreparedStatement,
    keyword: scylla::statement::prepared::PreparedStatement,
    category: scylla::statement::prepared::PreparedStatement,
}

impl RawPlan {
    async fn new(nodes: &[String], env: &str) -> RawPlan {
        use scylla::statement::Consistency;
        let session = scylla::client::session_builder::SessionBuilder::new()
            .known_nodes(nodes)
            .build()
            .await
            .expect("connect to Cassandra");
        let prepare = |cql: String| {
            let session = &session;
            async move {
                let mut p = session.prepare(cql).await.expect("prepare");
                p.set_consistency(Consistency::LocalQuorum);
                p
            }
        };
        RawPlan {
            page: prepare(format!(
                "SELECT ddb_id, keyword_id, creator, child_category_id FROM target_{env}.objects_keywords_status \
                 WHERE top_level_category_id = ? AND bucket = ? AND status = ? LIMIT ?"
            ))
            .await,
            keyword: prepare(format!("SELECT label FROM themes_{env}.keywords WHERE id = ?")).await,
            category: prepare(format!("SELECT label FROM themes_{env}.categories WHERE id = ?")).await,
            session,
        }
    }

    /// Up to `limit` rows of one bucket, in clustering order.
    async fn bucket(&self, bucket: i32, limit: usize) -> Vec<PageRow> {
        self.session
            .execute_unpaged(&self.page, (PORTAL, bucket, "SUGGESTED", limit as i32))
            .await
            .expect("page read")
            .into_rows_result()
            .expect("rows")
            .rows::<PageRow>()
            .expect("typed rows")
            .collect::<Result<_, _>>()
            .expect("row")
    }

    async fn labels(
        &self,
        stmt: &scylla::statement::prepared::PreparedStatement,
        ids: Vec<String>,
    ) -> Vec<String> {
        futures::future::join_all(ids.iter().map(|id| async move {
            self.session
                .execute_unpaged(stmt, (id.as_str(),))
                .await
                .expect("label read")
                .into_rows_result()
                .expect("rows")
                .maybe_first_row::<(String,)>()
                .expect("typed row")
                .map(|(l,)| l)
                .unwrap_or_default()
        }))
        .await
    }

    async fn run(&self) -> usize {
        let buckets = kartei::store::buckets::BUCKETS;
        let mut limit = vec![PAGE.div_ceil(buckets as usize) + 1; buckets as usize];
        let mut rows: Vec<Vec<PageRow>> = vec![Vec::new(); buckets as usize];
        let mut want: Vec<usize> = (0..buckets as usize).collect();
        let page = loop {
            let read =
                futures::future::join_all(want.iter().map(|&b| self.bucket(b as i32, limit[b])))
                    .await;
            for (&b, r) in want.iter().zip(read) {
                rows[b] = r;
            }
            let mut merged: Vec<(&PageRow, usize)> = rows
                .iter()
                .enumerate()
                .flat_map(|(b, r)| r.iter().map(move |x| (x, b)))
                .collect();
            merged.sort_by(|a, b| (&a.0.0, &a.0.1, &a.0.2).cmp(&(&b.0.0, &b.0.1, &b.0.2)));
            merged.truncate(PAGE);
            // A bucket that gave all it was asked for and all of it made the
            // page may hold rows that belong on it: ask it for more.
            want = (0..buckets as usize)
                .filter(|&b| {
                    rows[b].len() == limit[b]
                        && merged.iter().filter(|(_, from)| *from == b).count() == rows[b].len()
                })
                .collect();
            if want.is_empty() {
                break merged
                    .into_iter()
                    .map(|(x, _)| x.clone())
                    .collect::<Vec<_>>();
            }
            for &b in &want {
                limit[b] *= 2;
            }
        };
        let mut keyword_ids: Vec<String> = page.iter().map(|r| r.1.clone()).collect();
        keyword_ids.sort();
        keyword_ids.dedup();
        let mut category_ids: Vec<String> = page.iter().map(|r| r.3.clone()).collect();
        category_ids.sort();
        category_ids.dedup();
        let (keywords, categories) = futures::join!(
            self.labels(&self.keyword, keyword_ids),
            self.labels(&self.category, category_ids)
        );
        assert!(!keywords.is_empty() && !categories.is_empty());
        page.len()
    }
}

/// A GraphQL POST and its JSON answer.
async fn post(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> serde_json::Value {
    client
        .post(url)
        .json(body)
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json")
}

/// P2: store round trips of one request as the query nests deeper, against
/// what resolving each node on its own would cost (1 + 50 per nested level).
async fn waves(engine: &str, store: &DynStore, client: &reqwest::Client, url: &str) {
    let levels = [
        "ddbId",
        "ddbId keyword { label }",
        "ddbId keyword { label categories { label } }",
        "ddbId keyword { label categories { label parent { label } } }",
    ];
    let mut page_calls = 0;
    for (depth, node) in levels.iter().enumerate() {
        let query = format!(
            "query($p: ID!) {{ assignments(portalId: $p, status: SUGGESTED, first: 50) {{ edges {{ node {{ {node} }} }} }} }}"
        );
        let body = serde_json::json!({"query": query, "variables": {"p": PORTAL}});
        let before = store.round_trips();
        let r = post(client, url, &body).await;
        assert!(r.get("errors").is_none(), "{r}");
        let calls = store.round_trips() - before;
        // The page itself is a merged read of 32 bucket slices (each counted);
        // resolving each node alone would add one read per node and level.
        if depth == 0 {
            page_calls = calls;
        }
        let naive = (page_calls + (PAGE * depth) as u64) as f64;
        println!(
            "BENCH|store calls per request, {engine}: nesting level {} (the page plus {depth} relation levels)|{calls}|{naive:.0} one read per node|x{:.2}|one wave per level",
            depth + 1,
            calls as f64 / naive
        );
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn run(engine: &str, store: DynStore, rows: usize, raw: Option<&RawPlan>) {
    let t = Instant::now();
    load(&store, rows).await;
    eprintln!(
        "{engine}: loaded {rows} assignments in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let binaries = kartei::app::binaries(&Default::default(), store.clone()).expect("binaries");
    let crawl = kartei::app::crawl(
        &Default::default(),
        &Default::default(),
        store.clone(),
        binaries.clone(),
    )
    .expect("crawl");
    let app = kartei::app::App::new(
        store.clone(),
        Auth::hs256(b"bench-secret-0123456789-0123456789-0123").expect("secret"),
        Default::default(),
        Default::default(),
        binaries,
        crawl,
        kartei::kernel::Clock::system(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/graphql", listener.local_addr().expect("addr"));
    let connections = kartei::edge::ConnectionLimits::from_limits(&Default::default());
    tokio::spawn(kartei::edge::serve(
        listener,
        kartei::edge::router(app.clone()),
        connections,
        std::future::pending(),
    ));
    let client = reqwest::Client::new();
    let body = serde_json::json!({"query": PAGE_QUERY, "variables": {"p": PORTAL}});
    let assignments = Assignments::new(store.clone());
    let themes = Themes::new(store.clone());
    let in_process = || {
        async_graphql::Request::new(PAGE_QUERY).variables(async_graphql::Variables::from_json(
            serde_json::json!({"p": PORTAL}),
        ))
    };
    if std::env::var_os("KARTEI_PROFILE_ENGINE").is_some() {
        for _ in 0..3000 {
            kartei::edge::graphql::execute_in_process(&app, Principal::default(), in_process())
                .await;
        }
        std::process::exit(0);
    }
    let (mut http, mut plan, mut engine_only, mut floor, mut driver) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let typename = serde_json::json!({"query": "{ __typename }"});
    for round in 0..(SAMPLES + 30) {
        // Interleaved, so both see the same machine.
        let t = Instant::now();
        let r = post(&client, &url, &body).await;
        let took = t.elapsed();
        assert_eq!(
            r["data"]["assignments"]["edges"].as_array().map(Vec::len),
            Some(PAGE),
            "{r}"
        );
        let t = Instant::now();
        assert_eq!(direct(&assignments, &themes).await, PAGE);
        let direct_took = t.elapsed();
        let t = Instant::now();
        let r = kartei::edge::graphql::execute_in_process(&app, Principal::default(), in_process())
            .await;
        let engine_took = t.elapsed();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let t = Instant::now();
        post(&client, &url, &typename).await;
        let floor_took = t.elapsed();
        if let Some(raw) = raw {
            let t = Instant::now();
            assert_eq!(raw.run().await, PAGE);
            if round >= 30 {
                driver.push(t.elapsed());
            }
        }
        if round >= 30 {
            http.push(took);
            plan.push(direct_took);
            engine_only.push(engine_took);
            floor.push(floor_took);
        }
    }
    http.sort();
    plan.sort();
    engine_only.sort();
    floor.sort();
    driver.sort();
    waves(engine, &store, &client, &url).await;
    merges(engine, &store, rows).await;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{engine}: curator page (first: {PAGE}, {rows} assignments), {SAMPLES} samples each");
    println!(
        "  over HTTP + GraphQL   median {:>7.3} ms   p99 {:>7.3} ms",
        ms(percentile(&http, 0.5)),
        ms(percentile(&http, 0.99))
    );
    println!(
        "  GraphQL in process    median {:>7.3} ms   p99 {:>7.3} ms   (no HTTP)",
        ms(percentile(&engine_only, 0.5)),
        ms(percentile(&engine_only, 0.99))
    );
    println!(
        "  {{ __typename }} HTTP  median {:>7.3} ms   p99 {:>7.3} ms   (the HTTP floor)",
        ms(percentile(&floor, 0.5)),
        ms(percentile(&floor, 0.99))
    );
    println!(
        "  direct plan (store)   median {:>7.3} ms   p99 {:>7.3} ms",
        ms(percentile(&plan, 0.5)),
        ms(percentile(&plan, 0.99))
    );
    // The reference: on Cassandra the plan straight through the driver, on
    // the embedded store the plan through the store seam (the engine is the
    // seam's implementation: there is nothing under it to call).
    let reference = if driver.is_empty() { &plan } else { &driver };
    if !driver.is_empty() {
        println!(
            "  direct plan (driver)  median {:>7.3} ms   p99 {:>7.3} ms",
            ms(percentile(&driver, 0.5)),
            ms(percentile(&driver, 0.99))
        );
    }
    let reference_name = if driver.is_empty() { "store" } else { "driver" };
    println!(
        "  ratio HTTP / direct   median x{:.2}   p99 x{:.2}   (direct: the {reference_name} plan)",
        ms(percentile(&http, 0.5)) / ms(percentile(reference, 0.5)),
        ms(percentile(&http, 0.99)) / ms(percentile(reference, 0.99))
    );
    println!(
        "BENCH|curator page, {engine} ({rows} rows): median over HTTP vs the direct {reference_name} plan|{:.2} ms|{:.2} ms|x{:.2}|<= x1.25",
        ms(percentile(&http, 0.5)),
        ms(percentile(reference, 0.5)),
        ms(percentile(&http, 0.5)) / ms(percentile(reference, 0.5)),
    );
    println!(
        "BENCH|curator page, {engine}: median of the same query run in process (no HTTP) vs the direct {reference_name} plan|{:.2} ms|{:.2} ms|x{:.2}|-",
        ms(percentile(&engine_only, 0.5)),
        ms(percentile(reference, 0.5)),
        ms(percentile(&engine_only, 0.5)) / ms(percentile(reference, 0.5)),
    );
    if !driver.is_empty() {
        println!(
            "BENCH|curator page, {engine}: median of the direct plan through the store seam vs straight through the driver|{:.2} ms|{:.2} ms|x{:.2}|-",
            ms(percentile(&plan, 0.5)),
            ms(percentile(&driver, 0.5)),
            ms(percentile(&plan, 0.5)) / ms(percentile(&driver, 0.5)),
        );
    }
    println!(
        "BENCH|HTTP floor, {engine}: median of {{ __typename }} over HTTP vs the curator page over HTTP|{:.2} ms|{:.2} ms|x{:.2}|-",
        ms(percentile(&floor, 0.5)),
        ms(percentile(&http, 0.5)),
        ms(percentile(&floor, 0.5)) / ms(percentile(&http, 0.5)),
    );
}

/// The first page of the status table (50 of a portal's SUGGESTED rows, 32
/// buckets): the engine's own merge (`Store::merged_slice`) against rounds
/// of `slice_many` (`buckets::merged_slice`, what Cassandra does), both
/// through the seam, interleaved. Only where the engine merges natively.
async fn merges(engine: &str, store: &DynStore, rows: usize) {
    use kartei::store::buckets::{all_buckets, merged_slice};
    if !store.merges_natively() {
        return;
    }
    let table = &kartei::domains::assignments::model::OBJECTS_KEYWORDS_STATUS;
    let partitions = all_buckets(&[PORTAL.into()]);
    let slice = kartei::store::Slice::partition(vec![])
        .prefix(vec![AssignmentStatus::Suggested.as_str().into()])
        .limit(PAGE);
    let (mut native, mut rounds) = (Vec::new(), Vec::new());
    for round in 0..(SAMPLES + 30) {
        let t = Instant::now();
        let a = store
            .merged_slice(table, &partitions, &slice)
            .await
            .expect("merge");
        let native_took = t.elapsed();
        let t = Instant::now();
        let b = merged_slice(store.as_ref(), table, &partitions, &slice)
            .await
            .expect("rounds");
        let rounds_took = t.elapsed();
        assert_eq!(a.rows.len(), PAGE);
        assert_eq!(a.next, b.next, "the two merges disagree");
        if round >= 30 {
            native.push(native_took);
            rounds.push(rounds_took);
        }
    }
    native.sort();
    rounds.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (n, r) = (us(percentile(&native, 0.5)), us(percentile(&rounds, 0.5)));
    println!(
        "  merged slice (32 buckets, first {PAGE})  engine's own {n:.0} µs, rounds of slice_many {r:.0} µs"
    );
    println!(
        "BENCH|merged slice of 32 buckets, {engine} ({rows} rows): the engine's own merge vs rounds of slice_many|{n:.0} µs|{r:.0} µs|x{:.2}|< x1",
        n / r
    );
}

fn main() {
    kartei::tune_allocator();
    let rows: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store: DynStore = Arc::new(Counted::new(
            kartei::store::embedded::EmbeddedStore::open(dir.path()).expect("embedded store"),
        ));
        run("embedded", store, rows, None).await;
        if let Ok(nodes) = std::env::var("KARTEI_BENCH_CASSANDRA") {
            let (keyspaces, store) = BenchKeyspaces::create(&nodes).await;
            let raw = RawPlan::new(&keyspaces.nodes, &keyspaces.env).await;
            run("cassandra", store, rows, Some(&raw)).await;
            keyspaces.drop_all().await;
        }
    });
}
