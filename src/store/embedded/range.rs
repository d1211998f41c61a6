//! A slice as a range of encoded keys: its bounds from the partition, prefix, bounds and cursor, and reading it in either order.

use super::*;

/// One slice as a key range of the rows table, checked and encoded (outside
/// the blocking pool), read by [`SliceRange::read`] inside a transaction.
pub(super) struct SliceRange {
    /// The slice's fingerprint (its cursors carry it).
    pub(super) fp: u64,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
    reverse: bool,
    limit: usize,
    /// Where the clustering part of every key in the range begins.
    pub(super) partition_len: usize,
}

impl SliceRange {
    pub(super) fn of(table: &'static Table, s: &Slice) -> Result<SliceRange, StoreError> {
        check_slice(table, s)?;
        let fp = slice_fingerprint(table, s);
        let pk = table.partition_key.len();
        let after = match &s.after {
            Some(c) => Some(c.key(table, fp, pk, table.clustering.len())?),
            None => None,
        };
        Self::within(table, s, fp, after.as_deref())
    }

    /// One bucket of a merged slice: `s` without a cursor of its own,
    /// resumed after the clustering key `after` of the merged cursor (which
    /// the merge has checked), with no fingerprint of its own (the page's
    /// cursor is the merged one).
    pub(super) fn bucket(
        table: &'static Table,
        s: &Slice,
        after: Option<&[Value]>,
    ) -> Result<SliceRange, StoreError> {
        check_slice(table, s)?;
        Self::within(table, s, 0, after)
    }

    fn within(
        table: &'static Table,
        s: &Slice,
        fp: u64,
        after: Option<&[Value]>,
    ) -> Result<SliceRange, StoreError> {
        let ((start, end), partition_len) = key::slice_range_of_partition(table, s)?;
        let after = match after {
            Some(ck) => Some(key::cursor_key(table, s, ck, (&start, end.as_deref()))?),
            None => None,
        };
        Ok(SliceRange {
            fp,
            start,
            end,
            after,
            reverse: s.reverse,
            limit: s.limit,
            partition_len,
        })
    }

    /// The range's entries in key order; `None` when it is empty.
    pub(super) fn range<'t>(
        &self,
        rows: &'t RowsTree,
    ) -> Result<Option<RowsRange<'t>>, StoreError> {
        let mut lo = RBound::Included(self.start.as_slice());
        let mut hi = match &self.end {
            Some(e) => RBound::Excluded(e.as_slice()),
            None => RBound::Unbounded,
        };
        if let Some(a) = &self.after {
            if self.reverse {
                hi = RBound::Excluded(a.as_slice());
            } else {
                lo = RBound::Excluded(a.as_slice());
            }
        }
        if let (RBound::Included(l) | RBound::Excluded(l), RBound::Excluded(h)) = (lo, hi)
            && l >= h
        {
            return Ok(None);
        }
        Ok(Some(rows.range::<&[u8]>((lo, hi)).map_err(db_err)?))
    }

    /// Up to `limit + 1` live rows of the range (one more tells whether more follow).
    pub(super) fn read(
        &self,
        rows: &RowsTree,
        table: &'static Table,
        now: u64,
    ) -> Result<Vec<Row>, StoreError> {
        let Some(range) = self.range(rows)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let limit = self.limit;
        let mut push = |entry: RangeEntry<'_>| -> Result<bool, StoreError> {
            let (k, v) = entry.map_err(db_err)?;
            if !expired(v.value(), now) {
                out.push(decode_row(table, k.value(), v.value())?);
            }
            Ok(out.len() > limit)
        };
        if self.reverse {
            for e in range.rev() {
                if push(e)? {
                    break;
                }
            }
        } else {
            for e in range {
                if push(e)? {
                    break;
                }
            }
        }
        Ok(out)
    }
}
