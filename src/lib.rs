//! kartei: a GraphQL API over Cassandra-family tables for a cultural-heritage
//! keyword vocabulary. The library builds everything (config -> store ->
//! services -> schema -> router); `main.rs` only parses the command line.

/// mimalloc instead of glibc's malloc, for every binary that links the
/// library (the server, the benches, the tests): under glibc, malloc and
/// free took about a third of the curator page's CPU (perf, 2026-12-06).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
