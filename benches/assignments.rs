//! Benchmark (not a test): the first page of
//! `assignments(portalId, status: SUGGESTED, first: 50)` on the embedded engine
//! as one portal grows from 10,000 to 1,000,000 assignments. Reports the
//! median latency and the rows read per page at each size, and the ratios
//! between the largest and the smallest size.
//!
//! Then the queue as the UI opens it at the largest size: the first page of
//! both review statuses and the portal's counts (`assignmentCounts`, read
//! from the counters), against counting the portal's rows by reading them
//! all (what counts without counters cost), in the same run.
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
    Assignment, AssignmentKey, AssignmentStatus, AssignmentType, OBJECTS_KEYWORDS, count_moves,
};
use kartei::domains::assignments::service::Assignments;
use kartei::domains::themes::service::{CategoryInput, Themes};
use kartei::kernel::roles::{Principal, Role};
use kartei::store::buckets::all_buckets;
use kartei::store::embedded::EmbeddedStore;
use kartei::store::{Counted, DynStore, Mutation};
use kartei::store::{Slice, pages};

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
            batch.extend(count_moves(&a.key, None, a.status));
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

/// Median of `samples` runs of `f`.
async fn median<F, Fut>(samples: usize, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        f().await;
        times.push(t.elapsed());
    }
    times.sort();
    times[samples / 2]
}

/// The queue as the UI opens it: both review statuses' first pages and the
/// counts, at once.
async fn open_queue(service: &Assignments, size: usize) {
    let (suggested, auto, counts) = futures::join!(
        service.list(PORTAL, Some(AssignmentStatus::Suggested), None, PAGE, None),
        service.list(
            PORTAL,
            Some(AssignmentStatus::Autosuggested),
            None,
            PAGE,
            None
        ),
        service.counts(PORTAL),
    );
    assert_eq!(suggested.expect("page").items.len(), PAGE);
    assert_eq!(auto.expect("page").items.len(), PAGE);
    let total: i64 = counts.expect("counts").iter().map(|c| c.count).sum();
    assert_eq!(total, size as i64);
}

/// The portal's assignments counted by reading every one of them.
async fn count_by_reading(store: &DynStore, size: usize) {
    let mut n = 0;
    for partition in all_buckets(&[PORTAL.into()]) {
        let slice = Slice::partition(partition).limit(1_000);
        let mut rows = std::pin::pin!(pages(store.as_ref(), &OBJECTS_KEYWORDS, slice));
        while let Some(page) = futures::TryStreamExt::try_next(&mut rows)
            .await
            .expect("page")
        {
            n += page.rows.len();
        }
    }
    assert_eq!(n, size);
}

fn main() {
    kartei::tune_allocator();
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
        Themes::new(store.clone())
            .upsert_category(
                &Principal::local("bench", &[Role::Admin]),
                CategoryInput {
                    id: PORTAL.into(),
                    label: "Bench".into(),
                    ..Default::default()
                },
            )
            .await
            .expect("portal");
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
        let queue = median(50, || open_queue(&service, loaded)).await;
        let reading = median(5, || count_by_reading(&store, loaded)).await;
        println!(
            "the queue opening at {loaded} rows (two first pages and the counts): {:.2} ms median; counting by reading every row: {:.2} ms",
            queue.as_secs_f64() * 1e3,
            reading.as_secs_f64() * 1e3
        );
        println!(
            "BENCH|queue opens at {loaded} rows, embedded: first pages of both review statuses and the counts vs counting by reading the rows (median)|{:.2} ms|{:.2} ms|x{:.3}|< 300 ms",
            queue.as_secs_f64() * 1e3,
            reading.as_secs_f64() * 1e3,
            queue.as_secs_f64() / reading.as_secs_f64(),
        );
    });
}
