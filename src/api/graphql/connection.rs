//! The one Relay connection builder. Store cursors become text only here:
//! `after` arguments are decoded once (`after`), and every connection is
//! built by `connection` from the page's (cursor, node) pairs, so each list
//! field pages the same way, with `first` checked by `common::page_size`.

use async_graphql::OutputType;
use async_graphql::connection::{
    Connection, ConnectionNameType, CursorType, DefaultConnectionName, DefaultEdgeName, Edge,
    EdgeNameType, EmptyFields,
};

use crate::kernel::error::ApiError;
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

/// The `first` and `after` arguments of a connection field, checked and
/// decoded, and whether the page asked for starts after a cursor (so the
/// built connection says earlier items exist).
pub fn window(
    first: Option<i32>,
    after: Option<String>,
) -> Result<(usize, Option<Cursor>, bool), ApiError> {
    let first = crate::kernel::page_size(first)?;
    let after = self::after(after)?;
    let has_previous = after.is_some();
    Ok((first, after, has_previous))
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        /// `after` is what a client sends: a cursor this server made reads
        /// back as itself, anything else is BAD_CURSOR (a 400), never a panic.
        #[test]
        fn an_after_argument_is_a_cursor_or_bad_cursor(
            text in prop_oneof![
                any::<String>(),
                "1\\.[A-Za-z0-9_-]{0,120}",
                (any::<u64>(), prop::collection::vec(any::<u8>(), 0..64))
                    .prop_map(|(q, s)| Cursor::paging(q, &s).encode()),
            ],
        ) {
            match after(Some(text.clone())) {
                Ok(Some(c)) => prop_assert_eq!(Some(c), Cursor::decode(&text).ok()),
                Ok(None) => prop_assert!(false, "a text is never no cursor"),
                Err(e) => {
                    prop_assert!(Cursor::decode(&text).is_err());
                    prop_assert_eq!((e.code(), e.status()), ("BAD_CURSOR", 400));
                }
            }
        }

        /// The text of every edge's cursor is accepted back as `after`.
        #[test]
        fn every_edge_cursor_is_accepted_as_after(
            states in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..32), 0..5),
            q in any::<u64>(),
            has_next in any::<bool>(),
        ) {
            let items: Vec<(Cursor, i32)> =
                states.iter().map(|s| Cursor::paging(q, s)).zip(0..).collect();
            let page: Page<i32> = connection(Listed { items: items.clone(), has_next }, true);
            prop_assert_eq!(page.has_next_page, has_next);
            prop_assert_eq!(page.edges.len(), items.len());
            for (edge, (cursor, n)) in page.edges.iter().zip(items) {
                prop_assert_eq!(edge.node, n);
                let back = after(Some(edge.cursor.encode_cursor())).unwrap().unwrap();
                prop_assert_eq!(back, cursor);
            }
        }
    }

    #[test]
    fn no_after_argument_is_the_first_page() {
        assert!(after(None).unwrap().is_none());
    }
}
