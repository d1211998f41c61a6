//! Order-preserving, prefix-free byte encoding of primary keys for the embedded
//! engine: comparing encoded keys byte by byte orders rows exactly as Cassandra
//! orders them inside a partition (descending clustering columns are inverted).

use super::{Order, StoreError, Table, Value};

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

/// The table's own prefix: every key of the table starts with it.
pub fn table_prefix(table: &Table) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    push_bytes(&mut out, table.keyspace.prefix().as_bytes());
    push_bytes(&mut out, table.name.as_bytes());
    out
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

    fn enc(v: Value, o: Order) -> Vec<u8> {
        let mut out = Vec::new();
        push(&mut out, &v, o).unwrap();
        out
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

    #[test]
    fn successor_skips_every_extension() {
        assert_eq!(successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(successor(&[0xFF]), None);
    }
}
