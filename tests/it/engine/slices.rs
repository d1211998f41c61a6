//! Reading a partition: clustering order both ways, prefixes and bounds, and
//! many keys at once.

use kartei::store::{Bound, Mutation, Row, Slice, Value};

use super::{PROBE, PROBE_DESC, fill, keys};
use crate::both_engines;
use crate::support::{Engine, store, uid};

async fn clustering_order_ascending_and_descending(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    fill(s, &p).await;
    let all = s
        .slice(
            &PROBE,
            &Slice::partition(vec![p.as_str().into()]).limit(100),
        )
        .await
        .unwrap();
    assert_eq!(
        keys(&all.rows)[..4],
        [
            ("a".into(), 1),
            ("a".into(), 2),
            ("a".into(), 3),
            ("b".into(), 1)
        ]
    );
    assert!(all.next.is_none());
    let rev = s
        .slice(
            &PROBE,
            &Slice::partition(vec![p.as_str().into()])
                .reverse(true)
                .limit(2),
        )
        .await
        .unwrap();
    assert_eq!(keys(&rev.rows), [("c".into(), 3), ("c".into(), 2)]);

    // A descending table returns newest first; reversed, oldest first.
    let mut batch = Vec::new();
    for t in [5i64, -3, 10, 0] {
        batch.push(Mutation::upsert(
            Row::new(&PROBE_DESC)
                .set("p", p.as_str())
                .set("t", t)
                .set("v", "x"),
        ));
    }
    s.apply(batch).await.unwrap();
    let desc = s
        .slice(
            &PROBE_DESC,
            &Slice::partition(vec![p.as_str().into()]).limit(10),
        )
        .await
        .unwrap();
    let ts_: Vec<i64> = desc.rows.iter().map(|r| r.bigint("t").unwrap()).collect();
    assert_eq!(ts_, [10, 5, 0, -3]);
    let asc = s
        .slice(
            &PROBE_DESC,
            &Slice::partition(vec![p.as_str().into()])
                .reverse(true)
                .limit(10),
        )
        .await
        .unwrap();
    let ts_: Vec<i64> = asc.rows.iter().map(|r| r.bigint("t").unwrap()).collect();
    assert_eq!(ts_, [-3, 0, 5, 10]);
    // Bounds are in value order, whatever the clustering order.
    let mid = s
        .slice(
            &PROBE_DESC,
            &Slice::partition(vec![p.as_str().into()])
                .lower(Bound::Inclusive(Value::BigInt(0)))
                .upper(Bound::Exclusive(Value::BigInt(10)))
                .limit(10),
        )
        .await
        .unwrap();
    let ts_: Vec<i64> = mid.rows.iter().map(|r| r.bigint("t").unwrap()).collect();
    assert_eq!(ts_, [5, 0]);
}

async fn slices_with_prefix_and_bounds(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    fill(s, &p).await;
    let base = || Slice::partition(vec![p.as_str().into()]).limit(100);
    let b = s
        .slice(&PROBE, &base().prefix(vec!["b".into()]))
        .await
        .unwrap();
    assert_eq!(
        keys(&b.rows),
        [("b".into(), 1), ("b".into(), 2), ("b".into(), 3)]
    );
    let b23 = s
        .slice(
            &PROBE,
            &base()
                .prefix(vec!["b".into()])
                .lower(Bound::Exclusive(Value::Int(1))),
        )
        .await
        .unwrap();
    assert_eq!(keys(&b23.rows), [("b".into(), 2), ("b".into(), 3)]);
    let ab = s
        .slice(
            &PROBE,
            &base()
                .lower(Bound::Inclusive("a".into()))
                .upper(Bound::Exclusive("c".into())),
        )
        .await
        .unwrap();
    assert_eq!(ab.rows.len(), 6);
    let upto_b = s
        .slice(
            &PROBE,
            &base().upper(Bound::Inclusive("b".into())).reverse(true),
        )
        .await
        .unwrap();
    assert_eq!(keys(&upto_b.rows)[0], ("b".into(), 3));
    assert_eq!(upto_b.rows.len(), 6);
    let none = s
        .slice(&PROBE, &base().lower(Bound::Exclusive("c".into())))
        .await
        .unwrap();
    assert!(none.rows.is_empty());
}

async fn multi_key_reads_keep_order_and_report_missing(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    fill(s, &p).await;
    let k = |c1: &str, c2: i32| vec![Value::from(p.as_str()), c1.into(), Value::Int(c2)];
    let got = s
        .get_many(&PROBE, &[k("c", 3), k("zz", 1), k("a", 2)])
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].as_ref().unwrap().string("v"), "c/3");
    assert!(got[1].is_none());
    assert_eq!(got[2].as_ref().unwrap().string("v"), "a/2");
    assert!(s.get_many(&PROBE, &[]).await.unwrap().is_empty());
}

both_engines!(
    clustering_order_ascending_and_descending,
    slices_with_prefix_and_bounds,
    multi_key_reads_keep_order_and_report_missing,
);
