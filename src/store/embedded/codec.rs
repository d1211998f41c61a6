//! How the embedded engine stores a row's values.
//!
//! A row written now is `2`, its expiry (`expires_at_ms` as LEB128, 0 =
//! never), then its non-key columns, each a tag and its payload (lengths as
//! LEB128): the key columns are in the row's key already, and are read back
//! from it (`key::decode`). Rows of earlier versions start with the expiry as
//! a u64 BE (so with 0x00: no expiry is 2^56 ms away) and hold every column:
//! binary (`1`, then the columns) or JSON (`[...]`). Both are still read. An
//! assignment row takes about 40 % of its JSON size in format 1 and less again
//! in format 2; a blob takes its own size (JSON needed base64).

use super::super::{Row, StoreError, Table, Value, key};

const BINARY_V1: u8 = 1;
const BINARY_V2: u8 = 2;

const NULL: u8 = 0;
const TEXT: u8 = 1;
const INT: u8 = 2;
const BIGINT: u8 = 3;
const DOUBLE: u8 = 4;
const FALSE: u8 = 5;
const TRUE: u8 = 6;
const BLOB: u8 = 7;
const TEXT_LIST: u8 = 8;

fn corrupt(table: &Table, what: &str) -> StoreError {
    StoreError::Internal(format!("{}: stored row is corrupt ({what})", table.name))
}

pub(super) fn encode(row: &Row, expires: u64) -> Vec<u8> {
    let columns = row.values.get(row.table.key_len()..).unwrap_or_default();
    let size: usize = columns
        .iter()
        .map(|v| match v {
            Some(Value::Text(s)) => s.len() + 3,
            Some(Value::Blob(b)) => b.len() + 5,
            Some(Value::TextList(l)) => l.iter().map(|s| s.len() + 2).sum::<usize>() + 3,
            _ => 9,
        })
        .sum();
    let mut out = Vec::with_capacity(11 + size);
    out.push(BINARY_V2);
    varint(&mut out, expires);
    for v in columns {
        match v {
            None => out.push(NULL),
            Some(Value::Text(s)) => {
                out.push(TEXT);
                bytes(&mut out, s.as_bytes());
            }
            Some(Value::Int(i)) => {
                out.push(INT);
                out.extend_from_slice(&i.to_be_bytes());
            }
            Some(Value::BigInt(i)) => {
                out.push(BIGINT);
                out.extend_from_slice(&i.to_be_bytes());
            }
            Some(Value::Double(d)) => {
                out.push(DOUBLE);
                out.extend_from_slice(&d.to_bits().to_be_bytes());
            }
            Some(Value::Boolean(b)) => out.push(if *b { TRUE } else { FALSE }),
            Some(Value::Blob(b)) => {
                out.push(BLOB);
                bytes(&mut out, b);
            }
            Some(Value::TextList(l)) => {
                out.push(TEXT_LIST);
                varint(&mut out, l.len() as u64);
                for s in l {
                    bytes(&mut out, s.as_bytes());
                }
            }
        }
    }
    out
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A LEB128 number at the front of `buf` and its length in bytes.
fn read_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut n: u64 = 0;
    for (i, b) in buf.iter().take(10).enumerate() {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
}

struct Reader<'a> {
    buf: &'a [u8],
    table: &'static Table,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        if self.buf.len() < n {
            return Err(corrupt(self.table, "truncated"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn byte(&mut self) -> Result<u8, StoreError> {
        Ok(self.take(1)?[0])
    }
    fn varint(&mut self) -> Result<usize, StoreError> {
        usize::try_from(self.varint64()?).map_err(|_| corrupt(self.table, "length"))
    }
    fn varint64(&mut self) -> Result<u64, StoreError> {
        let (n, len) = read_varint(self.buf).ok_or_else(|| corrupt(self.table, "varint"))?;
        self.buf = &self.buf[len..];
        Ok(n)
    }
    /// The tagged columns up to the end, appended to `values`.
    fn columns(&mut self, values: &mut Vec<Option<Value>>) -> Result<(), StoreError> {
        while !self.buf.is_empty() {
            if values.len() >= self.table.width() {
                return Err(corrupt(self.table, "too many columns"));
            }
            values.push(match self.byte()? {
                NULL => None,
                TEXT => Some(Value::Text(self.text()?)),
                INT => Some(Value::Int(i32::from_be_bytes(self.array()?))),
                BIGINT => Some(Value::BigInt(i64::from_be_bytes(self.array()?))),
                DOUBLE => Some(Value::Double(f64::from_bits(u64::from_be_bytes(
                    self.array()?,
                )))),
                FALSE => Some(Value::Boolean(false)),
                TRUE => Some(Value::Boolean(true)),
                BLOB => Some(Value::Blob(self.bytes()?.to_vec())),
                TEXT_LIST => {
                    let n = self.varint()?;
                    let mut l = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        l.push(self.text()?);
                    }
                    Some(Value::TextList(l))
                }
                _ => return Err(corrupt(self.table, "tag")),
            });
        }
        Ok(())
    }
    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        let n = self.varint()?;
        self.take(n)
    }
    fn text(&mut self) -> Result<String, StoreError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| corrupt(self.table, "text"))
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], StoreError> {
        let b = self.take(N)?;
        b.try_into().map_err(|_| corrupt(self.table, "number"))
    }
}

/// When the row stored as `value` expires (ms since the epoch; 0 = never).
pub(super) fn expires_at(value: &[u8]) -> u64 {
    match value.first() {
        Some(&BINARY_V2) => read_varint(&value[1..]).map_or(0, |(n, _)| n),
        _ => value
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0),
    }
}

/// The row stored under `key` as `value`.
pub(super) fn decode(table: &'static Table, key: &[u8], value: &[u8]) -> Result<Row, StoreError> {
    let values: Vec<Option<Value>> = match value.first() {
        Some(&BINARY_V2) => {
            let mut r = Reader {
                buf: &value[1..],
                table,
            };
            r.varint64()?;
            let mut values: Vec<Option<Value>> = Vec::with_capacity(table.width());
            values.extend(key::decode(table, key)?.into_iter().map(Some));
            r.columns(&mut values)?;
            values
        }
        _ => {
            let body = value.get(8..).ok_or_else(|| corrupt(table, "no expiry"))?;
            match body.first() {
                Some(&BINARY_V1) => {
                    let mut r = Reader {
                        buf: &body[1..],
                        table,
                    };
                    let mut values = Vec::with_capacity(table.width());
                    r.columns(&mut values)?;
                    values
                }
                // Rows written by the first versions.
                Some(b'[') => serde_json::from_slice(body).map_err(|_| corrupt(table, "json"))?,
                _ => return Err(corrupt(table, "format")),
            }
        }
    };
    if values.len() != table.width() {
        return Err(StoreError::Internal(format!(
            "{}: stored row has wrong width",
            table.name
        )));
    }
    Ok(Row { table, values })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ColumnType::*;
    use crate::store::{Keyspace, col};
    use proptest::prelude::*;

    static T: Table = Table {
        keyspace: Keyspace::Themes,
        name: "codec_test",
        partition_key: &[col("id", Text)],
        clustering: &[],
        columns: &[
            col("n", Int),
            col("b", BigInt),
            col("d", Double),
            col("f", Boolean),
            col("blob", Blob),
            col("l", TextList),
        ],
    };

    fn value() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            ".*".prop_map(|s| Some(Value::Text(s))),
            any::<i32>().prop_map(|i| Some(Value::Int(i))),
            any::<i64>().prop_map(|i| Some(Value::BigInt(i))),
            any::<f64>()
                .prop_filter("NaN is not equal to itself", |d| !d.is_nan())
                .prop_map(|d| Some(Value::Double(d))),
            any::<bool>().prop_map(|b| Some(Value::Boolean(b))),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| Some(Value::Blob(b))),
            proptest::collection::vec(".*", 0..5).prop_map(|l| Some(Value::TextList(l))),
        ]
    }

    fn row(id: String, rest: Vec<Option<Value>>) -> Row {
        let mut values = vec![Some(Value::Text(id))];
        values.extend(rest);
        Row { table: &T, values }
    }

    /// `row` as format 1 wrote it: the expiry as u64 BE, `1`, every column
    /// (the key `id` too).
    fn format_1(row: &Row, expires: u64) -> Vec<u8> {
        let mut out = expires.to_be_bytes().to_vec();
        out.push(BINARY_V1);
        out.push(TEXT);
        bytes(&mut out, row.text("id").unwrap().as_bytes());
        // Format 2 without its `2` and its expiry 0: the other columns.
        out.extend_from_slice(&encode(row, 0)[2..]);
        out
    }

    proptest! {
        #[test]
        fn round_trips(id in ".*", rest in proptest::collection::vec(value(), 6), expires in any::<u64>()) {
            let row = row(id, rest);
            let key = key::encode(&T, &row.key().unwrap()).unwrap();
            let enc = encode(&row, expires);
            prop_assert_eq!(expires_at(&enc), expires);
            prop_assert_eq!(decode(&T, &key, &enc).unwrap().values, row.values.clone());
            if expires < 1 << 56 {
                let old = format_1(&row, expires);
                prop_assert_eq!(expires_at(&old), expires);
                prop_assert_eq!(decode(&T, &key, &old).unwrap().values, row.values);
            }
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let key = key::encode(&T, &[Value::from("k")]).unwrap();
            let _ = decode(&T, &key, &bytes);
            let _ = decode(&T, &bytes, &bytes);
            let _ = expires_at(&bytes);
        }
    }

    #[test]
    fn reads_rows_in_the_old_formats() {
        let row = Row::new(&T)
            .set("id", "a")
            .set("n", 3)
            .set("l", vec!["x".to_owned()]);
        let key = key::encode(&T, &row.key().unwrap()).unwrap();
        let mut json = 0u64.to_be_bytes().to_vec();
        serde_json::to_writer(&mut json, &row.values).unwrap();
        assert_eq!(decode(&T, &key, &json).unwrap().values, row.values);
        let binary = format_1(&row, 0);
        assert_eq!(decode(&T, &key, &binary).unwrap().values, row.values);
        let now = encode(&row, 0);
        assert!(now.len() < binary.len() && binary.len() < json.len());
    }
}
