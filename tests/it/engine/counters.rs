//! Counters: adds from many writers at once sum exactly, go with a batch's
//! other writes and with a compare-and-set's follow-up writes, and a counter
//! table takes nothing but adds.

use std::sync::Arc;

use kartei::store::{Cas, Condition, Mutation, Row, Slice, StoreError, Value};

use super::{PROBE, PROBE_COUNT, probe};
use crate::both_engines;
use crate::support::{Engine, store, uid};

fn add(p: &str, name: &str, by: i64) -> Mutation {
    Mutation::Add {
        table: &PROBE_COUNT,
        key: vec![p.into(), name.into()],
        column: "n",
        by,
    }
}

async fn counts(s: &kartei::store::DynStore, p: &str) -> Vec<(String, i64)> {
    s.slice(&PROBE_COUNT, &Slice::partition(vec![p.into()]))
        .await
        .unwrap()
        .rows
        .iter()
        .map(|r| (r.string("name"), r.bigint("n").unwrap_or(0)))
        .collect()
}

async fn concurrent_adds_sum_exactly(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    // Forty writers at once, each moving one from "from" to "to" in a batch
    // that also writes a row.
    let writes = (0..40).map(|i| {
        let s = s.clone();
        let p = p.clone();
        async move {
            s.apply(vec![
                Mutation::upsert(probe(&p, "row", i)),
                add(&p, "from", -1),
                add(&p, "to", 1),
            ])
            .await
        }
    });
    for r in futures::future::join_all(writes).await {
        r.unwrap();
    }
    s.apply(vec![add(&p, "from", 40), add(&p, "other", 7)])
        .await
        .unwrap();
    assert_eq!(
        counts(s, &p).await,
        [("from".into(), 0), ("other".into(), 7), ("to".into(), 40)]
    );
    let rows = s
        .slice(&PROBE, &Slice::partition(vec![p.as_str().into()]))
        .await
        .unwrap()
        .rows;
    assert_eq!(rows.len(), 40);
}

async fn a_compare_and_set_counts_once_when_it_applies(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    let counted = p.clone();
    let then: kartei::store::Heal = Arc::new(move |_: &Row| vec![add(&counted, "applied", 1)]);
    let cas = || Cas {
        row: probe(&p, "once", 1),
        condition: Condition::NotExists,
        ttl: None,
    };
    assert!(s.cas_then(cas(), then.clone()).await.unwrap().applied);
    assert!(!s.cas_then(cas(), then.clone()).await.unwrap().applied);
    let moved = Cas {
        row: probe(&p, "once", 1).set("v", "moved"),
        condition: Condition::Equals(vec![("v", Some(Value::from("once/1")))]),
        ttl: None,
    };
    assert!(
        s.cas_then(moved.clone(), then.clone())
            .await
            .unwrap()
            .applied
    );
    assert!(!s.cas_then(moved, then).await.unwrap().applied);
    assert_eq!(counts(s, &p).await, [("applied".into(), 2)]);
}

async fn a_counter_table_takes_adds_only(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    let upsert = Row::new(&PROBE_COUNT)
        .set("p", p.as_str())
        .set("name", "x")
        .set("n", 3i64);
    let r = s.apply(vec![Mutation::upsert(upsert)]).await;
    assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    // Not a counter column; no whole key; refused before anything is written.
    let r = s
        .apply(vec![
            add(&p, "kept out", 1),
            Mutation::Add {
                table: &PROBE,
                key: vec![p.as_str().into(), "a".into(), Value::Int(1)],
                column: "n",
                by: 1,
            },
        ])
        .await;
    assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    let r = s
        .apply(vec![Mutation::Add {
            table: &PROBE_COUNT,
            key: vec![p.as_str().into()],
            column: "n",
            by: 1,
        }])
        .await;
    assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    assert!(counts(s, &p).await.is_empty());
}

both_engines!(
    concurrent_adds_sum_exactly,
    a_compare_and_set_counts_once_when_it_applies,
    a_counter_table_takes_adds_only,
);
