//! The data file: opening it (and again after an I/O error latched the database), and checking a data directory before anything else runs.

use super::*;

/// The open database, and how to open it again.
///
/// redb latches the first I/O error of its file (a full disk, say): from then
/// on every read and write of that `Database` fails, and only a new open
/// recovers the last durable commit. So after such an error the writer closes
/// it and opens the file again (`reopen`): reads go on, and writes succeed
/// again as soon as the disk has room.
pub(super) struct Db {
    pub(super) path: PathBuf,
    pub(super) cache_bytes: usize,
    pub(super) current: RwLock<Option<Arc<Database>>>,
}

/// Whether a data directory can hold the store: readable and writable.
/// Called before a command opens the store, so that a read-only or unreadable
/// directory is one clear sentence (exit 2), not a redb error later. A full
/// disk is not refused here: reads can still be served.
pub fn check_data_dir(dir: &Path) -> Result<(), String> {
    let what = |action: &str, e: std::io::Error| {
        format!(
            "the data directory {} cannot be used: {action} failed: {e}",
            dir.display()
        )
    };
    std::fs::create_dir_all(dir).map_err(|e| what("creating it", e))?;
    std::fs::read_dir(dir).map_err(|e| what("listing it", e))?;
    let file = dir.join("kartei.redb");
    if file.exists() {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&file)
            .map_err(|e| {
                what(
                    &format!("opening {} for reading and writing", file.display()),
                    e,
                )
            })?;
    }
    let probe = dir.join(".kartei-write-probe");
    let written = std::fs::write(&probe, b"probe");
    let _ = std::fs::remove_file(&probe);
    match written {
        Err(e) if !is_full(&e) => Err(what("writing a file in it", e)),
        _ => Ok(()),
    }
}

impl Db {
    pub(super) fn open(path: PathBuf, cache_bytes: usize) -> Result<Self, StoreError> {
        let db = Self::create(&path, cache_bytes)?;
        upgrade::keys(&db)?;
        Ok(Db {
            path,
            cache_bytes,
            current: RwLock::new(Some(Arc::new(db))),
        })
    }

    pub(super) fn create(path: &Path, cache_bytes: usize) -> Result<Database, StoreError> {
        // redb's page cache defaults to 1 GiB; binaries stream through the store,
        // so a bounded cache keeps resident memory flat (the OS caches the file).
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => {
                    StoreError::InUse(path.display().to_string())
                }
                e => db_err(e),
            })?;
        let txn = db.begin_write().map_err(db_err)?;
        txn.open_table(ROWS).map_err(db_err)?;
        txn.open_table(EXPIRY).map_err(db_err)?;
        txn.commit().map_err(db_err)?;
        Ok(db)
    }

    /// The open database; if an earlier reopen failed, one more try.
    pub(super) fn get(&self) -> Result<Arc<Database>, StoreError> {
        if let Some(db) = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Ok(db.clone());
        }
        self.recover(None)
    }

    /// The open database, or `None` while it is being reopened; never waits
    /// for a reopen (for reads on the runtime's threads).
    pub(super) fn current(&self) -> Option<Arc<Database>> {
        self.current
            .try_read()
            .ok()
            .and_then(|slot| slot.as_ref().cloned())
    }

    /// An identity for [`Db::recover`] that holds no reference.
    pub(super) fn id(db: &Arc<Database>) -> usize {
        Arc::as_ptr(db) as usize
    }

    /// After an I/O error of the database `failed` (see [`Db::id`]): closes it,
    /// once the reads that still hold it are done (at most 10 s), and opens
    /// the file again; redb recovers its last durable commit. If another
    /// caller has reopened it meanwhile, that one is returned. `None`: only
    /// open it if it is closed (an earlier reopen failed).
    pub(super) fn recover(&self, failed: Option<usize>) -> Result<Arc<Database>, StoreError> {
        let mut slot = self.current.write().unwrap_or_else(|p| p.into_inner());
        if let Some(db) = slot.take() {
            if failed != Some(Self::id(&db)) {
                *slot = Some(db.clone());
                return Ok(db);
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut db = db;
            loop {
                match Arc::try_unwrap(db) {
                    Ok(only) => {
                        // After a latched I/O error redb leaves the file for
                        // the next open to recover; the close's error says so.
                        let _ = only.close();
                        break;
                    }
                    Err(shared) if std::time::Instant::now() < deadline => {
                        db = shared;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(shared) => {
                        *slot = Some(shared);
                        return Err(StoreError::Unavailable(
                            "the embedded store could not be reopened: reads still hold it".into(),
                        ));
                    }
                }
            }
        }
        match Self::create(&self.path, self.cache_bytes) {
            Ok(db) => {
                tracing::warn!(path = %self.path.display(), "embedded store reopened after an I/O error");
                let db = Arc::new(db);
                *slot = Some(db.clone());
                Ok(db)
            }
            Err(e) => {
                tracing::error!(error = %e, path = %self.path.display(), "embedded store cannot be reopened");
                Err(e)
            }
        }
    }
}
