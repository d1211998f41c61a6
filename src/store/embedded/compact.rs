//! `kartei compact`: the data file rewritten in key order.
//!
//! redb's own `compact` moves pages to the front of the file and drops the
//! free ones, but keeps the B-tree as writes left it: after random inserts
//! its leaves are about two thirds full. A copy of every table, inserted in
//! key order into a fresh file, fills them: on a 20,000-assignment store the
//! file shrank by a third more than with redb's compaction alone. The copy
//! is written beside the file (`kartei.redb.compacting`) and renamed over it
//! only once complete and durable, so a kill or a full disk half way leaves
//! the store as it was (the partial copy is removed by the next run).

use std::path::Path;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::upgrade::META;
use super::{EXPIRY, ROWS};

/// Copied per write transaction (the last one is durable).
const CHUNK_BYTES: usize = 64 << 20;

/// Rewrites the store in `dir` in key order, returning the file's size
/// before and after. Needs the store closed: a running server holds the
/// file's lock, and this fails.
pub fn compact(dir: &Path) -> anyhow::Result<(u64, u64)> {
    let path = dir.join("kartei.redb");
    let tmp = dir.join("kartei.redb.compacting");
    let before = std::fs::metadata(&path)?.len();
    // Opens the store as the server does: a file of the first layout is
    // upgraded first, and the lock says whether a server holds it.
    drop(super::Db::open(path.clone(), super::DEFAULT_CACHE_BYTES)?);
    let src = Database::open(&path)?;
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let copied = copy(&src, &tmp);
    drop(src);
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok((before, std::fs::metadata(&path)?.len()))
}

fn copy(src: &Database, tmp: &Path) -> anyhow::Result<()> {
    let mut dst = Database::create(tmp)?;
    let read = src.begin_read()?;
    copy_table(&read.open_table(ROWS)?, &dst, ROWS)?;
    copy_table(&read.open_table(EXPIRY)?, &dst, EXPIRY)?;
    copy_table(&read.open_table(META)?, &dst, META)?;
    // The copies' last commit was not durable: this one makes all durable.
    let mut txn = dst.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    txn.commit()?;
    // Drops what the file grew ahead of use.
    while dst.compact()? {}
    Ok(())
}

/// Copies one table in key order, a chunk of about 64 MiB per transaction.
fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    from: &impl ReadableTable<K, V>,
    dst: &Database,
    def: TableDefinition<K, V>,
) -> anyhow::Result<()> {
    let mut entries = from.iter()?.peekable();
    loop {
        let mut txn = dst.begin_write()?;
        txn.set_durability(Durability::None)?;
        {
            let mut to = txn.open_table(def)?;
            let mut bytes = 0;
            while bytes < CHUNK_BYTES {
                let Some(e) = entries.next() else { break };
                let (k, v) = e?;
                bytes +=
                    K::as_bytes(&k.value()).as_ref().len() + V::as_bytes(&v.value()).as_ref().len();
                to.insert(k.value(), v.value())?;
            }
        }
        txn.commit()?;
        if entries.peek().is_none() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Mutation, Row, Slice, Store, Value};

    crate::store::table! {
        T: Themes.compact_test
            partition(p: Text)
            clustering(n: Int Desc)
            columns(v: Text, b: Blob)
    }

    async fn all(store: &EmbeddedStore, p: &str) -> Vec<Row> {
        store
            .slice(&T, &Slice::partition(vec![Value::from(p)]).limit(100_000))
            .await
            .unwrap()
            .rows
    }

    #[tokio::test]
    async fn a_compacted_file_holds_every_row_and_is_smaller() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        // Inserted in scattered order, as the importers do.
        for chunk in 0..20 {
            let batch = (0..500)
                .map(|i| {
                    let n = (i * 7919 + chunk * 31) % 10_000;
                    let row = Row::new(&T)
                        .set("p", if n % 2 == 0 { "even" } else { "odd" })
                        .set("n", n)
                        .set("v", format!("value {n}"))
                        .set("b", vec![n as u8; 40]);
                    Mutation::Upsert {
                        row,
                        ttl: (n % 100 == 0).then_some(86_400),
                    }
                })
                .collect();
            store.apply(batch).await.unwrap();
        }
        let (even, odd) = (all(&store, "even").await, all(&store, "odd").await);
        // The server holds the file: no compaction under it.
        assert!(compact(dir.path()).is_err());
        drop(store);
        // A copy left by a killed run is replaced.
        std::fs::write(dir.path().join("kartei.redb.compacting"), b"partial").unwrap();
        let (before, after) = compact(dir.path()).unwrap();
        assert!(after < before, "{before} -> {after}");
        assert!(!dir.path().join("kartei.redb.compacting").exists());
        let store = EmbeddedStore::open(dir.path()).unwrap();
        assert_eq!(all(&store, "even").await, even);
        assert_eq!(all(&store, "odd").await, odd);
        assert!(even.len() + odd.len() > 5_000);
        drop(store);
        // The expiry entries came along.
        let db = Database::open(dir.path().join("kartei.redb")).unwrap();
        let read = db.begin_read().unwrap();
        let expiry = read.open_table(EXPIRY).unwrap();
        assert_eq!(expiry.iter().unwrap().count(), 100);
    }
}
