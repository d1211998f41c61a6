//! The weights of list fields in a query's complexity (`--max-complexity`):
//! a list field costs what one item costs times the items it may return, so
//! a query's complexity bounds the objects its answer can hold. The
//! arithmetic saturates, and every weight is capped at [`CAP`], so that
//! async-graphql's own sums (plain `+` on `usize`, which wraps in a release
//! build) stay far from overflowing: a query has at most `--max-complexity`
//! selections (counted by the gate before validation), each at most `CAP`.

use crate::kernel::{DEFAULT_FIRST, MAX_FIRST};

/// The most one field's weight may be: large enough to refuse any query
/// over the limit, small enough that 2^20 of them still add up in a `usize`.
pub const CAP: usize = 1 << 40;

/// A field that returns `items` objects of `child` complexity each (a
/// scalar, whose `child` is 0, weighs 1).
pub fn list(items: usize, child: usize) -> usize {
    child
        .max(1)
        .saturating_mul(items)
        .saturating_add(1)
        .min(CAP)
}

/// A page of `first` items (the default when absent; a `first` outside the
/// allowed range is refused by the resolver, and weighs as the largest).
pub fn page(first: Option<i32>, child: usize) -> usize {
    let n = match first {
        None => DEFAULT_FIRST,
        Some(n) if (1..=MAX_FIRST).contains(&n) => n,
        Some(_) => MAX_FIRST,
    };
    list(n as usize, child)
}

/// `count` items asked for by a `count`-like argument with `default` and
/// the largest accepted `most`.
pub fn counted(count: Option<i32>, default: usize, most: usize, child: usize) -> usize {
    let n = count.map_or(default, |n| usize::try_from(n).unwrap_or(most).min(most));
    list(n, child)
}

/// Items that one argument lists (`pageIds`, `keys`): each costs `per_item` children.
pub fn per_argument_item(len: usize, per_item: usize, child: usize) -> usize {
    list(len.saturating_mul(per_item), child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_saturate_below_the_cap() {
        assert_eq!(page(Some(i32::MAX), usize::MAX), CAP);
        assert_eq!(page(Some(-5), 3), 3 * MAX_FIRST as usize + 1);
        assert_eq!(page(None, 2), 2 * DEFAULT_FIRST as usize + 1);
        assert_eq!(list(usize::MAX, usize::MAX), CAP);
        assert_eq!(counted(Some(-1), 10, 50, 1), 51);
        assert_eq!(list(1000, 0), 1001, "a list of scalars weighs its items");
        assert_eq!(per_argument_item(usize::MAX, 50, 7), CAP);
        // What async-graphql adds up cannot wrap: 2^20 fields at the cap.
        assert!(CAP.checked_mul(1 << 20).is_some());
    }
}
