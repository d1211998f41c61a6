//! The one way to read more than a page: a stream of pages, each asked for
//! when the one before is used, so a loop over a partition or a whole table
//! holds one page at a time (the scylla driver's `rows_stream` shape). And
//! the one way to retry a read-compare-and-set that lost to another writer.

use futures::Stream;

use super::{Cursor, Page, Slice, Store, StoreError, Table};

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
        let page = store.scan(table, after, limit).await?;
        let next = page.next.clone().map(Some);
        Ok(Some((page, next)))
    })
}

/// What one round of a read-compare-and-set loop found.
pub enum Round<T> {
    /// It is settled: this is the answer.
    Done(T),
    /// A concurrent writer got in first: read again.
    Lost,
}

/// Runs `round` until it settles, at most `tries` times; after that many
/// lost rounds, `exhausted` is the answer (a row that keeps changing under
/// the caller: CONFLICT or UNAVAILABLE, as the caller sees fit).
pub async fn until_settled<T, E>(
    tries: usize,
    mut round: impl AsyncFnMut() -> Result<Round<T>, E>,
    exhausted: impl FnOnce() -> E,
) -> Result<T, E> {
    for _ in 0..tries.max(1) {
        if let Round::Done(answer) = round().await? {
            return Ok(answer);
        }
    }
    Err(exhausted())
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
        let mut left = 2;
        let won = until_settled(
            5,
            async || {
                left -= 1;
                Ok::<_, &str>(if left == 0 {
                    Round::Done(7)
                } else {
                    Round::Lost
                })
            },
            || "exhausted",
        )
        .await;
        assert_eq!(won, Ok(7));
        let lost = until_settled(3, async || Ok::<Round<()>, _>(Round::Lost), || "exhausted").await;
        assert_eq!(lost, Err("exhausted"));
    }
}
