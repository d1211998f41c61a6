//! Order-preserving, prefix-free byte encoding of primary keys for the embedded
//! engine: comparing encoded keys byte by byte orders rows exactly as Cassandra
//! orders them inside a partition (descending clustering columns are inverted).

use super::{Bound, ColumnType, Order, Slice, StoreError, Table, Value};

/// Appends one component. Text and blobs escape 0x00 as 0x00 0xFF and end with
/// 0x00 0x01, so no encoding is a prefix of another and order is kept.
pub fn push(out: &mut Vec<u8>, v: &Value, order: Order) -> Result<(), StoreError> {
    let start = out.len();
    match v {
        Value::Text(s) => push_bytes(out, s.as_bytes()),
        Value::Blob(b) => push_bytes(out, b),
        Value::Int(i) => out.extend_from_slice(&((*i as u32) ^ 0x8000_0000).to_be_bytes()),
        Value::BigInt(i) => {
            out.extend_from_slice(&((*i as u64) ^ 0x8000_0000_0000_0000).to_be_bytes())
        }
        Value::Double(f) => {
            let bits = f.to_bits();
            let ordered = if bits >> 63 == 1 {
                !bits
            } else {
                bits ^ (1 << 63)
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        Value::Boolean(b) => out.push(u8::from(*b)),
        Value::TextList(_) => {
            return Err(StoreError::Invalid("a list cannot be part of a key".into()));
        }
    }
    if order == Order::Desc {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
    Ok(())
}

fn push_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 1]);
}

/// The table's own prefix: every key of the table starts with it. It is 0x00
/// and the table's id, a hash of its qualified name ([`table_id`]); keys of
/// the first data files began with the names themselves (see
/// `embedded::upgrade`), and never with 0x00.
pub fn table_prefix(table: &Table) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + 32);
    out.push(0);
    out.extend_from_slice(&table_id(table.keyspace.prefix(), table.name));
    out
}

/// Every key's table prefix is this long.
pub const PREFIX_LEN: usize = 5;

/// A table's id in keys: the first 4 bytes of the FNV-1a hash of
/// `family.name`. Stored in every data file, so it never changes; a test
/// checks that no two tables share one.
pub fn table_id(family: &str, name: &str) -> [u8; 4] {
    // The hash of "family.name", without allocating it on every key.
    let h = super::cursor::fnv1a_parts(&[family.as_bytes(), b".", name.as_bytes()]);
    ((h >> 32) as u32).to_be_bytes()
}

/// The prefix the first data files' keys began with: the family's and the
/// table's names, each escaped and ended as a text component.
#[cfg(test)]
pub fn legacy_prefix(family: &str, name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    push_bytes(&mut out, family.as_bytes());
    push_bytes(&mut out, name.as_bytes());
    out
}

/// A key of the first data files, in today's layout: its two leading names
/// become the table's id. `None` for bytes that do not begin with two
/// escaped names.
pub fn upgrade_legacy(old: &[u8]) -> Option<Vec<u8>> {
    let mut rest = old;
    let family = unescape(&mut rest, 0)?;
    let name = unescape(&mut rest, 0)?;
    let family = std::str::from_utf8(&family).ok()?;
    let name = std::str::from_utf8(&name).ok()?;
    let mut out = Vec::with_capacity(PREFIX_LEN + rest.len());
    out.push(0);
    out.extend_from_slice(&table_id(family, name));
    out.extend_from_slice(rest);
    Some(out)
}

/// Encodes a key prefix (partition key first, then clustering columns).
pub fn encode(table: &Table, key: &[Value]) -> Result<Vec<u8>, StoreError> {
    let mut out = table_prefix(table);
    for (i, v) in key.iter().enumerate() {
        push(&mut out, v, order_of(table, i))?;
    }
    Ok(out)
}

pub fn order_of(table: &Table, i: usize) -> Order {
    let pk = table.partition_key.len();
    if i < pk {
        Order::Asc
    } else {
        table.clustering[i - pk].1
    }
}

/// The key values of one of `table`'s full keys as [`encode`] wrote them: the
/// inverse of `encode`, for the engine's rows that keep their key columns
/// only in the key. An error (never a panic) for bytes that are no such key.
pub fn decode(table: &'static Table, key: &[u8]) -> Result<Vec<Value>, StoreError> {
    let corrupt = |what: &str| {
        StoreError::Internal(format!("{}: stored key is corrupt ({what})", table.name))
    };
    let mut rest = key.get(PREFIX_LEN..).ok_or_else(|| corrupt("short"))?;
    let mut out = Vec::with_capacity(table.key_len());
    for i in 0..table.key_len() {
        let flip = if order_of(table, i) == Order::Desc {
            0xFF
        } else {
            0
        };
        let ty = table.column(i).ty;
        let v = match ty {
            ColumnType::Text => {
                let b = unescape(&mut rest, flip).ok_or_else(|| corrupt("text"))?;
                Value::Text(String::from_utf8(b).map_err(|_| corrupt("text"))?)
            }
            ColumnType::Blob => {
                Value::Blob(unescape(&mut rest, flip).ok_or_else(|| corrupt("blob"))?)
            }
            ColumnType::Boolean => match fixed::<1>(&mut rest, flip) {
                Some([0]) => Value::Boolean(false),
                Some([1]) => Value::Boolean(true),
                _ => return Err(corrupt("boolean")),
            },
            ColumnType::Int => {
                let b = fixed::<4>(&mut rest, flip).ok_or_else(|| corrupt("int"))?;
                Value::Int((u32::from_be_bytes(b) ^ 0x8000_0000) as i32)
            }
            ColumnType::BigInt => {
                let b = fixed::<8>(&mut rest, flip).ok_or_else(|| corrupt("bigint"))?;
                Value::BigInt((u64::from_be_bytes(b) ^ 0x8000_0000_0000_0000) as i64)
            }
            ColumnType::Double => {
                let b = fixed::<8>(&mut rest, flip).ok_or_else(|| corrupt("double"))?;
                let ordered = u64::from_be_bytes(b);
                let bits = if ordered >> 63 == 1 {
                    ordered ^ (1 << 63)
                } else {
                    !ordered
                };
                Value::Double(f64::from_bits(bits))
            }
            ColumnType::TextList | ColumnType::Counter => {
                return Err(corrupt("a list or a counter in a key"));
            }
        };
        out.push(v);
    }
    if !rest.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(out)
}

/// A key range: its first key, and the key after its last (none: the
/// range runs to the end of the table).
pub(crate) type KeyRange = (Vec<u8>, Option<Vec<u8>>);

/// The byte range of a slice, before any cursor.
pub(crate) fn slice_range(table: &'static Table, s: &Slice) -> Result<KeyRange, StoreError> {
    slice_range_of_partition(table, s).map(|(range, _)| range)
}

/// As [`slice_range`], and the length of the partition's encoding, which
/// begins every key in the range (where the clustering part starts).
pub(crate) fn slice_range_of_partition(
    table: &'static Table,
    s: &Slice,
) -> Result<(KeyRange, usize), StoreError> {
    let mut base = encode(table, &s.partition)?;
    let partition_len = base.len();
    let pk = table.partition_key.len();
    for (i, v) in s.prefix.iter().enumerate() {
        push(&mut base, v, order_of(table, pk + i))?;
    }
    let mut start = base.clone();
    let mut end = successor(&base);
    if s.lower.is_none() && s.upper.is_none() {
        return Ok(((start, end), partition_len));
    }
    let col = pk + s.prefix.len();
    let desc = order_of(table, col) == Order::Desc;
    let enc = |v: &Value| -> Result<Vec<u8>, StoreError> {
        let mut b = base.clone();
        push(&mut b, v, order_of(table, col))?;
        Ok(b)
    };
    // In value order: lower/upper. On a descending column they swap ends in byte order.
    let (byte_lower, byte_upper) = if desc {
        (&s.upper, &s.lower)
    } else {
        (&s.lower, &s.upper)
    };
    if let Some(b) = byte_lower {
        start = match b {
            Bound::Inclusive(v) => enc(v)?,
            Bound::Exclusive(v) => {
                successor(&enc(v)?).unwrap_or_else(|| end.clone().unwrap_or_default())
            }
        };
    }
    if let Some(b) = byte_upper {
        end = match b {
            Bound::Inclusive(v) => successor(&enc(v)?),
            Bound::Exclusive(v) => Some(enc(v)?),
        };
    }
    Ok(((start, end), partition_len))
}

/// The encoded full key of a cursor's clustering key `ck` in slice `s`,
/// whose byte range ([`slice_range`]) is `start..end`: BAD_CURSOR unless it
/// names a row inside it, so an edited cursor cannot widen a slice's prefix
/// or bounds on either engine.
pub(crate) fn cursor_key(
    table: &'static Table,
    s: &Slice,
    ck: &[Value],
    (start, end): (&[u8], Option<&[u8]>),
) -> Result<Vec<u8>, StoreError> {
    let mut full = s.partition.clone();
    full.extend_from_slice(ck);
    let at = encode(table, &full)?;
    if at.as_slice() < start || end.is_some_and(|e| at.as_slice() >= e) {
        return Err(StoreError::BadCursor);
    }
    Ok(at)
}

/// Takes `N` bytes (each XOR `flip`) off the front of `rest`.
fn fixed<const N: usize>(rest: &mut &[u8], flip: u8) -> Option<[u8; N]> {
    let (head, tail) = rest.split_first_chunk::<N>()?;
    *rest = tail;
    Some(head.map(|b| b ^ flip))
}

/// Takes one escaped text or blob component (its bytes XOR `flip`) off the
/// front of `rest`; `None` when it has no proper end.
fn unescape(rest: &mut &[u8], flip: u8) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut bytes = rest.iter().map(|b| b ^ flip).enumerate();
    while let Some((_, b)) = bytes.next() {
        if b != 0 {
            out.push(b);
            continue;
        }
        match bytes.next()? {
            (i, 1) => {
                *rest = &rest[i + 1..];
                return Some(out);
            }
            (_, 0xFF) => out.push(0),
            _ => return None,
        }
    }
    None
}

/// The smallest byte string greater than every string that starts with `prefix`.
pub fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    fn enc(v: Value, o: Order) -> Vec<u8> {
        let mut out = Vec::new();
        push(&mut out, &v, o).unwrap();
        out
    }

    /// Table ids are written into every data file: the hash may never change.
    #[test]
    fn table_ids_are_pinned() {
        assert_eq!(table_id("themes", "keywords"), [241, 1, 234, 100]);
    }

    #[test]
    fn text_order_is_kept_and_prefix_free() {
        let words = ["", "a", "a\0", "a\0b", "ab", "b", "ü"];
        let mut encoded: Vec<_> = words
            .iter()
            .map(|w| enc(Value::from(*w), Order::Asc))
            .collect();
        let sorted = encoded.clone();
        encoded.sort();
        assert_eq!(encoded, sorted);
        for (i, a) in sorted.iter().enumerate() {
            for (j, b) in sorted.iter().enumerate() {
                if i != j {
                    assert!(!b.starts_with(a), "{i} is a prefix of {j}");
                }
            }
        }
    }

    #[test]
    fn numbers_sort_numerically_and_desc_reverses() {
        let ints = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let asc: Vec<_> = ints
            .iter()
            .map(|i| enc(Value::BigInt(*i), Order::Asc))
            .collect();
        assert!(asc.windows(2).all(|w| w[0] < w[1]));
        let desc: Vec<_> = ints
            .iter()
            .map(|i| enc(Value::BigInt(*i), Order::Desc))
            .collect();
        assert!(desc.windows(2).all(|w| w[0] > w[1]));
        let floats = [-1e9, -0.5, 0.0, 0.25, 1.0, 3e10];
        let enc_f: Vec<_> = floats
            .iter()
            .map(|f| enc(Value::Double(*f), Order::Asc))
            .collect();
        assert!(enc_f.windows(2).all(|w| w[0] < w[1]));
        let texts = ["a", "ab", "b"];
        let desc_t: Vec<_> = texts
            .iter()
            .map(|t| enc(Value::from(*t), Order::Desc))
            .collect();
        assert!(desc_t.windows(2).all(|w| w[0] > w[1]));
    }

    crate::store::table! {
        K: Themes.key_test
            partition(t: Text, n: Int)
            clustering(
                d: Text Desc, b: BigInt Desc, f: Double Asc, g: Double Desc, x: Boolean Asc,
                y: Blob Desc
            )
    }

    /// Doubles compared by their bits: NaN is not equal to itself.
    fn comparable(v: &[Value]) -> Vec<String> {
        v.iter()
            .map(|v| match v {
                Value::Double(d) => format!("{:x}", d.to_bits()),
                v => format!("{v:?}"),
            })
            .collect()
    }

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        #[test]
        fn decode_inverts_encode(
            t in ".*", n in any::<i32>(), d in ".*", b in any::<i64>(),
            f in any::<f64>(), g in any::<f64>(), x in any::<bool>(),
            y in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let key = vec![
                Value::Text(t), Value::Int(n), Value::Text(d), Value::BigInt(b),
                Value::Double(f), Value::Double(g), Value::Boolean(x), Value::Blob(y),
            ];
            let bytes = encode(&K, &key).unwrap();
            let back = decode(&K, &bytes).unwrap();
            prop_assert_eq!(comparable(&back), comparable(&key));
        }

        #[test]
        fn decoding_garbage_is_an_error_not_a_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let mut key = table_prefix(&K);
            key.extend_from_slice(&bytes);
            let _ = decode(&K, &key);
            let _ = decode(&K, &bytes);
        }
    }

    #[test]
    fn successor_skips_every_extension() {
        assert_eq!(successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(successor(&[0xFF]), None);
    }
}
