//! Whole tables: scans page through them, and the CQL files declare what the
//! Rust declarations do.

use kartei::store::{Mutation, Row, Scan, Slice, StoreError};

use super::PROBE_DESC;
use crate::both_engines;
use crate::support::{Engine, store, uid};

async fn scans_page_through_a_table(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    s.apply(vec![Mutation::upsert(
        Row::new(&PROBE_DESC).set("p", p.as_str()).set("t", 1i64),
    )])
    .await
    .unwrap();
    let mut after = None;
    let mut found = false;
    let mut pages = 0;
    loop {
        let page = s.scan(&PROBE_DESC, Scan { after, limit: 2 }).await.unwrap();
        pages += 1;
        found |= page.rows.iter().any(|r| r.string("p") == p);
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
        assert!(pages < 10_000);
    }
    assert!(found);
    // A slice's cursor does not continue a scan.
    let slice_cursor = s
        .slice(
            &PROBE_DESC,
            &Slice::partition(vec![p.as_str().into()]).limit(1),
        )
        .await
        .unwrap()
        .cursors
        .remove(0);
    assert!(matches!(
        s.scan(
            &PROBE_DESC,
            Scan {
                after: Some(slice_cursor),
                limit: 2
            }
        )
        .await,
        Err(StoreError::BadCursor)
    ));
}

both_engines!(scans_page_through_a_table);

/// The `cql/*.cql` files and the Rust table declarations describe the same tables.
#[test]
fn cql_files_match_the_table_declarations() {
    if crate::support::cassandra_off() {
        return;
    }
    crate::support::run(async {
        let cluster = crate::support::cluster().await;
        for table in kartei::tables() {
            let on_node = cluster.engine.describe(table).await.unwrap();
            let mut declared: Vec<(String, String)> = table
                .all_columns()
                .map(|c| (c.name.to_owned(), c.ty.cql().to_owned()))
                .collect();
            declared.sort();
            assert_eq!(on_node, declared, "{}", table.name);
        }
    });
}
