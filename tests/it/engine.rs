//! The engine suite: the same behaviour of the table API on both engines.

use std::sync::Arc;
use std::time::Duration;

use kartei::store::ColumnType::{BigInt, Boolean, Double, Int, Text, TextList};
use kartei::store::{
    Bound, Cas, Condition, Cursor, Keyspace, Mutation, Order, Row, Slice, StoreError, Table, Value,
    col,
};

use crate::both_engines;
use crate::support::{Engine, store, uid};

static PROBE: Table = Table {
    keyspace: Keyspace::Themes,
    name: "engine_probe",
    partition_key: &[col("p", Text)],
    clustering: &[(col("c1", Text), Order::Asc), (col("c2", Int), Order::Asc)],
    columns: &[
        col("v", Text),
        col("n", BigInt),
        col("d", Double),
        col("b", Boolean),
        col("l", TextList),
    ],
};

static PROBE_DESC: Table = Table {
    keyspace: Keyspace::Themes,
    name: "engine_probe_desc",
    partition_key: &[col("p", Text)],
    clustering: &[(col("t", BigInt), Order::Desc)],
    columns: &[col("v", Text)],
};

pub static PROBE_TABLES: &[&Table] = &[&PROBE, &PROBE_DESC];

fn probe(p: &str, c1: &str, c2: i32) -> Row {
    Row::new(&PROBE)
        .set("p", p)
        .set("c1", c1)
        .set("c2", c2)
        .set("v", format!("{c1}/{c2}"))
}

fn keys(rows: &[Row]) -> Vec<(String, i32)> {
    rows.iter()
        .map(|r| (r.string("c1"), r.int("c2").unwrap()))
        .collect()
}

async fn fill(s: &kartei::store::DynStore, p: &str) {
    let mut batch = Vec::new();
    for c1 in ["a", "b", "c"] {
        for c2 in 1..=3 {
            batch.push(Mutation::upsert(probe(p, c1, c2)));
        }
    }
    s.apply(batch).await.unwrap();
}

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

/// A cursor's text with its key values edited: `edit` gets each value's
/// JSON texts (the inner value of each, whatever its type tag) to rewrite.
fn edit_cursor(text: &str, edit: impl Fn(&mut Vec<String>)) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let body = text.strip_prefix("1.").expect("a version 1 cursor");
    let mut v: serde_json::Value = serde_json::from_slice(&b64.decode(body).unwrap()).unwrap();
    let k = v
        .as_object_mut()
        .and_then(|o| o.values_mut().next())
        .and_then(|p| p.get_mut("k"))
        .and_then(|k| k.as_array_mut())
        .expect("a key position");
    // Each key value is a text somewhere in its JSON: edit that text.
    let mut texts: Vec<String> = k
        .iter()
        .map(|x| serde_json::to_string(&find_text(x)).unwrap())
        .collect();
    edit(&mut texts);
    for (x, t) in k.iter_mut().zip(&texts) {
        set_text(x, serde_json::from_str(t).unwrap());
    }
    format!("1.{}", b64.encode(serde_json::to_vec(&v).unwrap()))
}

fn find_text(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(o) => o.values().next().map(find_text).unwrap_or_default(),
        other => other.clone(),
    }
}

fn set_text(v: &mut serde_json::Value, to: serde_json::Value) {
    match v {
        serde_json::Value::Object(o) => {
            if let Some(inner) = o.values_mut().next() {
                set_text(inner, to)
            }
        }
        other => *other = to,
    }
}

async fn cursors_round_trip_and_forged_ones_are_rejected(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    fill(s, &p).await;
    for reverse in [false, true] {
        for bounded in [false, true] {
            let mk = |after: Option<Cursor>| {
                let mut sl = Slice::partition(vec![p.as_str().into()])
                    .reverse(reverse)
                    .limit(2)
                    .after(after);
                if bounded {
                    sl = sl.upper(Bound::Inclusive("b".into()));
                }
                sl
            };
            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let page = s.slice(&PROBE, &mk(after)).await.unwrap();
                assert_eq!(page.cursors.len(), page.rows.len());
                seen.extend(keys(&page.rows));
                match page.next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
            let mut expected: Vec<(String, i32)> = ["a", "b", "c"]
                .iter()
                .filter(|c| !bounded || **c != "c")
                .flat_map(|c| (1..=3).map(move |i| (c.to_string(), i)))
                .collect();
            if reverse {
                expected.reverse();
            }
            assert_eq!(seen, expected, "reverse={reverse} bounded={bounded}");
        }
    }
    // One clustering column (descending), a bound and a cursor together.
    let mut batch = Vec::new();
    for t in 1..=5i64 {
        batch.push(Mutation::upsert(
            Row::new(&PROBE_DESC).set("p", p.as_str()).set("t", t),
        ));
    }
    s.apply(batch).await.unwrap();
    for reverse in [false, true] {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let sl = Slice::partition(vec![p.as_str().into()])
                .upper(Bound::Inclusive(4i64.into()))
                .lower(Bound::Exclusive(1i64.into()))
                .reverse(reverse)
                .limit(1)
                .after(after);
            let page = s.slice(&PROBE_DESC, &sl).await.unwrap();
            seen.extend(page.rows.iter().map(|r| r.bigint("t").unwrap()));
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        let expected: Vec<i64> = if reverse {
            vec![2, 3, 4]
        } else {
            vec![4, 3, 2]
        };
        assert_eq!(seen, expected, "reverse={reverse}");
    }
    // A cursor continues after its own row.
    let first = s
        .slice(&PROBE, &Slice::partition(vec![p.as_str().into()]).limit(9))
        .await
        .unwrap();
    let from_third = s
        .slice(
            &PROBE,
            &Slice::partition(vec![p.as_str().into()])
                .limit(1)
                .after(Some(first.cursors[2].clone())),
        )
        .await
        .unwrap();
    assert_eq!(keys(&from_third.rows), [("b".into(), 1)]);

    let page = s
        .slice(&PROBE, &Slice::partition(vec![p.as_str().into()]).limit(2))
        .await
        .unwrap();
    let cursor = page.next.unwrap();
    for forged in [
        "not base64 at all!".to_owned(),
        "eyJxIjoxLCJrIjpbXX0".to_owned(), // {"q":1,"k":[]} without a version
        "1.eyJhIjp7InEiOjEsImsiOltdfX0".to_owned(), // {"a":{"q":1,"k":[]}}: another query
        format!("{}x", cursor.encode()),
        cursor.encode()[..cursor.encode().len() - 3].to_owned(),
    ] {
        // Either the text is no cursor at all, or a cursor of another query.
        let r = match Cursor::decode(&forged) {
            Err(e) => Err(e),
            Ok(c) => s
                .slice(
                    &PROBE,
                    &Slice::partition(vec![p.as_str().into()])
                        .limit(2)
                        .after(Some(c)),
                )
                .await
                .map(|_| ()),
        };
        assert!(matches!(r, Err(StoreError::BadCursor)), "{forged}: {r:?}");
    }
    // The text form round-trips.
    assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
    // A cursor of the query, edited to name a row outside the slice's prefix
    // or bound, would widen the slice: refused.
    for (prefix, upper) in [(Some("a"), None), (None, Some("b"))] {
        let mk = |after: Option<Cursor>| {
            let mut sl = Slice::partition(vec![p.as_str().into()])
                .limit(1)
                .after(after);
            if let Some(x) = prefix {
                sl = sl.prefix(vec![x.into()]);
            }
            if let Some(u) = upper {
                sl = sl.upper(Bound::Inclusive(u.into()));
            }
            sl
        };
        let page = s.slice(&PROBE, &mk(None)).await.unwrap();
        let text = page.next.expect("more rows").encode();
        // Taken apart and put together unedited, it is still valid.
        let same = Cursor::decode(&edit_cursor(&text, |_| {})).expect("a cursor");
        s.slice(&PROBE, &mk(Some(same)))
            .await
            .expect("the same cursor");
        let forged = edit_cursor(&text, |k| k[0] = r#""c""#.to_owned());
        let c = Cursor::decode(&forged).expect("still a cursor");
        let r = s.slice(&PROBE, &mk(Some(c))).await;
        assert!(
            matches!(r, Err(StoreError::BadCursor)),
            "{prefix:?} {upper:?}: {r:?}"
        );
    }
    // A cursor of another partition is not valid here.
    let other = uid();
    let r = s
        .slice(
            &PROBE,
            &Slice::partition(vec![other.as_str().into()])
                .limit(2)
                .after(Some(cursor)),
        )
        .await;
    assert!(matches!(r, Err(StoreError::BadCursor)));
}

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

async fn compare_and_set_under_50_concurrent_tasks(engine: Engine) {
    let ts = store(engine).await;
    let s = ts.store.clone();
    let p = uid();
    // 50 tasks insert the same row IF NOT EXISTS: exactly one applies.
    let mut tasks = Vec::new();
    for i in 0..50 {
        let s = Arc::clone(&s);
        let row = probe(&p, "k", 1).set("v", format!("writer {i}"));
        tasks.push(tokio::spawn(async move {
            s.cas(Cas {
                row,
                condition: Condition::NotExists,
                ttl: None,
            })
            .await
            .unwrap()
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        let o = t.await.unwrap();
        if o.applied {
            winners.push(o.current.unwrap().string("v"));
        } else {
            assert!(o.current.unwrap().string("v").starts_with("writer "));
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = s
        .get(&PROBE, &probe(&p, "k", 1).key().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.string("v"), winners[0]);

    // 50 tasks move it from the same expected value: exactly one applies, the others see the new value.
    let mut tasks = Vec::new();
    for i in 0..50 {
        let s = Arc::clone(&s);
        let expected = winners[0].clone();
        let row = Row::new(&PROBE)
            .set("p", p.as_str())
            .set("c1", "k")
            .set("c2", 1)
            .set("v", format!("moved {i}"));
        tasks.push(tokio::spawn(async move {
            s.cas(Cas {
                row,
                condition: Condition::Equals(vec![("v", Some(expected.into()))]),
                ttl: None,
            })
            .await
            .unwrap()
        }));
    }
    let mut applied = 0;
    for t in tasks {
        let o = t.await.unwrap();
        let current = o.current.unwrap().string("v");
        assert!(current.starts_with("moved "), "{current}");
        applied += usize::from(o.applied);
    }
    assert_eq!(applied, 1);
    // A value condition on a missing row does not apply and reports no row; as in
    // CQL, a null condition does apply to it.
    let missing = || {
        Row::new(&PROBE)
            .set("p", p.as_str())
            .set("c1", "nope")
            .set("c2", 1)
            .set("v", "x")
    };
    let cond = |v: Option<Value>| Condition::Equals(vec![("v", v)]);
    let o = s
        .cas(Cas {
            row: missing(),
            condition: cond(Some("y".into())),
            ttl: None,
        })
        .await
        .unwrap();
    assert!(!o.applied && o.current.is_none());
    let o = s
        .cas(Cas {
            row: missing(),
            condition: cond(None),
            ttl: None,
        })
        .await
        .unwrap();
    assert!(o.applied);
    assert_eq!(o.current.unwrap().string("v"), "x");
    // Refused alike by both engines, and the store writes on afterwards: a
    // condition on a column the table lacks or on a key column, an update
    // that sets nothing, and an update with a TTL.
    for (condition, row, ttl) in [
        (Condition::Equals(vec![("no_such", None)]), missing(), None),
        (Condition::Equals(vec![("c1", None)]), missing(), None),
        (
            cond(None),
            Row::new(&PROBE)
                .set("p", p.as_str())
                .set("c1", "nope")
                .set("c2", 1),
            None,
        ),
        (cond(Some("x".into())), missing(), Some(60)),
    ] {
        let r = s
            .cas(Cas {
                row,
                condition: condition.clone(),
                ttl,
            })
            .await;
        assert!(
            matches!(r, Err(StoreError::Invalid(_))),
            "{condition:?}: {r:?}"
        );
    }
    let o = s
        .cas(Cas {
            row: missing().set("v", "z"),
            condition: cond(Some("x".into())),
            ttl: None,
        })
        .await
        .unwrap();
    assert!(o.applied);
}

/// `Condition::Replaces` writes the whole row, a `None` column as null (a
/// conditional upsert), conditioned on every column as it was read, lists
/// included; `Equals` leaves `None` columns as they are.
async fn a_conditional_replacement_writes_every_column(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    let full = probe(&p, "r", 1)
        .set("n", 7i64)
        .set("l", vec!["a".to_owned(), "b".to_owned()]);
    s.apply(vec![Mutation::upsert(full.clone())]).await.unwrap();
    let stored = s.get(&PROBE, &full.key().unwrap()).await.unwrap().unwrap();
    let as_read = |row: &Row| -> Vec<(&'static str, Option<Value>)> {
        (PROBE.key_len()..PROBE.width())
            .map(|i| (PROBE.column(i).name, row.values[i].clone()))
            .collect()
    };
    let replace = |row: Row, expected: &Row| Cas {
        row,
        condition: Condition::Replaces(as_read(expected)),
        ttl: None,
    };
    // Only `v` set: `n` and `l` become null.
    let o = s
        .cas(replace(probe(&p, "r", 1).set("v", "neu"), &stored))
        .await
        .unwrap();
    assert!(o.applied);
    let now = s.get(&PROBE, &full.key().unwrap()).await.unwrap().unwrap();
    assert_eq!(
        (now.text("v"), now.bigint("n"), now.text_list("l")),
        (Some("neu"), None, vec![])
    );
    // Against the row as it was: refused, the current row returned.
    let o = s
        .cas(replace(probe(&p, "r", 1).set("v", "alt"), &stored))
        .await
        .unwrap();
    assert!(!o.applied);
    assert_eq!(o.current.unwrap().text("v"), Some("neu"));
    // `Equals` on the same values leaves the columns it does not set.
    let o = s
        .cas(Cas {
            row: Row::new(&PROBE)
                .set("p", p.as_str())
                .set("c1", "r")
                .set("c2", 1)
                .set("n", 9i64),
            condition: Condition::Equals(as_read(&now)),
            ttl: None,
        })
        .await
        .unwrap();
    assert!(o.applied);
    let after = s.get(&PROBE, &full.key().unwrap()).await.unwrap().unwrap();
    assert_eq!((after.text("v"), after.bigint("n")), (Some("neu"), Some(9)));
}

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
        let page = s.scan(&PROBE_DESC, after, 2).await.unwrap();
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
        s.scan(&PROBE_DESC, Some(slice_cursor), 2).await,
        Err(StoreError::BadCursor)
    ));
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

both_engines!(
    bulk_inserts_never_overwrite_and_heal_what_they_find,
    fifty_concurrent_batches_all_land,
    clustering_order_ascending_and_descending,
    slices_with_prefix_and_bounds,
    cursors_round_trip_and_forged_ones_are_rejected,
    ttl_expiry,
    a_failing_batch_leaves_nothing_behind,
    batches_write_all_types_and_delete_ranges,
    multi_key_reads_keep_order_and_report_missing,
    compare_and_set_under_50_concurrent_tasks,
    a_conditional_replacement_writes_every_column,
    scans_page_through_a_table,
);

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
