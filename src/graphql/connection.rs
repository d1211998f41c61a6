//! The one Relay connection builder. Store cursors become text only here:
//! `after` arguments are decoded once (`after`), and every connection is
//! built by `connection` from the page's (cursor, node) pairs, so each list
//! field pages the same way, with `first` checked by `common::page_size`.

use async_graphql::OutputType;
use async_graphql::connection::{
    Connection, ConnectionNameType, CursorType, DefaultConnectionName, DefaultEdgeName, Edge,
    EdgeNameType, EmptyFields,
};

use crate::error::ApiError;
use crate::store::{Cursor, Listed, StoreError};

impl CursorType for Cursor {
    type Error = StoreError;

    fn decode_cursor(s: &str) -> Result<Self, Self::Error> {
        Cursor::decode(s)
    }

    fn encode_cursor(&self) -> String {
        self.encode()
    }
}

/// A connection of `N` (named after `N`, or after `C` and `E`).
pub type Page<N, C = DefaultConnectionName, E = DefaultEdgeName> =
    Connection<Cursor, N, EmptyFields, EmptyFields, C, E>;

/// The `after` argument of a connection field, decoded: BAD_CURSOR when it is
/// not a cursor this server made.
pub fn after(text: Option<String>) -> Result<Option<Cursor>, ApiError> {
    text.map(|t| Cursor::decode(&t).map_err(ApiError::from))
        .transpose()
}

/// Builds a connection from a domain's page of nodes; `after` says whether
/// it was asked for after a cursor (so earlier items exist).
pub fn connection<N, C, E>(page: Listed<N>, after: bool) -> Page<N, C, E>
where
    N: OutputType,
    C: ConnectionNameType,
    E: EdgeNameType,
{
    let mut conn = Connection::new(after, page.has_next);
    conn.edges
        .extend(page.items.into_iter().map(|(c, n)| Edge::new(c, n)));
    conn
}
