//! kartei: a GraphQL API over Cassandra-family tables for a cultural-heritage
//! keyword vocabulary. The library builds everything (config -> store ->
//! services -> schema -> router); `main.rs` only parses the command line.

/// mimalloc instead of glibc's malloc, for every binary that links the
/// library (the server, the benches, the tests): under glibc, malloc and
/// free took about a third of the curator page's CPU (perf, 2026-12-06).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Options of mimalloc 3's `mi_option_e` (the Rust binding names only some):
/// `mi_option_purge_delay` and `mi_option_arena_purge_mult`.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_ARENA_PURGE_MULT: libmimalloc_sys::mi_option_t = 24;
/// How long memory mimalloc no longer uses stays with the process before it
/// goes back to the system (ms).
const PURGE_DELAY_MS: std::ffi::c_long = 10;
/// How often a thread of its own gives back what waited longer than that,
/// for when every other thread is idle.
const PURGE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Sets the allocator up for a long-running process: `main` calls it first,
/// and so do the benchmarks, which stand for the server and the batch
/// commands and so measure them as they run (once per process; later calls
/// do nothing).
///
/// Chunks of binaries pass through buffers of about 1 MiB and an image
/// scaling decodes hundreds of MiB; with its defaults mimalloc keeps freed
/// memory for ten seconds (purge delay 1 s x arena multiplier 10), and
/// longer when every thread then idles (measured with
/// scripts/measure-memory.sh: 592 MiB still resident after the 8192x8192
/// scaling, +97 MiB for a 200 MB upload). Purged at once (delay 0) that was
/// 113 MiB, +85 MiB, but every page a request freed went back to the system
/// with a TLB shootdown and came back zeroed: about 8% of the server's CPU
/// under the peer bench's page load (perf, 2026-12-07). So: purged after
/// 10 ms, which a request's pages reused within that time never are, and a
/// thread of its own purges twice a second for when all the others idle.
///
/// Transparent huge pages stay allowed. Without them (`MIMALLOC_ALLOW_THP=0`)
/// the crawl bench's fresh memory faults in 4 KiB pages instead of zeroed
/// 2 MiB ones (1,260 -> 10,304 faults, 6% less CPU, its tiny images about
/// 5-9% more URLs/s), but the four derivatives of a 24 MP JPEG took 2-4%
/// longer (305 -> 309-314 ms; 2026-12-08): real crawls fetch photos.
pub fn tune_allocator() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[allow(unsafe_code)]
        // SAFETY: sets two of mimalloc's options (numbers as in the mimalloc
        // 3 that libmimalloc-sys 0.1.49 builds), which it reads atomically.
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
            libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_PURGE_MULT, 1);
        }
        let _ = std::thread::Builder::new()
            .name("kartei-purge".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(PURGE_EVERY);
                    #[allow(unsafe_code)]
                    // SAFETY: mi_collect may be called from any thread at any time.
                    unsafe {
                        libmimalloc_sys::mi_collect(false)
                    };
                }
            });
    });
}

// The layers, from the bottom up: each imports only from those above it in
// this list (a test in tests/it/layers.rs reads the sources and keeps it so).
pub mod api;
pub mod app;
pub mod domains;
pub mod edge;
pub mod kernel;
pub mod store;

/// The cluster schema, one file per keyspace (the source of truth for `migrate`).
pub const CQL_FILES: &[(&str, &str)] = &[
    ("cql/themes.cql", include_str!("../cql/themes.cql")),
    ("cql/target.cql", include_str!("../cql/target.cql")),
    ("cql/binaries.cql", include_str!("../cql/binaries.cql")),
    (
        "cql/suggestions.cql",
        include_str!("../cql/suggestions.cql"),
    ),
    ("cql/crawl.cql", include_str!("../cql/crawl.cql")),
];

/// The demo vocabulary loaded by `serve --demo`.
pub const DEMO_VOCABULARY: &str = include_str!("../demo/vocabulary.ndjson");

/// Machine suggestions for three of the demo portals (Weimarer Republik,
/// Sport, Musik), loaded with the demo vocabulary so that the curators' UI has
/// a queue to review.
pub const DEMO_ASSIGNMENTS: &str = include_str!("../demo/assignments.ndjson");

/// What the catalogue says of the demo objects (titles and institutions,
/// made up; no images, so the demo fetches nothing), all but four, which show
/// an object nobody has described.
pub const DEMO_OBJECTS: &str = include_str!("../demo/objects.ndjson");

pub use domains::tables;

#[cfg(test)]
mod tests {
    use super::store;

    /// The embedded engine's keys begin with a table id hashed from the
    /// table's name; two tables with one id would share rows.
    #[test]
    fn every_table_has_its_own_id_in_keys() {
        let mut ids = std::collections::HashMap::new();
        for t in super::tables() {
            let id = store::table_id(t);
            if let Some(other) = ids.insert(id, t.qualified()) {
                panic!("{} and {} share the table id {id:?}", t.qualified(), other);
            }
        }
        assert!(ids.len() > 40);
    }
}
