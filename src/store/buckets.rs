//! Bucketed partitions (each within its budget in cql/README.md): one logical partition
//! that would grow with the data (a portal's assignments, a keyword's, the release
//! queue) is spread over [`BUCKETS`] partitions chosen by a hash of a clustering
//! column. A read slices every bucket concurrently and merges the rows in
//! clustering order behind one cursor, reading only a few rows more than the page.
//!
//! The bucket must be a function of the clustering key (here: of the ddb id), so
//! no clustering key can appear in two buckets; that is what lets one "last key"
//! cursor resume every bucket.

use std::collections::VecDeque;

use super::{
    Cursor, Page, Row, Slice, Store, StoreError, Table, Value, fnv1a, key, slice_fingerprint,
};

/// Buckets per logical partition. Part of the stored data's layout: changing it
/// means rebuilding every bucketed table.
pub const BUCKETS: i32 = 32;

/// The bucket of a value (FNV-1a of its UTF-8 bytes, stable across versions).
pub fn bucket_of(s: &str) -> i32 {
    (fnv1a(s.as_bytes()) % BUCKETS as u64) as i32
}

/// The partition keys of every bucket of `base` (the bucket column comes last).
pub fn all_buckets(base: &[Value]) -> Vec<Vec<Value>> {
    (0..BUCKETS)
        .map(|b| {
            let mut p = base.to_vec();
            p.push(Value::Int(b));
            p
        })
        .collect()
}

fn merged_fingerprint(table: &Table, partitions: &[Vec<Value>], s: &Slice) -> u64 {
    let shape = serde_json::to_vec(&(
        "merged",
        table.keyspace.prefix(),
        table.name,
        partitions,
        &s.prefix,
        &s.lower,
        &s.upper,
        s.reverse,
    ))
    .unwrap_or_default();
    fnv1a(&shape)
}

struct Source {
    slice: Slice,
    rows: VecDeque<(Vec<u8>, Row)>,
    /// The store's cursor for the rest of this bucket; `None` once it is read out.
    next: Option<Cursor>,
    chunk: usize,
}

fn clustering_bytes(table: &'static Table, row: &Row) -> Result<Vec<u8>, StoreError> {
    let pk = table.partition_key.len();
    let mut out = Vec::new();
    for (i, v) in row.clustering_key()?.iter().enumerate() {
        key::push(&mut out, v, key::order_of(table, pk + i))?;
    }
    Ok(out)
}

/// A merged slice's fingerprint (its cursors carry it) and the clustering
/// key its cursor resumes after, checked against it (BAD_CURSOR otherwise).
pub(crate) fn merged_start(
    table: &'static Table,
    partitions: &[Vec<Value>],
    template: &Slice,
) -> Result<(u64, Option<Vec<Value>>), StoreError> {
    if partitions.is_empty() || template.limit == 0 {
        return Err(StoreError::Invalid(
            "a merged slice needs partitions and a positive limit".into(),
        ));
    }
    let fp = merged_fingerprint(table, partitions, template);
    let pk = table.partition_key.len();
    let after = match &template.after {
        Some(c) => Some(c.key(table, fp, pk, table.clustering.len())?),
        None => None,
    };
    Ok((fp, after))
}

/// The merged page's fingerprint and the slice of each bucket in
/// `partitions`: `template` with the bucket's partition and, for a cursor
/// from an earlier merged page, that bucket's cursor at the same key.
fn bucket_slices(
    table: &'static Table,
    partitions: &[Vec<Value>],
    template: &Slice,
) -> Result<(u64, Vec<Slice>), StoreError> {
    let (fp, after) = merged_start(table, partitions, template)?;
    let slices = partitions
        .iter()
        .map(|p| {
            let mut slice = template.clone();
            slice.partition = p.clone();
            slice.after = after
                .as_ref()
                .map(|k| Cursor::after(slice_fingerprint(table, &slice), k.clone()));
            slice
        })
        .collect();
    Ok((fp, slices))
}

/// Reads `template` (prefix, bounds, direction, limit, and a cursor from an earlier
/// merged page) from every partition in `partitions` and merges the rows in
/// clustering order, through `slice_many` (what [`Store::merged_slice`] does
/// unless an engine merges natively). Each bucket is asked first for about
/// its share of the page plus one row; the buckets whose rows all made the
/// page are read again, together, with doubled chunks. Cursors in the page
/// are merged cursors.
pub async fn merged_slice<S: Store + ?Sized>(
    store: &S,
    table: &'static Table,
    partitions: &[Vec<Value>],
    template: &Slice,
) -> Result<Page, StoreError> {
    let (fp, slices) = bucket_slices(table, partitions, template)?;
    let limit = template.limit;
    let chunk = limit.div_ceil(partitions.len()) + 1;
    let mut sources: Vec<Source> = slices
        .into_iter()
        .map(|mut slice| {
            let start = slice.after.take();
            Source {
                slice,
                rows: VecDeque::new(),
                next: start,
                chunk,
            }
        })
        .collect();

    // Rounds: read every bucket that needs rows (at first all of them) in one
    // `slice_many`, then rank every row read so far. The page is final once
    // no bucket with more rows had all its read rows ranked into the page:
    // each such bucket then holds a read row below the page, and its unread
    // rows come after that one. Buckets whose read rows all made the page are
    // read again, all in the next round, with doubled chunks (a handful of
    // rounds at most; one bucket drained at a time would be a round each).
    let mut wanting: Vec<usize> = (0..sources.len()).collect();
    let order = loop {
        let slices: Vec<Slice> = wanting
            .iter()
            .map(|&i| {
                let s = &sources[i];
                let mut slice = s.slice.clone();
                slice.after = s.next.clone();
                slice.limit = s.chunk.min(limit + 1);
                slice
            })
            .collect();
        let pages = store.slice_many(table, &slices).await?;
        for (&i, page) in wanting.iter().zip(pages) {
            let s = &mut sources[i];
            s.chunk = s.chunk.saturating_mul(2);
            s.next = page.next;
            for r in page.rows {
                s.rows.push_back((clustering_bytes(table, &r)?, r));
            }
        }
        // Every read row as (source, position), in page order; ties go to
        // the lower bucket.
        let mut ranked: Vec<(usize, usize)> = sources
            .iter()
            .enumerate()
            .flat_map(|(i, s)| (0..s.rows.len()).map(move |j| (i, j)))
            .collect();
        ranked.sort_by(|&(i, j), &(k, l)| {
            let (a, b) = (&sources[i].rows[j].0, &sources[k].rows[l].0);
            let by_key = if template.reverse { b.cmp(a) } else { a.cmp(b) };
            by_key.then(i.cmp(&k))
        });
        ranked.truncate(limit);
        let mut taken = vec![0usize; sources.len()];
        for &(i, _) in &ranked {
            taken[i] += 1;
        }
        wanting = (0..sources.len())
            .filter(|&i| sources[i].next.is_some() && taken[i] == sources[i].rows.len())
            .collect();
        if wanting.is_empty() {
            break ranked;
        }
    };
    let mut out: Vec<Row> = Vec::with_capacity(order.len());
    for (i, _) in order {
        let (_, row) = sources[i].rows.pop_front().expect("a ranked row");
        out.push(row);
    }
    let more = sources
        .iter()
        .any(|s| !s.rows.is_empty() || s.next.is_some());
    Page::of_slice(fp, out, more)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{decode_cursor, encode_cursor};

    #[test]
    fn buckets_are_stable_and_spread() {
        // The layout of stored data depends on these values never changing.
        assert_eq!(bucket_of(""), (0xcbf2_9ce4_8422_2325u64 % 32) as i32);
        let mut seen = [0usize; BUCKETS as usize];
        for i in 0..3200 {
            seen[bucket_of(&format!("ddb-{i}")) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }

    use proptest::prelude::*;

    crate::store::table! {
        BUCKETED: Target.bucketed
            partition(portal: Text, bucket: Int)
            clustering(id: Text Asc)
    }

    proptest! {
        // Each case opens an embedded store: fewer cases than the parsers get.
        #![proptest_config(ProptestConfig { cases: 48, ..crate::kernel::proptest_config() })]

        /// Paging through a merged slice, `limit` rows at a time, gives every
        /// row exactly once and in the order one sorted list would, however
        /// the rows fall into buckets (skewed, empty).
        #[test]
        fn merged_pages_are_the_sorted_rows(
            rows in prop::collection::vec((0..BUCKETS, "[a-d]{0,4}"), 0..160),
            skew in any::<bool>(),
            limit in 1usize..40,
            reverse in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let store = crate::store::embedded::EmbeddedStore::open(dir.path()).unwrap();
                let mut want: Vec<(String, i32)> = Vec::new();
                let mut writes = Vec::new();
                for (b, id) in rows {
                    // Skewed: most rows in bucket 3, so it runs dry round after round.
                    let b = if skew && b % 4 != 0 { 3 } else { b };
                    // A clustering key lives in one bucket (the bucket is a
                    // hash of a key column): merged cursors rely on it.
                    if want.iter().any(|(w, _)| *w == id) {
                        continue;
                    }
                    want.push((id.clone(), b));
                    writes.push(crate::store::Mutation::upsert(
                        Row::new(&BUCKETED)
                            .set("portal", "p")
                            .set("bucket", b)
                            .set("id", id.as_str()),
                    ));
                }
                store.apply(writes).await.unwrap();
                want.sort();
                if reverse {
                    want.reverse();
                }
                let partitions = all_buckets(&[Value::Text("p".into())]);
                let mut got: Vec<(String, i32)> = Vec::new();
                let mut after = None;
                loop {
                    let template = Slice::partition(vec![])
                        .limit(limit)
                        .reverse(reverse)
                        .after(after.clone());
                    let page = merged_slice(&store, &BUCKETED, &partitions, &template).await.unwrap();
                    // The engine's own merge: the same rows and cursor.
                    let native = store.merged_slice(&BUCKETED, &partitions, &template).await.unwrap();
                    assert!(store.merges_natively());
                    assert_eq!(format!("{:?}", native.rows), format!("{:?}", page.rows));
                    assert_eq!(native.next, page.next);
                    assert!(page.rows.len() <= limit);
                    for r in &page.rows {
                        let k = r.key().unwrap();
                        let (Value::Text(id), Value::Int(b)) = (&k[2], &k[1]) else { panic!("{k:?}") };
                        got.push((id.clone(), *b));
                    }
                    match page.next {
                        Some(c) => after = Some(c),
                        None => break,
                    }
                    assert!(got.len() <= want.len(), "more rows than stored");
                }
                assert_eq!(got, want);
            });
        }
    }

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        #[test]
        fn a_merged_cursor_and_a_bucket_cursor_are_not_interchangeable(
            portal in ".{0,8}", id in ".{0,12}", reverse in any::<bool>(), b in 0..BUCKETS,
        ) {
            let partitions = all_buckets(&[Value::Text(portal)]);
            let template = Slice::partition(vec![]).reverse(reverse);
            let merged_fp = merged_fingerprint(&BUCKETED, &partitions, &template);
            let mut one = template.clone();
            one.partition = partitions[b as usize].clone();
            let bucket_fp = slice_fingerprint(&BUCKETED, &one);
            let key = vec![Value::Text(id)];

            let merged = encode_cursor(merged_fp, key.clone());
            prop_assert_eq!(decode_cursor(&BUCKETED, merged_fp, &merged, 2, 1).unwrap(), key.clone());
            prop_assert!(matches!(
                decode_cursor(&BUCKETED, bucket_fp, &merged, 2, 1),
                Err(StoreError::BadCursor)
            ));
            let bucket = encode_cursor(bucket_fp, key);
            prop_assert!(matches!(
                decode_cursor(&BUCKETED, merged_fp, &bucket, 2, 1),
                Err(StoreError::BadCursor)
            ));
        }

        #[test]
        fn a_merged_cursor_belongs_to_its_portal_and_direction(
            a in ".{0,8}", b in ".{0,8}", reverse in any::<bool>(),
        ) {
            let template = Slice::partition(vec![]).reverse(reverse);
            let fa = merged_fingerprint(&BUCKETED, &all_buckets(&[Value::Text(a.clone())]), &template);
            let fb = merged_fingerprint(&BUCKETED, &all_buckets(&[Value::Text(b.clone())]), &template);
            prop_assert_eq!(fa == fb, a == b);
            let turned = template.clone().reverse(!reverse);
            let ft = merged_fingerprint(&BUCKETED, &all_buckets(&[Value::Text(a)]), &turned);
            prop_assert_ne!(fa, ft);
        }

        #[test]
        fn every_id_falls_in_one_of_the_bucket_partitions(id in any::<String>(), base in ".{0,8}") {
            let b = bucket_of(&id);
            prop_assert!((0..BUCKETS).contains(&b));
            let base = vec![Value::Text(base)];
            let partitions = all_buckets(&base);
            prop_assert_eq!(partitions.len(), BUCKETS as usize);
            let mut expected = base;
            expected.push(Value::Int(b));
            prop_assert_eq!(&partitions[b as usize], &expected);
        }
    }
}
