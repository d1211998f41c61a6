//! Compare-and-set: one winner among fifty tasks, and conditional
//! replacements that write every column.

use std::sync::Arc;

use kartei::store::{BulkThenCasError, Cas, Condition, Mutation, Row, StoreError, Value};

use super::{PROBE, probe};
use crate::both_engines;
use crate::support::{Engine, store, uid};

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

/// Rows a status needs, then the status: the bulk is stored whether the
/// compare-and-set applies or not, its writes follow only when it does, and
/// a bulk that would write the compare-and-set's own row is refused whole.
async fn a_bulk_goes_before_a_compare_and_set_in_one_call(engine: Engine) {
    let ts = store(engine).await;
    let s = &ts.store;
    let p = uid();
    let then_p = p.clone();
    let then: kartei::store::Heal =
        Arc::new(move |_: &Row| vec![Mutation::upsert(probe(&then_p, "then", 1))]);
    let status = |v: &str, expect: Option<&str>| Cas {
        row: probe(&p, "status", 1).set("v", v),
        condition: match expect {
            None => Condition::NotExists,
            Some(e) => Condition::Equals(vec![("v", Some(Value::from(e)))]),
        },
        ttl: None,
    };
    let bulk = |c: &str| {
        vec![
            Mutation::upsert(probe(&p, c, 1)),
            Mutation::upsert(probe(&p, c, 2)),
        ]
    };
    let read = |c: &str, n: i32| {
        let key = probe(&p, c, n).key().unwrap();
        async move { s.get(&PROBE, &key).await.unwrap() }
    };
    let o = s
        .write_bulk_then_cas(bulk("a"), status("OK", None), then.clone())
        .await
        .unwrap();
    assert!(o.applied);
    assert!(read("a", 1).await.is_some() && read("a", 2).await.is_some());
    assert!(
        read("then", 1).await.is_some(),
        "the writes that go with it"
    );
    assert_eq!(read("status", 1).await.unwrap().text("v"), Some("OK"));
    // Not applied (the status is not PROCESSING): the bulk is stored all the same.
    let o = s
        .write_bulk_then_cas(bulk("b"), status("ERROR", Some("PROCESSING")), then.clone())
        .await
        .unwrap();
    assert!(!o.applied);
    assert_eq!(o.current.unwrap().text("v"), Some("OK"));
    assert!(read("b", 1).await.is_some() && read("b", 2).await.is_some());
    assert_eq!(read("status", 1).await.unwrap().text("v"), Some("OK"));
    if engine == Engine::Embedded {
        let own_row = vec![
            Mutation::upsert(probe(&p, "c", 1)),
            Mutation::upsert(probe(&p, "status", 1).set("v", "sneaked")),
        ];
        let refused = s
            .write_bulk_then_cas(own_row, status("x", Some("OK")), then)
            .await;
        assert!(
            matches!(
                refused,
                Err(BulkThenCasError {
                    error: StoreError::Internal(_),
                    bulk_stored: false
                })
            ),
            "{refused:?}"
        );
        assert!(read("c", 1).await.is_none(), "nothing of it is stored");
        assert_eq!(read("status", 1).await.unwrap().text("v"), Some("OK"));
    }
}

both_engines!(
    compare_and_set_under_50_concurrent_tasks,
    a_conditional_replacement_writes_every_column,
    a_bulk_goes_before_a_compare_and_set_in_one_call,
);
