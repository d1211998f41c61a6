//! Unit and property tests of `store`.

use super::*;
use base64::Engine as _;
use proptest::prelude::*;

/// A table whose clustering key has one column of every key type, so a
/// cursor carries each kind of value.
static CURSORED: Table = Table {
    keyspace: Keyspace::Themes,
    name: "cursored",
    partition_key: &[col("p", ColumnType::Text)],
    clustering: &[
        (col("t", ColumnType::Text), Order::Asc),
        (col("i", ColumnType::Int), Order::Desc),
        (col("b", ColumnType::BigInt), Order::Asc),
        (col("f", ColumnType::Boolean), Order::Desc),
        (col("x", ColumnType::Blob), Order::Asc),
    ],
    columns: &[col("v", ColumnType::TextList)],
};
const PK: usize = 1;
const CK: usize = 5;

/// Failing inputs are written into the tests as explicit cases rather than into files.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

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
    #![proptest_config(config())]

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
        let page = Page::of_slice(&CURSORED, fp, rows, more).unwrap();
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
    #![proptest_config(config())]

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

static DOUBLE_KEYED: Table = Table {
    keyspace: Keyspace::Themes,
    name: "double_keyed",
    partition_key: &[col("p", ColumnType::Text)],
    clustering: &[(col("d", ColumnType::Double), Order::Asc)],
    columns: &[],
};
