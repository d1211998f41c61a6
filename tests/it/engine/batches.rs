//! Atomic batches: every column type, range deletes, TTLs, all or nothing,
//! fifty at once, and bulk inserts that never overwrite.

use std::sync::Arc;
use std::time::Duration;

use kartei::store::{Cas, Condition, Mutation, Row, Slice, StoreError, Value};

use super::{PROBE, PROBE_DESC, fill, keys, probe};
use crate::both_engines;
use crate::support::{Engine, store, uid};

async fn ttl_expiry(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    s.apply(vec![
        // Cassandra counts expiry in whole seconds: a 1 s TTL written late in a
        // second can be gone before the next read, so the short one is 2 s.
        Mutation::Upsert {
            row: probe(&p, "short", 1),
            ttl: Some(2),
        },
        Mutation::Upsert {
            row: probe(&p, "long", 1),
            ttl: Some(3600),
        },
        Mutation::upsert(probe(&p, "forever", 1)),
    ])
    .await
    .unwrap();
    let key = |c1: &str| vec![Value::from(p.as_str()), c1.into(), Value::Int(1)];
    assert!(s.get(&PROBE, &key("short")).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(s.get(&PROBE, &key("short")).await.unwrap().is_none());
    assert!(s.get(&PROBE, &key("long")).await.unwrap().is_some());
    let rows = s
        .slice(&PROBE, &Slice::partition(vec![p.as_str().into()]))
        .await
        .unwrap()
        .rows;
    assert_eq!(keys(&rows), [("forever".into(), 1), ("long".into(), 1)]);
}

async fn a_failing_batch_leaves_nothing_behind(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    let broken = Row::new(&PROBE).set("p", p.as_str()).set("c1", "x"); // c2 (a key column) missing
    let r = s
        .apply(vec![
            Mutation::upsert(probe(&p, "a", 1)),
            Mutation::upsert(probe(&p, "b", 1)),
            Mutation::upsert(broken),
        ])
        .await;
    assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    let wrong_type = Row::new(&PROBE)
        .set("p", p.as_str())
        .set("c1", "y")
        .set("c2", "not an int");
    assert!(
        s.apply(vec![
            Mutation::upsert(probe(&p, "c", 1)),
            Mutation::upsert(wrong_type)
        ])
        .await
        .is_err()
    );
    let rows = s
        .slice(&PROBE, &Slice::partition(vec![p.as_str().into()]))
        .await
        .unwrap()
        .rows;
    assert!(rows.is_empty(), "a failed batch wrote {rows:?}");
}

async fn batches_write_all_types_and_delete_ranges(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    fill(s, &p).await;
    let full = probe(&p, "a", 1)
        .set("n", -42i64)
        .set("d", 0.25)
        .set("b", true)
        .set("l", vec!["München".to_owned(), "x\0y".to_owned()]);
    s.apply(vec![Mutation::upsert(full.clone())]).await.unwrap();
    let got = s.get(&PROBE, &full.key().unwrap()).await.unwrap().unwrap();
    assert_eq!(got, full);
    // An empty list is null on both engines (Cassandra has no empty
    // collection), also when a compare-and-set writes it.
    let empty = probe(&p, "a", 9).set("l", Vec::<String>::new());
    s.apply(vec![Mutation::upsert(empty.clone())])
        .await
        .unwrap();
    let got = s.get(&PROBE, &empty.key().unwrap()).await.unwrap().unwrap();
    assert_eq!(got.get("l"), None);
    assert_eq!(got.text_list("l"), Vec::<String>::new());
    s.apply(vec![Mutation::delete(&PROBE, empty.key().unwrap())])
        .await
        .unwrap();
    let inserted = s
        .cas(Cas {
            row: empty.clone(),
            condition: Condition::NotExists,
            ttl: None,
        })
        .await
        .unwrap();
    assert!(inserted.applied);
    let got = s.get(&PROBE, &empty.key().unwrap()).await.unwrap().unwrap();
    assert_eq!(got.get("l"), None);
    s.apply(vec![Mutation::delete(&PROBE, empty.key().unwrap())])
        .await
        .unwrap();
    // An upsert replaces the whole row.
    s.apply(vec![Mutation::upsert(probe(&p, "a", 1))])
        .await
        .unwrap();
    let got = s.get(&PROBE, &full.key().unwrap()).await.unwrap().unwrap();
    assert_eq!(got.bigint("n"), None);
    // Delete one clustering prefix, then one row.
    s.apply(vec![
        Mutation::delete(&PROBE, vec![p.as_str().into(), "b".into()]),
        Mutation::delete(&PROBE, vec![p.as_str().into(), "c".into(), Value::Int(2)]),
    ])
    .await
    .unwrap();
    let rows = s
        .slice(&PROBE, &Slice::partition(vec![p.as_str().into()]))
        .await
        .unwrap()
        .rows;
    assert_eq!(
        keys(&rows),
        [
            ("a".into(), 1),
            ("a".into(), 2),
            ("a".into(), 3),
            ("c".into(), 1),
            ("c".into(), 3)
        ]
    );
    s.apply(vec![Mutation::delete(&PROBE, vec![p.as_str().into()])])
        .await
        .unwrap();
    assert!(
        s.slice(&PROBE, &Slice::partition(vec![p.as_str().into()]))
            .await
            .unwrap()
            .rows
            .is_empty()
    );
}

async fn fifty_concurrent_batches_all_land(engine: Engine) {
    let ts = store(engine).await;
    let s = ts.store.clone();
    let p = uid();
    // Concurrent writers (grouped into shared commits on the embedded store):
    // every acknowledged batch is there, whole.
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let s = Arc::clone(&s);
            let p = p.clone();
            tokio::spawn(async move {
                let batch = (0..4)
                    .map(|j| Mutation::upsert(probe(&p, &format!("w{i:02}"), j)))
                    .collect();
                s.apply(batch).await
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let page = s
        .slice(
            &PROBE,
            &Slice::partition(vec![p.as_str().into()]).limit(1000),
        )
        .await
        .unwrap();
    assert_eq!(page.rows.len(), 200);
}

async fn bulk_inserts_never_overwrite_and_heal_what_they_find(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    // "a/1" exists (a curator's value); "b/1" and "c/1" are new. Each row
    // carries a companion row in PROBE_DESC (as a base row carries its query rows).
    s.apply(vec![Mutation::upsert(
        probe(&p, "a", 1).set("v", "curated"),
    )])
    .await
    .unwrap();
    let companion = |t: i64, v: &str| {
        Mutation::upsert(
            Row::new(&PROBE_DESC)
                .set("p", p.as_str())
                .set("t", t)
                .set("v", v),
        )
    };
    let inserts = vec![
        (
            probe(&p, "a", 1).set("v", "imported"),
            vec![companion(1, "a")],
        ),
        (probe(&p, "b", 1), vec![companion(2, "b")]),
        (probe(&p, "c", 1), vec![companion(3, "c")]),
    ];
    let pp = p.clone();
    let heal: kartei::store::Heal = Arc::new(move |found: &Row| {
        vec![Mutation::upsert(
            Row::new(&PROBE_DESC)
                .set("p", pp.as_str())
                .set("t", 1i64)
                .set("v", format!("healed from {}", found.string("v"))),
        )]
    });
    let found = s.insert_new(inserts, heal).await.unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!(found[0].as_ref().unwrap().string("v"), "curated");
    assert!(found[1].is_none() && found[2].is_none());
    let k = |c1: &str| vec![Value::from(p.as_str()), c1.into(), Value::Int(1)];
    let got = s.get_many(&PROBE, &[k("a"), k("b"), k("c")]).await.unwrap();
    assert_eq!(got[0].as_ref().unwrap().string("v"), "curated");
    assert_eq!(got[1].as_ref().unwrap().string("v"), "b/1");
    let comp = s
        .slice(&PROBE_DESC, &Slice::partition(vec![p.as_str().into()]))
        .await
        .unwrap();
    let comp: Vec<String> = comp.rows.iter().map(|r| r.string("v")).collect();
    assert_eq!(comp, ["c", "b", "healed from curated"]);

    // A second run finds what the first wrote and writes nothing of its own.
    let again = vec![(probe(&p, "b", 1).set("v", "late import"), vec![])];
    let noop: kartei::store::Heal = Arc::new(|_: &Row| Vec::new());
    let found = s.insert_new(again, noop.clone()).await.unwrap();
    assert_eq!(found[0].as_ref().unwrap().string("v"), "b/1");
    assert_eq!(
        s.get(&PROBE, &k("b")).await.unwrap().unwrap().string("v"),
        "b/1"
    );
    assert!(s.insert_new(Vec::new(), noop).await.unwrap().is_empty());
}

both_engines!(
    ttl_expiry,
    a_failing_batch_leaves_nothing_behind,
    batches_write_all_types_and_delete_ranges,
    fifty_concurrent_batches_all_land,
    bulk_inserts_never_overwrite_and_heal_what_they_find,
);
