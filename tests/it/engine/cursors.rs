//! Cursors go back and forth as opaque text; forged ones are refused.

use kartei::store::{Bound, Cursor, Mutation, Row, Slice, StoreError};

use super::{PROBE, PROBE_DESC, fill, keys};
use crate::both_engines;
use crate::support::{Engine, store, uid};

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

both_engines!(cursors_round_trip_and_forged_ones_are_rejected);
