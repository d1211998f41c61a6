//! How the embedded engine stores a row's values.
//!
//! A row written now is `2`, its expiry (`expires_at_ms` as LEB128, 0 =
//! never), then its non-key columns, each a tag and its payload (lengths as
//! LEB128): the key columns are in the row's key already, and are read back
//! from it (`key::decode`). Rows of earlier versions start with the expiry as
//! a u64 BE (so with 0x00: no expiry is 2^56 ms away) and hold every column:
//! binary (`1`, then the columns) or JSON (`[...]`). Both are still read.
//! A text that is an RFC 3339 UTC time is stored as numbers (`TIME`). An
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
/// Text that is an RFC 3339 UTC time (see [`timestamp`]).
const TIME: u8 = 9;

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
            // Cassandra has no empty collection: it reads back as null. So
            // does this engine's.
            None => out.push(NULL),
            Some(Value::TextList(l)) if l.is_empty() => out.push(NULL),
            Some(Value::Text(s)) => match timestamp::parse(s) {
                Some((secs, count, fraction)) => {
                    out.push(TIME);
                    varint(&mut out, secs);
                    out.push(count);
                    if count > 0 {
                        varint(&mut out, u64::from(fraction));
                    }
                }
                None => {
                    out.push(TEXT);
                    bytes(&mut out, s.as_bytes());
                }
            },
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

/// An RFC 3339 UTC time as the service writes them (`2026-12-05T10:11:12Z`,
/// or with 1 to 9 digits of fraction) in 7 to 11 bytes instead of 20 to 30:
/// seconds since 1970 and the fraction's digits. Only text that this
/// format gives back byte for byte is stored so; any other text is TEXT.
mod timestamp {
    /// Seconds since 1970-01-01, the fraction's digit count and its value.
    pub(super) fn parse(s: &str) -> Option<(u64, u8, u32)> {
        let b = s.as_bytes();
        if !(b.len() == 20 || (22..=30).contains(&b.len())) || b[b.len() - 1] != b'Z' {
            return None;
        }
        let digits = |r: std::ops::Range<usize>| -> Option<u32> {
            b[r].iter().try_fold(0u32, |n, c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (y, mo, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
        let (h, mi, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
        if y < 1970 || !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
            return None;
        }
        if h > 23 || mi > 59 || sec > 59 {
            return None;
        }
        let (count, fraction) = if b.len() == 20 {
            (0, 0)
        } else {
            if b[19] != b'.' {
                return None;
            }
            let n = b.len() - 21;
            (n as u8, digits(20..20 + n)?)
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86_400 + u64::from(h * 3600 + mi * 60 + sec);
        Some((secs, count, fraction))
    }

    pub(super) fn format(secs: u64, count: u8, fraction: u32) -> Option<String> {
        if count > 9 || (count > 0 && u64::from(fraction) >= 10u64.pow(u32::from(count))) {
            return None;
        }
        let (y, mo, d) = civil_from_days(secs / 86_400);
        if y > 9999 {
            return None;
        }
        let t = secs % 86_400;
        let mut out = String::with_capacity(30);
        fn put(out: &mut String, n: u64, width: u32) {
            for i in (0..width).rev() {
                out.push(char::from(b'0' + (n / 10u64.pow(i) % 10) as u8));
            }
        }
        put(&mut out, y, 4);
        out.push('-');
        put(&mut out, mo, 2);
        out.push('-');
        put(&mut out, d, 2);
        out.push('T');
        put(&mut out, t / 3600, 2);
        out.push(':');
        put(&mut out, t / 60 % 60, 2);
        out.push(':');
        put(&mut out, t % 60, 2);
        if count > 0 {
            out.push('.');
            put(&mut out, u64::from(fraction), u32::from(count));
        }
        out.push('Z');
        Some(out)
    }

    fn leap(y: u32) -> bool {
        y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400))
    }

    fn days_in_month(y: u32, m: u32) -> u32 {
        match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    /// Days since 1970-01-01 of a date from 1970 on (H. Hinnant's algorithm).
    fn days_from_civil(y: u32, m: u32, d: u32) -> u64 {
        let y = u64::from(if m <= 2 { y - 1 } else { y });
        let era = y / 400;
        let yoe = y - era * 400;
        let mp = u64::from((m + 9) % 12);
        let doy = (153 * mp + 2) / 5 + u64::from(d) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    fn civil_from_days(z: u64) -> (u64, u64, u64) {
        let z = z + 719_468;
        let era = z / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + u64::from(m <= 2);
        (y, m, d)
    }
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
                TIME => {
                    let secs = self.varint64()?;
                    let count = self.byte()?;
                    let fraction = if count > 0 { self.varint64()? } else { 0 };
                    let t = u32::try_from(fraction)
                        .ok()
                        .and_then(|f| timestamp::format(secs, count, f))
                        .ok_or_else(|| corrupt(self.table, "time"))?;
                    Some(Value::Text(t))
                }
                // An empty list, as rows written before empty lists were
                // stored as null have it, reads as null.
                TEXT_LIST => match self.varint()? {
                    0 => None,
                    n => {
                        let mut l = Vec::with_capacity(n.min(1024));
                        for _ in 0..n {
                            l.push(self.text()?);
                        }
                        Some(Value::TextList(l))
                    }
                },
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
                // Rows written by the first versions; an empty list reads
                // as null, as in the binary formats.
                Some(b'[') => {
                    let mut values: Vec<Option<Value>> =
                        serde_json::from_slice(body).map_err(|_| corrupt(table, "json"))?;
                    for v in &mut values {
                        if matches!(v, Some(Value::TextList(l)) if l.is_empty()) {
                            *v = None;
                        }
                    }
                    values
                }
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

    use proptest::prelude::*;

    crate::store::table! {
        T: Themes.codec_test
            partition(id: Text)
            columns(n: Int, b: BigInt, d: Double, f: Boolean, blob: Blob, l: TextList)
    }

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
            // Empty lists read back as null: `empty_lists_are_null`.
            proptest::collection::vec(".*", 1..5).prop_map(|l| Some(Value::TextList(l))),
        ]
    }

    #[test]
    fn empty_lists_are_null() {
        let mut rest = vec![None; 6];
        rest[5] = Some(Value::TextList(Vec::new()));
        let row = row("x".into(), rest);
        let key = key::encode(&T, &row.key().unwrap()).unwrap();
        let got = decode(&T, &key, &encode(&row, 0)).unwrap();
        assert_eq!(
            got.values,
            [vec![Some(Value::Text("x".into()))], vec![None; 6]].concat()
        );
        // As format 1 wrote it.
        let mut old = 0u64.to_be_bytes().to_vec();
        old.extend([
            BINARY_V1, TEXT, 1, b'x', NULL, NULL, NULL, NULL, NULL, TEXT_LIST, 0,
        ]);
        assert_eq!(decode(&T, &key, &old).unwrap().values, got.values);
        // As format 2 wrote it before empty lists were null.
        let v2 = [BINARY_V2, 0, NULL, NULL, NULL, NULL, NULL, TEXT_LIST, 0];
        assert_eq!(decode(&T, &key, &v2).unwrap().values, got.values);
        // As the first versions wrote it (JSON).
        let mut json = 0u64.to_be_bytes().to_vec();
        serde_json::to_writer(&mut json, &row.values).unwrap();
        assert_eq!(decode(&T, &key, &json).unwrap().values, got.values);
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

    proptest! {
        #[test]
        fn times_round_trip_byte_for_byte(
            secs in 0u64..253_402_300_800, count in 0u8..=9, fraction in any::<u32>(),
        ) {
            let fraction = if count == 0 { 0 } else { fraction % 10u32.pow(u32::from(count)) };
            let text = timestamp::format(secs, count, fraction).unwrap();
            prop_assert_eq!(timestamp::parse(&text), Some((secs, count, fraction)));
            let row = Row::new(&T).set("id", text.as_str());
            let key = key::encode(&T, &row.key().unwrap()).unwrap();
            prop_assert_eq!(decode(&T, &key, &encode(&row, 0)).unwrap().values, row.values);
        }

        #[test]
        fn time_like_text_round_trips(s in "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,10})?Z?") {
            if let Some((secs, count, fraction)) = timestamp::parse(&s) {
                prop_assert_eq!(timestamp::format(secs, count, fraction), Some(s.clone()));
            }
            let mut row = Row::new(&T).set("id", "k");
            row.values[5] = Some(Value::Text(s.clone()));
            let key = key::encode(&T, &row.key().unwrap()).unwrap();
            prop_assert_eq!(decode(&T, &key, &encode(&row, 0)).unwrap().values, row.values);
        }
    }

    #[test]
    fn the_service_s_times_take_the_short_form() {
        for (s, len) in [
            ("2026-12-05T10:11:12Z", 7),
            ("2026-12-05T10:11:12.123456789Z", 11),
            ("1970-01-01T00:00:00Z", 3),
            ("2024-02-29T23:59:59.5Z", 8),
        ] {
            let t = timestamp::parse(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(timestamp::format(t.0, t.1, t.2).as_deref(), Some(s));
            let mut row = Row::new(&T).set("id", "k").set("l", Vec::<String>::new());
            row.values[5] = Some(Value::from(s));
            // The id's key column is not in the value; `2`, the expiry, 4
            // NULL tags, the time, and the empty list's NULL tag.
            assert_eq!(encode(&row, 0).len(), 2 + 4 + len + 1, "{s}");
        }
        for s in [
            "2023-02-29T00:00:00Z",
            "2026-12-05T24:00:00Z",
            "2026-12-05T10:11:60Z",
            "1969-12-31T23:59:59Z",
            "2026-12-05T10:11:12.Z",
            "2026-12-05T10:11:12+00:00",
            "2026-12-05 10:11:12Z",
        ] {
            assert_eq!(timestamp::parse(s), None, "{s}");
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
