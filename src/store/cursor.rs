//! The one paging type. A [`Cursor`] is a position in the results of one
//! query: after a given key of a slice (or of a merged bucket slice, or a
//! scan of the embedded store), or at a driver paging state (a scan of the
//! cluster). Inside the program it is a value; it becomes text only at the
//! edge (`encode`), and text becomes a cursor again only there (`decode`).
//!
//! Encoding: `1.` then base64url of a JSON document. The version lets the
//! format change without reading old cursors as something else. A cursor
//! names the query it belongs to (a fingerprint of table, partition, prefix,
//! bounds and direction), so a cursor of another query, a forged, truncated
//! or mistyped one is [`StoreError::BadCursor`], never a wrong page.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{StoreError, Table, Value, check_types};

/// Longest cursor text accepted (a key of a few ids is far shorter).
const MAX_TEXT: usize = 4096;
const VERSION: &str = "1.";

#[derive(Clone, Debug, PartialEq)]
pub struct Cursor(Position);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Position {
    /// After the row whose key (from the query's first free key column) is `k`.
    #[serde(rename = "a")]
    After { q: u64, k: Vec<Value> },
    /// A driver's paging state, base64 inside the document.
    #[serde(rename = "p")]
    Paging { q: u64, s: String },
}

impl Cursor {
    /// After `key` in the query with fingerprint `query`.
    pub(crate) fn after(query: u64, key: Vec<Value>) -> Cursor {
        Cursor(Position::After { q: query, k: key })
    }

    /// At a driver paging state of the query with fingerprint `query`.
    pub(crate) fn paging(query: u64, state: &[u8]) -> Cursor {
        Cursor(Position::Paging {
            q: query,
            s: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(state),
        })
    }

    /// The text a client carries.
    pub fn encode(&self) -> String {
        let doc = serde_json::to_vec(&self.0).expect("values serialise");
        format!(
            "{VERSION}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc)
        )
    }

    /// Reads a cursor a client sent back. Whether it fits the query is
    /// checked when it is used.
    pub fn decode(text: &str) -> Result<Cursor, StoreError> {
        if text.len() > MAX_TEXT {
            return Err(StoreError::BadCursor);
        }
        let body = text.strip_prefix(VERSION).ok_or(StoreError::BadCursor)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| StoreError::BadCursor)?;
        let position = serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)?;
        Ok(Cursor(position))
    }

    /// The key to continue after, if this cursor belongs to the query with
    /// fingerprint `query` and holds `key_len` values typed like the table's
    /// key columns from `start`.
    pub(crate) fn key(
        &self,
        table: &'static Table,
        query: u64,
        start: usize,
        key_len: usize,
    ) -> Result<Vec<Value>, StoreError> {
        match &self.0 {
            Position::After { q, k } if *q == query && k.len() == key_len => {
                check_types(table, start, k.iter().map(Some)).map_err(|_| StoreError::BadCursor)?;
                Ok(k.clone())
            }
            _ => Err(StoreError::BadCursor),
        }
    }

    /// The paging state to continue at, if this cursor belongs to `query`.
    pub(crate) fn paging_state(&self, query: u64) -> Result<Vec<u8>, StoreError> {
        match &self.0 {
            Position::Paging { q, s } if *q == query => {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(s)
                    .map_err(|_| StoreError::BadCursor)
            }
            _ => Err(StoreError::BadCursor),
        }
    }
}

/// The fingerprint of a slice: what a cursor of it must name.
pub(crate) fn slice_fingerprint(table: &Table, slice: &super::Slice) -> u64 {
    let shape = serde_json::to_vec(&(
        table.keyspace.prefix(),
        table.name,
        &slice.partition,
        &slice.prefix,
        &slice.lower,
        &slice.upper,
        slice.reverse,
    ))
    .unwrap_or_default();
    fnv1a(&shape)
}

/// A short stable hash of a text, hex (for ETags and cache keys).
pub fn fnv1a_hex(text: &str) -> String {
    fnv1a_hex_bytes(text.as_bytes())
}

/// A short stable hash of bytes, hex.
pub fn fnv1a_hex_bytes(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a(bytes))
}

pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_parts(&[bytes])
}

/// [`fnv1a`] of the parts' concatenation, without building it.
pub(crate) fn fnv1a_parts(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The text of a cursor after `key` (tests of the codec).
#[cfg(test)]
pub(crate) fn encode_cursor(query: u64, key: Vec<Value>) -> String {
    Cursor::after(query, key).encode()
}

/// Decodes cursor text and checks it against a query (tests of the codec).
#[cfg(test)]
pub(crate) fn decode_cursor(
    table: &'static Table,
    query: u64,
    text: &str,
    start: usize,
    key_len: usize,
) -> Result<Vec<Value>, StoreError> {
    Cursor::decode(text)?.key(table, query, start, key_len)
}
