//! A merged slice of bucket partitions (see [`crate::store::buckets`]) in
//! one walk: every bucket's key range is opened in one read transaction and
//! the ranges are merged on their encoded keys, whose clustering part
//! compares byte by byte as the rows order. Only the rows that make the page
//! are decoded, and no bucket is read twice; the default merge reads about
//! twice the page in rounds and decodes all of it.

use super::*;

/// A key and its value, as the range handed them out.
type Entry<'t> = (
    redb::AccessGuard<'t, &'static [u8]>,
    redb::AccessGuard<'t, &'static [u8]>,
);

/// One bucket's range during a merge: its next live entry, and where the
/// clustering part of its keys begins.
struct Head<'t> {
    range: RowsRange<'t>,
    entry: Option<Entry<'t>>,
    partition_len: usize,
}

impl Head<'_> {
    /// Moves on to the range's next live entry (in the slice's direction).
    fn advance(&mut self, reverse: bool, now: u64) -> Result<(), StoreError> {
        self.entry = None;
        loop {
            let next = if reverse {
                self.range.next_back()
            } else {
                self.range.next()
            };
            let Some(e) = next else { return Ok(()) };
            let (k, v) = e.map_err(db_err)?;
            if !expired(v.value(), now) {
                self.entry = Some((k, v));
                return Ok(());
            }
        }
    }

    /// The clustering part of the next entry's key.
    fn clustering(&self) -> Option<&[u8]> {
        self.entry
            .as_ref()
            .map(|(k, _)| &k.value()[self.partition_len..])
    }
}

impl EmbeddedStore {
    pub(super) async fn merged(
        &self,
        table: &'static Table,
        partitions: &[Vec<Value>],
        template: &Slice,
    ) -> Result<Page, StoreError> {
        let (fp, after) = super::super::buckets::merged_start(table, partitions, template)?;
        // The buckets resume after `after`, not after a cursor of their own.
        let mut slice = Slice {
            after: None,
            ..template.clone()
        };
        let ranges = partitions
            .iter()
            .map(|p| {
                slice.partition.clone_from(p);
                SliceRange::bucket(table, &slice, after.as_deref())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let (limit, reverse) = (template.limit, template.reverse);
        let size = limit.saturating_add(ranges.len());
        let (rows, more) = self
            .read(table, size, move |tree, now| {
                merge(tree, table, &ranges, limit, reverse, now)
            })
            .await?;
        Page::of_slice(fp, rows, more)
    }
}

/// Whether head `a`'s entry comes before head `b`'s in the merge (`Less`):
/// by clustering key in the slice's direction, a tie (which bucketing rules
/// out) to the earlier range. Both heads have an entry.
fn comes_before(heads: &[Head<'_>], reverse: bool, a: usize, b: usize) -> std::cmp::Ordering {
    let (ka, kb) = (heads[a].clustering(), heads[b].clustering());
    let by_key = if reverse { kb.cmp(&ka) } else { ka.cmp(&kb) };
    by_key.then(a.cmp(&b))
}

/// The first `limit` live rows of all `ranges` together, in clustering order
/// (ties, which bucketing rules out, to the earlier range), and whether more
/// follow.
fn merge(
    tree: &RowsTree,
    table: &'static Table,
    ranges: &[SliceRange],
    limit: usize,
    reverse: bool,
    now: u64,
) -> Result<(Vec<Row>, bool), StoreError> {
    let mut heads = Vec::with_capacity(ranges.len());
    for r in ranges {
        if let Some(range) = r.range(tree)? {
            let mut head = Head {
                range,
                entry: None,
                partition_len: r.partition_len,
            };
            head.advance(reverse, now)?;
            heads.push(head);
        }
    }
    // The heads with an entry, the one whose entry comes next last: a pick
    // is a pop, and the picked head goes back in by binary search (five
    // comparisons of 32 heads, not 32).
    let mut order: Vec<usize> = (0..heads.len())
        .filter(|&i| heads[i].entry.is_some())
        .collect();
    order.sort_by(|&a, &b| comes_before(&heads, reverse, b, a));
    let mut out = Vec::with_capacity(limit.min(1024));
    while out.len() < limit {
        let Some(i) = order.pop() else { break };
        let head = &mut heads[i];
        if let Some((k, v)) = head.entry.take() {
            out.push(decode_row(table, k.value(), v.value())?);
        }
        head.advance(reverse, now)?;
        if heads[i].entry.is_some() {
            let at = order.partition_point(|&j| {
                comes_before(&heads, reverse, i, j) == std::cmp::Ordering::Less
            });
            order.insert(at, i);
        }
    }
    let more = heads.iter().any(|h| h.entry.is_some());
    Ok((out, more))
}
