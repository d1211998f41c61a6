//! The data file's key layout, upgraded in place when a store opens.
//!
//! Keys of the first data files began with the keyspace family's and the
//! table's names (about 30 bytes); today's begin with 0x00 and a 4-byte table
//! id (`key::table_prefix`). A file without the `key_layout` mark is
//! upgraded before the store serves anything: its rows move, a bounded chunk
//! per write transaction, from the old keys to the new ones (and the expiry
//! index with them), then the mark is set. Old keys never begin with 0x00 and
//! new ones always do, so a run that is killed half way goes on from where it
//! stopped at the next open; nothing is read meanwhile.

use redb::{Database, ReadableTable, TableDefinition};

use super::super::{StoreError, key};
use super::{EXPIRY, ROWS, db_err};

/// `key_layout` -> the layout of the file's keys (2: table ids).
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const KEY_LAYOUT: &str = "key_layout";
const TABLE_IDS: u64 = 2;

/// Moved per write transaction: at most this many rows or bytes.
const CHUNK_ROWS: usize = 10_000;
const CHUNK_BYTES: usize = 64 << 20;

/// Brings the file's keys to today's layout; a no-op once they are.
pub(super) fn keys(db: &Database) -> Result<(), StoreError> {
    keys_in_chunks(db, CHUNK_ROWS)
}

/// Each round moves one chunk; the round that finds nothing old (at once,
/// for a new file) sets the mark.
fn keys_in_chunks(db: &Database, chunk_rows: usize) -> Result<(), StoreError> {
    let mut moved = 0usize;
    loop {
        let txn = db.begin_write().map_err(db_err)?;
        let done = {
            let mut meta = txn.open_table(META).map_err(db_err)?;
            if meta.get(KEY_LAYOUT).map_err(db_err)?.map(|v| v.value()) == Some(TABLE_IDS) {
                return Ok(());
            }
            let mut rows = txn.open_table(ROWS).map_err(db_err)?;
            let mut expiry = txn.open_table(EXPIRY).map_err(db_err)?;
            let old_rows = chunk(&rows, chunk_rows)?;
            for (k, v) in &old_rows {
                rows.insert(upgraded(k)?.as_slice(), v.as_slice())
                    .map_err(db_err)?;
                rows.remove(k.as_slice()).map_err(db_err)?;
            }
            // An expiry entry is the time (8 bytes) and the row's key.
            let old_expiry = chunk_expiry(&expiry, chunk_rows)?;
            for k in &old_expiry {
                let (at, row) = k.split_at(8);
                let mut new = at.to_vec();
                new.extend_from_slice(&upgraded(row)?);
                expiry.insert(new.as_slice(), ()).map_err(db_err)?;
                expiry.remove(k.as_slice()).map_err(db_err)?;
            }
            moved += old_rows.len();
            let done = old_rows.is_empty() && old_expiry.is_empty();
            if done {
                meta.insert(KEY_LAYOUT, TABLE_IDS).map_err(db_err)?;
            }
            done
        };
        txn.commit().map_err(db_err)?;
        if done {
            if moved > 0 {
                tracing::info!(rows = moved, "the data file's keys now use table ids");
            }
            return Ok(());
        }
        tracing::info!(rows = moved, "moving the data file's keys to table ids");
    }
}

fn upgraded(old: &[u8]) -> Result<Vec<u8>, StoreError> {
    key::upgrade_legacy(old)
        .ok_or_else(|| StoreError::Internal("the data file holds a key that is no row key".into()))
}

/// A stored row's key and value.
type Entry = (Vec<u8>, Vec<u8>);

/// The next chunk of rows under old keys (every key from 0x01 on).
fn chunk(
    rows: &impl ReadableTable<&'static [u8], &'static [u8]>,
    chunk_rows: usize,
) -> Result<Vec<Entry>, StoreError> {
    let mut out = Vec::new();
    let mut bytes = 0;
    for e in rows.range::<&[u8]>(&[1u8][..]..).map_err(db_err)? {
        let (k, v) = e.map_err(db_err)?;
        bytes += k.value().len() + v.value().len();
        out.push((k.value().to_vec(), v.value().to_vec()));
        if out.len() >= chunk_rows || bytes >= CHUNK_BYTES {
            break;
        }
    }
    Ok(out)
}

/// The next chunk of expiry entries whose row key is an old one.
fn chunk_expiry(
    expiry: &impl ReadableTable<&'static [u8], ()>,
    chunk_rows: usize,
) -> Result<Vec<Vec<u8>>, StoreError> {
    let mut out = Vec::new();
    for e in expiry.iter().map_err(db_err)? {
        let (k, _) = e.map_err(db_err)?;
        let k = k.value();
        if k.get(8).is_some_and(|b| *b != 0) {
            out.push(k.to_vec());
            if out.len() >= chunk_rows {
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Order, Row, Slice, Store, Value};
    use redb::ReadableDatabase;

    crate::store::table! {
        T: Themes.upgrade_test
            partition(p: Text)
            clustering(n: Int Desc)
            columns(v: Text)
    }

    /// A row's key as the first data files wrote it.
    fn legacy_key(p: &str, n: i32) -> Vec<u8> {
        let mut k = key::legacy_prefix("themes", "upgrade_test");
        key::push(&mut k, &Value::from(p), Order::Asc).unwrap();
        key::push(&mut k, &Value::Int(n), Order::Desc).unwrap();
        k
    }

    /// A data file of the first layout: 25 rows in JSON values, one of them
    /// with an expiry entry (far in the future).
    fn legacy_file(path: &std::path::Path) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut rows = txn.open_table(ROWS).unwrap();
            let mut expiry = txn.open_table(EXPIRY).unwrap();
            for n in 0..25 {
                let p = if n % 2 == 0 { "even" } else { "odd" };
                let at: u64 = if n == 7 { 4_000_000_000_000 } else { 0 };
                let mut v = at.to_be_bytes().to_vec();
                let row = Row::new(&T)
                    .set("p", p)
                    .set("n", n)
                    .set("v", format!("v{n}"));
                serde_json::to_writer(&mut v, &row.values).unwrap();
                let k = legacy_key(p, n);
                rows.insert(k.as_slice(), v.as_slice()).unwrap();
                if at != 0 {
                    let mut e = at.to_be_bytes().to_vec();
                    e.extend_from_slice(&k);
                    expiry.insert(e.as_slice(), ()).unwrap();
                }
            }
        }
        txn.commit().unwrap();
    }

    #[tokio::test]
    async fn a_file_of_the_first_layout_is_read_after_its_keys_moved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kartei.redb");
        legacy_file(&path);
        // Half way, as if killed after a first chunk of 6 rows; the open
        // moves the rest.
        {
            let db = Database::open(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut rows = txn.open_table(ROWS).unwrap();
                for (k, v) in chunk(&rows, 6).unwrap() {
                    rows.insert(upgraded(&k).unwrap().as_slice(), v.as_slice())
                        .unwrap();
                    rows.remove(k.as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let even = store
            .slice(&T, &Slice::partition(vec![Value::from("even")]))
            .await
            .unwrap();
        let ns: Vec<i32> = even.rows.iter().map(|r| r.int("n").unwrap()).collect();
        assert_eq!(ns, (0..25).rev().filter(|n| n % 2 == 0).collect::<Vec<_>>());
        let seven = store
            .get(&T, &[Value::from("odd"), Value::Int(7)])
            .await
            .unwrap()
            .expect("row 7");
        assert_eq!(seven.text("v"), Some("v7"));
        // Written now, read with the others.
        store
            .apply(vec![crate::store::Mutation::upsert(
                Row::new(&T).set("p", "odd").set("n", 100).set("v", "new"),
            )])
            .await
            .unwrap();
        let odd = store
            .slice(&T, &Slice::partition(vec![Value::from("odd")]))
            .await
            .unwrap();
        assert_eq!(odd.rows.len(), 13);
        assert_eq!(odd.rows[0].text("v"), Some("new"));
        drop(store);
        // Every key and expiry entry has the new layout, and the mark is set.
        let db = Database::open(&path).unwrap();
        let txn = db.begin_read().unwrap();
        let rows = txn.open_table(ROWS).unwrap();
        assert!(rows.iter().unwrap().all(|e| e.unwrap().0.value()[0] == 0));
        let expiry = txn.open_table(EXPIRY).unwrap();
        let entries = keys_of(&expiry);
        assert_eq!(entries.len(), 1);
        assert_eq!(&entries[0][8..], upgraded(&legacy_key("odd", 7)).unwrap());
        let meta = txn.open_table(META).unwrap();
        assert_eq!(meta.get(KEY_LAYOUT).unwrap().unwrap().value(), TABLE_IDS);
    }

    fn keys_of<V: redb::Value + 'static>(
        table: &impl ReadableTable<&'static [u8], V>,
    ) -> Vec<Vec<u8>> {
        table
            .iter()
            .unwrap()
            .map(|e| e.unwrap().0.value().to_vec())
            .collect()
    }

    #[test]
    fn many_chunks_move_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kartei.redb");
        legacy_file(&path);
        let db = Database::open(&path).unwrap();
        keys_in_chunks(&db, 3).unwrap_or_else(|e| panic!("{e}"));
        let txn = db.begin_read().unwrap();
        let rows = txn.open_table(ROWS).unwrap();
        let keys = keys_of(&rows);
        assert_eq!(keys.len(), 25);
        assert!(keys.iter().all(|k| k[0] == 0));
        // The same once more: nothing to do.
        drop((rows, txn));
        keys_in_chunks(&db, 3).unwrap_or_else(|e| panic!("{e}"));
    }
}
