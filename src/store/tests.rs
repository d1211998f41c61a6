//! Unit and property tests of `store`.

use super::*;
use base64::Engine as _;
use proptest::prelude::*;

crate::store::table! {
    /// A table whose clustering key has one column of every key type, so a
    /// cursor carries each kind of value.
    CURSORED: Themes.cursored
        partition(p: Text)
        clustering(t: Text Asc, i: Int Desc, b: BigInt Asc, f: Boolean Desc, x: Blob Asc)
        columns(v: TextList)
}
const PK: usize = 1;
const CK: usize = 5;

fn clustering_key() -> impl Strategy<Value = Vec<Value>> {
    (
        any::<String>(),
        any::<i32>(),
        any::<i64>(),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(t, i, b, f, x)| {
            vec![
                Value::Text(t),
                Value::Int(i),
                Value::BigInt(b),
                Value::Boolean(f),
                Value::Blob(x),
            ]
        })
}

fn bound() -> impl Strategy<Value = Option<Bound>> {
    prop_oneof![
        Just(None),
        ".{0,6}".prop_map(|t| Some(Bound::Inclusive(Value::Text(t)))),
        ".{0,6}".prop_map(|t| Some(Bound::Exclusive(Value::Text(t)))),
    ]
}

/// A slice of `CURSORED`: partition, a short text prefix or bounds, direction.
fn slice() -> impl Strategy<Value = Slice> {
    (
        ".{0,8}",
        prop::option::of(".{0,6}"),
        bound(),
        bound(),
        any::<bool>(),
    )
        .prop_map(|(p, prefix, lower, upper, reverse)| Slice {
            partition: vec![Value::Text(p)],
            prefix: prefix.map(Value::Text).into_iter().collect(),
            lower,
            upper,
            reverse,
            limit: 10,
            after: None,
        })
}

fn decode(fp: u64, cursor: &str) -> Result<Vec<Value>, StoreError> {
    decode_cursor(&CURSORED, fp, cursor, PK, CK)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

proptest! {
    #![proptest_config(crate::kernel::proptest_config())]

    #[test]
    fn a_cursor_decodes_to_the_key_it_was_made_from(
        s in slice(), key in clustering_key(),
    ) {
        let fp = slice_fingerprint(&CURSORED, &s);
        let cursor = encode_cursor(fp, key.clone());
        prop_assert_eq!(decode(fp, &cursor).unwrap(), key);
    }

    #[test]
    fn a_full_key_cursor_of_a_scan_decodes_to_its_key(
        p in any::<String>(), key in clustering_key(), fp in any::<u64>(),
    ) {
        let mut full = vec![Value::Text(p)];
        full.extend(key);
        let cursor = encode_cursor(fp, full.clone());
        prop_assert_eq!(
            decode_cursor(&CURSORED, fp, &cursor, 0, CURSORED.key_len()).unwrap(),
            full
        );
    }

    #[test]
    fn a_cursor_is_url_safe_text(fp in any::<u64>(), key in clustering_key()) {
        let cursor = encode_cursor(fp, key);
        prop_assert!(
            cursor.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "{cursor}"
        );
    }

    #[test]
    fn each_row_cursor_of_a_page_resumes_after_that_row(
        s in slice(),
        keys in prop::collection::vec(clustering_key(), 0..6),
        more in any::<bool>(),
    ) {
        let fp = slice_fingerprint(&CURSORED, &s);
        let rows: Vec<Row> = keys
            .iter()
            .map(|k| {
                let mut r = Row::new(&CURSORED);
                r.values[0] = Some(Value::Text("p".into()));
                for (i, v) in k.iter().enumerate() {
                    r.values[PK + i] = Some(v.clone());
                }
                r
            })
            .collect();
        let page = Page::of_slice(fp, rows, more).unwrap();
        prop_assert_eq!(page.cursors.len(), keys.len());
        for (c, k) in page.cursors.iter().zip(&keys) {
            prop_assert_eq!(&c.key(&CURSORED, fp, PK, CK).unwrap(), k);
        }
        let expected_next = if more { page.cursors.last().cloned() } else { None };
        prop_assert_eq!(page.next, expected_next);
    }

    #[test]
    fn a_cursor_of_another_query_is_refused(
        a in slice(), b in slice(), key in clustering_key(),
    ) {
        let (fa, fb) = (slice_fingerprint(&CURSORED, &a), slice_fingerprint(&CURSORED, &b));
        let same_shape = a.partition == b.partition
            && a.prefix == b.prefix
            && a.lower == b.lower
            && a.upper == b.upper
            && a.reverse == b.reverse;
        prop_assert_eq!(fa == fb, same_shape);
        prop_assume!(!same_shape);
        let cursor = encode_cursor(fa, key);
        prop_assert!(matches!(decode(fb, &cursor), Err(StoreError::BadCursor)));
    }

    #[test]
    fn the_other_direction_of_the_same_slice_refuses_the_cursor(
        s in slice(), key in clustering_key(),
    ) {
        let mut turned = s.clone();
        turned.reverse = !s.reverse;
        let cursor = encode_cursor(slice_fingerprint(&CURSORED, &s), key);
        let fp = slice_fingerprint(&CURSORED, &turned);
        prop_assert!(matches!(decode(fp, &cursor), Err(StoreError::BadCursor)));
    }

    #[test]
    fn a_truncated_cursor_is_refused(
        fp in any::<u64>(), key in clustering_key(), cut in any::<prop::sample::Index>(),
    ) {
        let cursor = encode_cursor(fp, key);
        let short = &cursor[..cut.index(cursor.len())];
        prop_assert!(matches!(decode(fp, short), Err(StoreError::BadCursor)), "{short}");
    }

    #[test]
    fn a_cursor_with_a_changed_character_is_refused_or_still_well_typed(
        fp in any::<u64>(),
        key in clustering_key(),
        at in any::<prop::sample::Index>(),
        with in prop::sample::select(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/.".to_vec()
        ),
    ) {
        let mut bytes = encode_cursor(fp, key).into_bytes();
        let i = at.index(bytes.len());
        bytes[i] = with;
        let forged = String::from_utf8(bytes).unwrap();
        // A change inside a text or blob may still make a key of this query:
        // then it has the right shape and types, never anything else.
        match decode(fp, &forged) {
            Ok(k) => {
                prop_assert_eq!(k.len(), CK);
                prop_assert!(check_types(&CURSORED, PK, k.iter().map(Some)).is_ok());
            }
            Err(e) => prop_assert!(matches!(e, StoreError::BadCursor), "{e:?}"),
        }
    }

    #[test]
    fn any_text_as_a_cursor_is_refused(fp in any::<u64>(), text in prop_oneof![
        any::<String>(),
        "[A-Za-z0-9_-]{0,80}",
    ]) {
        prop_assert!(matches!(decode(fp, &text), Err(StoreError::BadCursor)));
    }

    #[test]
    fn any_bytes_encoded_as_a_cursor_are_refused(
        fp in any::<u64>(), bytes in prop::collection::vec(any::<u8>(), 0..120),
    ) {
        prop_assert!(matches!(decode(fp, &b64(&bytes)), Err(StoreError::BadCursor)));
    }

    #[test]
    fn a_cursor_document_of_the_wrong_shape_is_refused(
        fp in any::<u64>(), key in clustering_key(), keep in 0..CK, swap in 0..CK,
    ) {
        // The right query, but a key too short, too long, or with a value of the wrong type.
        let short = encode_cursor(fp, key[..keep].to_vec());
        prop_assert!(matches!(decode(fp, &short), Err(StoreError::BadCursor)));
        let mut long = key.clone();
        long.push(Value::Int(1));
        prop_assert!(matches!(decode(fp, &encode_cursor(fp, long)), Err(StoreError::BadCursor)));
        let mut mistyped = key;
        mistyped[swap] = match mistyped[swap] {
            Value::Text(_) => Value::Int(0),
            _ => Value::Text("0".into()),
        };
        let c = encode_cursor(fp, mistyped);
        prop_assert!(matches!(decode(fp, &c), Err(StoreError::BadCursor)));
    }

    #[test]
    fn json_that_is_not_a_cursor_document_is_refused(
        fp in any::<u64>(),
        doc in prop_oneof![
            Just(serde_json::json!(null)),
            any::<i64>().prop_map(|n| serde_json::json!(n)),
            ".{0,10}".prop_map(|s| serde_json::json!(s)),
            Just(serde_json::json!({"k": []})),
            any::<u64>().prop_map(|q| serde_json::json!({"q": q})),
            any::<i64>().prop_map(|q| serde_json::json!({"q": q.to_string(), "k": []})),
            ".{0,10}".prop_map(|s| serde_json::json!([s])),
        ],
    ) {
        let cursor = b64(&serde_json::to_vec(&doc).unwrap());
        prop_assert!(matches!(decode(fp, &cursor), Err(StoreError::BadCursor)));
    }
}

proptest! {
    #![proptest_config(crate::kernel::proptest_config())]

    /// Doubles are a key type of the seam; no table keys on one today.
    #[test]
    fn a_double_in_a_cursor_decodes_to_the_same_double(
        d in prop::num::f64::POSITIVE | prop::num::f64::NEGATIVE | prop::num::f64::ZERO
            | prop::num::f64::SUBNORMAL | prop::num::f64::NORMAL,
        fp in any::<u64>(),
    ) {
        let cursor = encode_cursor(fp, vec![Value::Double(d)]);
        let doubled: &'static Table = &DOUBLE_KEYED;
        let back = decode_cursor(doubled, fp, &cursor, 1, 1).unwrap();
        prop_assert_eq!(back, vec![Value::Double(d)]);
    }
}

crate::store::table! {
    DOUBLE_KEYED: Themes.double_keyed
        partition(p: Text)
        clustering(d: Double Asc)
}

fn refused<T>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::BadCursor))
}

/// Any value a key may hold (doubles finite: no table keys on one, and JSON
/// has no NaN).
fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::Text),
        any::<i32>().prop_map(Value::Int),
        any::<i64>().prop_map(Value::BigInt),
        (prop::num::f64::NORMAL | prop::num::f64::ZERO | prop::num::f64::SUBNORMAL)
            .prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Value::Blob),
        prop::collection::vec(any::<String>(), 0..3).prop_map(Value::TextList),
    ]
}

/// Both kinds of cursor.
fn any_cursor() -> impl Strategy<Value = Cursor> {
    prop_oneof![
        (any::<u64>(), prop::collection::vec(any_value(), 0..6))
            .prop_map(|(q, k)| Cursor::after(q, k)),
        (any::<u64>(), prop::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(q, s)| Cursor::paging(q, &s)),
    ]
}

/// Text a client may send as `after`: cursors, near-cursors, anything.
fn cursor_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "1\\.[A-Za-z0-9_-]{0,200}",
        "[0-9]?\\.?[A-Za-z0-9_=+/.-]{0,80}",
        any_cursor().prop_map(|c| c.encode()),
        prop::collection::vec(any::<u8>(), 0..200).prop_map(|b| format!("1.{}", b64(&b))),
        ".{0,40}".prop_map(|doc| format!("1.{}", b64(doc.as_bytes()))),
    ]
}

proptest! {
    #![proptest_config(crate::kernel::proptest_config())]

    #[test]
    fn any_cursor_reads_back_as_itself(c in any_cursor()) {
        let text = c.encode();
        prop_assert!(text.len() <= 4096 || Cursor::decode(&text).is_err());
        if text.len() <= 4096 {
            prop_assert_eq!(Cursor::decode(&text).ok(), Some(c));
        }
    }

    #[test]
    fn a_paging_state_comes_back_only_to_its_query(
        q in any::<u64>(), other in any::<u64>(), state in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let c = Cursor::decode(&Cursor::paging(q, &state).encode()).unwrap();
        prop_assert_eq!(c.paging_state(q).ok(), Some(state));
        prop_assume!(other != q);
        prop_assert!(refused(c.paging_state(other)));
        // A paging state is never a key, and a key never a paging state.
        prop_assert!(refused(c.key(&CURSORED, q, PK, CK)));
        let after = Cursor::after(q, vec![Value::Int(1)]);
        prop_assert!(refused(after.paging_state(q)));
    }

    /// Whatever the text, decoding answers (no panic); what it accepts is in
    /// its one canonical spelling again once encoded.
    #[test]
    fn any_text_decodes_to_a_cursor_or_bad_cursor(text in cursor_text()) {
        match Cursor::decode(&text) {
            Ok(c) => prop_assert_eq!(Cursor::decode(&c.encode()).ok(), Some(c)),
            Err(e) => prop_assert!(matches!(e, StoreError::BadCursor), "{e:?}"),
        }
    }

    #[test]
    fn overlong_text_is_refused_before_it_is_read(c in any_cursor(), pad in 1usize..64) {
        let mut text = c.encode();
        let room = 4096usize.saturating_sub(text.len()) + pad;
        // Base64 of JSON with trailing spaces: still a cursor document, only too long.
        let doc = format!("{}{}", String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&text[2..]).unwrap()
        ).unwrap(), " ".repeat(room));
        text = format!("1.{}", b64(doc.as_bytes()));
        prop_assert!(text.len() > 4096);
        prop_assert!(refused(Cursor::decode(&text)));
    }

    /// Query fingerprints and ints past their type's range are refused, not wrapped.
    #[test]
    fn numbers_past_their_type_are_refused(
        digits in prop_oneof![
            Just("99999999999999999999".to_owned()),
            Just("18446744073709551616".to_owned()),
            "[1-9][0-9]{20,60}",
            "-[1-9][0-9]{0,20}",
        ],
    ) {
        let q_doc = format!(r#"{{"a":{{"q":{digits},"k":[]}}}}"#);
        let q_text = format!("1.{}", b64(q_doc.as_bytes()));
        prop_assert!(refused(Cursor::decode(&q_text)), "{q_text}");
        // An Int key value past i32 (or any key past i64) is no key of this table.
        let k_doc = format!(r#"{{"a":{{"q":1,"k":[{{"Int":{digits}}}]}}}}"#);
        let text = format!("1.{}", b64(k_doc.as_bytes()));
        let int_keyed = decode_cursor(&CURSORED, 1, &text, PK + 1, 1);
        if digits.parse::<i32>().is_err() {
            prop_assert!(refused(int_keyed));
        }
    }
}

/// JSON nested past serde's recursion limit is refused (no stack overflow).
#[test]
fn a_deeply_nested_cursor_document_is_refused() {
    for depth in [100, 129, 1_000, 3_000] {
        let doc = format!(
            r#"{{"a":{{"q":1,"k":{}{}}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let text = format!("1.{}", b64(doc.as_bytes()));
        assert!(refused(Cursor::decode(&text)), "{depth}");
    }
}
