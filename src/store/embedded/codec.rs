//! How the embedded engine stores a row's values.
//!
//! A stored value is `expires_at_ms (u64 BE, 0 = never)` followed by the row's
//! columns. Rows written before this format hold JSON (`[...]`, so the byte
//! after the expiry is `[`); they are still read. New rows are binary: the
//! version byte 1, then per column a tag and its payload, lengths as LEB128.
//! An assignment row takes about 40 % of its JSON size, a blob its own size
//! (JSON needed base64).

use super::super::{Row, StoreError, Table, Value};

const BINARY_V1: u8 = 1;

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
    let size: usize = row
        .values
        .iter()
        .map(|v| match v {
            Some(Value::Text(s)) => s.len() + 3,
            Some(Value::Blob(b)) => b.len() + 5,
            Some(Value::TextList(l)) => l.iter().map(|s| s.len() + 2).sum::<usize>() + 3,
            _ => 9,
        })
        .sum();
    let mut out = Vec::with_capacity(9 + size);
    out.extend_from_slice(&expires.to_be_bytes());
    out.push(BINARY_V1);
    for v in &row.values {
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
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return usize::try_from(n).map_err(|_| corrupt(self.table, "length"));
            }
        }
        Err(corrupt(self.table, "length"))
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

pub(super) fn decode(table: &'static Table, value: &[u8]) -> Result<Row, StoreError> {
    let body = value.get(8..).ok_or_else(|| corrupt(table, "no expiry"))?;
    let values: Vec<Option<Value>> = match body.first() {
        Some(&BINARY_V1) => {
            let mut r = Reader {
                buf: &body[1..],
                table,
            };
            let mut values = Vec::with_capacity(table.width());
            while !r.buf.is_empty() {
                values.push(match r.byte()? {
                    NULL => None,
                    TEXT => Some(Value::Text(r.text()?)),
                    INT => Some(Value::Int(i32::from_be_bytes(r.array()?))),
                    BIGINT => Some(Value::BigInt(i64::from_be_bytes(r.array()?))),
                    DOUBLE => Some(Value::Double(f64::from_bits(u64::from_be_bytes(
                        r.array()?,
                    )))),
                    FALSE => Some(Value::Boolean(false)),
                    TRUE => Some(Value::Boolean(true)),
                    BLOB => Some(Value::Blob(r.bytes()?.to_vec())),
                    TEXT_LIST => {
                        let n = r.varint()?;
                        let mut l = Vec::with_capacity(n.min(1024));
                        for _ in 0..n {
                            l.push(r.text()?);
                        }
                        Some(Value::TextList(l))
                    }
                    _ => return Err(corrupt(table, "tag")),
                });
            }
            values
        }
        // Rows written by earlier versions.
        Some(b'[') => serde_json::from_slice(body).map_err(|_| corrupt(table, "json"))?,
        _ => return Err(corrupt(table, "format")),
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

    proptest! {
        #[test]
        fn round_trips(values in proptest::collection::vec(value(), 7), expires in any::<u64>()) {
            let row = Row { table: &T, values };
            let enc = encode(&row, expires);
            prop_assert_eq!(&enc[..8], &expires.to_be_bytes());
            let back = decode(&T, &enc).unwrap();
            prop_assert_eq!(back.values, row.values);
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&T, &bytes);
        }
    }

    #[test]
    fn reads_rows_in_the_old_json_format() {
        let row = Row::new(&T)
            .set("id", "a")
            .set("n", 3)
            .set("l", vec!["x".to_owned()]);
        let mut old = 0u64.to_be_bytes().to_vec();
        serde_json::to_writer(&mut old, &row.values).unwrap();
        assert_eq!(decode(&T, &old).unwrap().values, row.values);
        assert!(encode(&row, 0).len() < old.len());
    }
}
