//! The one way to read more than a page: a stream of pages, each asked for
//! when the one before is used, so a loop over a partition or a whole table
//! holds one page at a time (the scylla driver's `rows_stream` shape). And
//! the one way to retry a read-compare-and-set that lost to another writer
//! ([`Contention`]).

use futures::Stream;

use super::{Cursor, Page, Scan, Slice, Store, StoreError, Table};

/// The pages of `slice` (its partition from `slice.after` on, `slice.limit`
/// rows a page), until the partition ends.
pub fn pages<'a>(
    store: &'a dyn Store,
    table: &'static Table,
    slice: Slice,
) -> impl Stream<Item = Result<Page, StoreError>> + Send + 'a {
    futures::stream::try_unfold(Some(slice), move |next| async move {
        let Some(slice) = next else {
            return Ok(None);
        };
        let page = store.slice(table, &slice).await?;
        let after = page.next.clone();
        let next = after.map(|a| slice.after(Some(a)));
        Ok(Some((page, next)))
    })
}

/// The pages of a whole table, `limit` rows a page, from `after` on
/// (maintenance jobs only: a scan crosses every partition).
pub fn table_pages<'a>(
    store: &'a dyn Store,
    table: &'static Table,
    after: Option<Cursor>,
    limit: usize,
) -> impl Stream<Item = Result<Page, StoreError>> + Send + 'a {
    futures::stream::try_unfold(Some(after), move |next| async move {
        let Some(after) = next else {
            return Ok(None);
        };
        let page = store.scan(table, Scan { after, limit }).await?;
        let next = page.next.clone().map(Some);
        Ok(Some((page, next)))
    })
}

/// The one way to retry a read-compare-and-set that lost to a concurrent
/// writer: the loop asks [`Contention::lost`] after each lost round, which
/// pauses a moment (longer each time, with jitter, so two writers that keep
/// colliding fall out of step) and says whether another round is allowed.
///
/// A loop, not a closure: an `async` closure that borrows the loop's state
/// cannot yet be shown to be `Send`, which every resolver's future must be.
#[derive(Debug)]
pub struct Contention {
    left: usize,
    round: u32,
}

impl Contention {
    /// At most `tries` rounds in all.
    pub fn new(tries: usize) -> Self {
        Contention {
            left: tries.max(1),
            round: 0,
        }
    }

    /// The round just played lost: `true` (after a short pause) when
    /// another may be tried, `false` when the tries are spent.
    pub async fn lost(&mut self) -> bool {
        self.left -= 1;
        if self.left == 0 {
            return false;
        }
        self.round += 1;
        let mut jitter = [0u8; 1];
        let _ = getrandom::fill(&mut jitter);
        let micros = (100u64 << self.round.min(6)) + u64::from(jitter[0]) * 4;
        tokio::time::sleep(std::time::Duration::from_micros(micros)).await;
        true
    }
}

#[cfg(test)]
mod tests {
    use futures::TryStreamExt;

    use super::*;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Mutation, Row};

    static T: Table = Table {
        keyspace: crate::store::Keyspace::Themes,
        name: "paging_probe",
        partition_key: &[crate::store::col("p", crate::store::ColumnType::Text)],
        clustering: &[(
            crate::store::col("c", crate::store::ColumnType::Int),
            crate::store::Order::Asc,
        )],
        columns: &[],
    };

    #[tokio::test]
    async fn a_partition_reads_page_by_page_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let rows = (0..25)
            .map(|c| Mutation::upsert(Row::new(&T).set("p", "x").set("c", c)))
            .collect();
        store.apply(rows).await.unwrap();
        let all: Vec<Page> = pages(&store, &T, Slice::partition(vec!["x".into()]).limit(10))
            .try_collect()
            .await
            .unwrap();
        let sizes: Vec<usize> = all.iter().map(|p| p.rows.len()).collect();
        assert_eq!(sizes, [10, 10, 5]);
        let scanned: usize = table_pages(&store, &T, None, 7)
            .map_ok(|p| p.rows.len())
            .try_fold(0, |n, k| async move { Ok(n + k) })
            .await
            .unwrap();
        assert_eq!(scanned, 25);
    }

    #[tokio::test]
    async fn a_lost_round_is_tried_again_until_the_tries_run_out() {
        let mut contention = Contention::new(3);
        assert!(contention.lost().await);
        assert!(contention.lost().await);
        assert!(!contention.lost().await, "three rounds in all");
        assert!(
            !Contention::new(0).lost().await,
            "at least one round, no more"
        );
    }
}
