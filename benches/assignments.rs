//! Benchmark (not a test): the first page of
//! `assignments(portalId, status: SUGGESTED, first: 50)` on the embedded engine
//! as one portal grows from 10,000 to 1,000,000 assignments. Reports the
//! median latency and the rows read per page at each size, and the ratios
//! between the largest and the smallest size.
//!
//! Run: `cargo bench --bench assignments` (optionally `-- 1000000` for the
//! largest size; the store goes to a temporary directory).
//!
//! The rows are written in bulk batches of base row plus its five query rows
//! (the rows `suggestAssignment` writes, without one LWT per row), because the
//! benchmark measures reading.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kartei::domains::assignments::model::{
    Assignment, AssignmentKey, AssignmentStatus, AssignmentType, OBJECTS_KEYWORDS,
};
use kartei::domains::assignments::service::Assignments;
use kartei::store::embedded::EmbeddedStore;
use kartei::store::{Counted, DynStore, Mutation, Store};

const PORTAL: &str = "c-bench";
const PAGE: usize = 50;
const SAMPLES: usize = 200;

fn assignment(i: usize) -> Assignment {
    let status = match i % 3 {
        0 => AssignmentStatus::Autosuggested,
        1 => AssignmentStatus::Suggested,
        _ => AssignmentStatus::Accepted,
    };
    Assignment {
        key: AssignmentKey {
            portal_id: PORTAL.into(),
            // Spread over the id space so every size has early and late ids.
            ddb_id: format!("DDB{:010}", (i as u64 * 2_654_435_761) % 10_000_000_000),
            keyword_id: format!("k-{:04}", i % 400),
            creator: ["bot", "carla", "archiv"][i % 3].into(),
        },
        child_category_id: "c-bench-orte".into(),
        assignment_type: AssignmentType::Machine,
        status,
        created_at: "2026-12-02T12:00:00Z".into(),
        modified_at: "2026-12-02T12:00:00Z".into(),
        confidence: Some(0.5),
    }
}

async fn load(store: &DynStore, from: usize, to: usize) {
    let mut i = from;
    while i < to {
        let end = (i + 2_000).min(to);
        let mut batch = Vec::with_capacity((end - i) * 6);
        for n in i..end {
            let a = assignment(n);
            batch.push(Mutation::upsert(a.row(&OBJECTS_KEYWORDS)));
            batch.extend(a.view_rows().into_iter().map(Mutation::upsert));
        }
        store.apply(batch).await.expect("bulk write");
        i = end;
    }
}

struct Measure {
    size: usize,
    median: Duration,
    p90: Duration,
    rows_read: f64,
    round_trips: f64,
}

async fn measure(service: &Assignments, store: &DynStore, size: usize) -> Measure {
    let mut times = Vec::with_capacity(SAMPLES);
    let (rows0, calls0) = (store.rows_read(), store.round_trips());
    for _ in 0..SAMPLES {
        let t = Instant::now();
        let page = service
            .list(PORTAL, Some(AssignmentStatus::Suggested), None, PAGE, None)
            .await
            .expect("page");
        times.push(t.elapsed());
        assert_eq!(page.items.len(), PAGE);
        assert!(
            page.items
                .iter()
                .all(|(_, a)| a.status == AssignmentStatus::Suggested)
        );
    }
    times.sort();
    Measure {
        size,
        median: times[SAMPLES / 2],
        p90: times[SAMPLES * 9 / 10],
        rows_read: (store.rows_read() - rows0) as f64 / SAMPLES as f64,
        round_trips: (store.round_trips() - calls0) as f64 / SAMPLES as f64,
    }
}

fn main() {
    let largest: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store: DynStore = Arc::new(Counted::new(
            EmbeddedStore::open(dir.path()).expect("embedded store"),
        ));
        let service = Assignments::new(store.clone());
        let mut sizes = vec![10_000, 100_000, largest];
        sizes.retain(|s| *s <= largest);
        sizes.dedup();
        let mut loaded = 0;
        let mut results = Vec::new();
        for size in sizes {
            let t = Instant::now();
            load(&store, loaded, size).await;
            eprintln!(
                "loaded {} assignments in {:.1} s",
                size - loaded,
                t.elapsed().as_secs_f64()
            );
            loaded = size;
            // Warm up, then measure.
            measure(&service, &store, size).await;
            results.push(measure(&service, &store, size).await);
        }
        println!(
            "first page of assignments(status: SUGGESTED, first: {PAGE}), embedded engine, {SAMPLES} samples"
        );
        println!(
            "{:>10} {:>12} {:>12} {:>14} {:>12}",
            "rows", "median", "p90", "rows read/page", "round trips"
        );
        for m in &results {
            println!(
                "{:>10} {:>9.3} ms {:>9.3} ms {:>14.1} {:>12.1}",
                m.size,
                m.median.as_secs_f64() * 1e3,
                m.p90.as_secs_f64() * 1e3,
                m.rows_read,
                m.round_trips
            );
        }
        if let (Some(small), Some(large)) = (results.first(), results.last()) {
            println!(
                "ratio {} / {} rows: median latency x{:.2}, rows read x{:.2}",
                large.size,
                small.size,
                large.median.as_secs_f64() / small.median.as_secs_f64(),
                large.rows_read / small.rows_read
            );
            println!(
                "BENCH|first page of assignments, embedded: {} vs {} rows (median)|{:.2} ms|{:.2} ms|x{:.2}|<= x1.5 (flat)",
                large.size,
                small.size,
                large.median.as_secs_f64() * 1e3,
                small.median.as_secs_f64() * 1e3,
                large.median.as_secs_f64() / small.median.as_secs_f64(),
            );
        }
    });
}
