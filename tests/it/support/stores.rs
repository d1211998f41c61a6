//! The stores a test runs against: a directory of its own on the embedded
//! engine; on Cassandra the binary's shared keyspace set, or a set of its own.

use std::sync::Arc;

use kartei::store::cql::CqlStore;
use kartei::store::embedded::EmbeddedStore;
use kartei::store::{Counted, DynStore};
use tokio::sync::OnceCell;

use super::{Engine, uid};

static CLUSTER: OnceCell<Arc<Counted<CqlStore>>> = OnceCell::const_new();

/// The shared cluster store: a fresh keyspace set `*_t<random>` per test binary.
/// A connection to the test node (KARTEI_TEST_CASSANDRA) with a keyspace set
/// of a new name, migrated.
pub async fn fresh_keyspaces() -> CqlStore {
    let nodes: Vec<String> = std::env::var("KARTEI_TEST_CASSANDRA")
        .expect("KARTEI_TEST_CASSANDRA")
        .split(',')
        .map(str::to_owned)
        .collect();
    let store = CqlStore::connect(
        &nodes,
        &format!("t{}", uid()),
        "{'class': 'SimpleStrategy', 'replication_factor': 1}".into(),
    )
    .await
    .expect("connect to Cassandra");
    store.migrate(kartei::CQL_FILES).await.expect("migrate");
    store
}

pub async fn cluster() -> Arc<Counted<CqlStore>> {
    CLUSTER
        .get_or_init(|| async {
            let started = std::time::Instant::now();
            let store = fresh_keyspaces().await;
            let env = store.env().to_owned();
            for t in crate::engine::PROBE_TABLES {
                store
                    .ddl(&store.create_table_cql(t))
                    .await
                    .expect("probe table");
            }
            eprintln!(
                "keyspaces *_{env} ready in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            Arc::new(Counted::new(store))
        })
        .await
        .clone()
}

/// A store no other test sees: on Cassandra a keyspace set of its own
/// (migrated for this test, a few seconds), for tests whose assertions other
/// tests' crawlers on the shared keyspaces would disturb.
pub async fn isolated_store(engine: Engine) -> TestStore {
    match engine {
        Engine::Embedded => store(engine).await,
        Engine::Cassandra => TestStore {
            store: Arc::new(Counted::new(fresh_keyspaces().await)),
            _dir: None,
        },
    }
}

pub struct TestStore {
    pub store: DynStore,
    _dir: Option<tempfile::TempDir>,
}

pub async fn store(engine: Engine) -> TestStore {
    match engine {
        Engine::Embedded => {
            let dir = tempfile::tempdir().expect("tempdir");
            let s = EmbeddedStore::open(dir.path()).expect("open embedded store");
            TestStore {
                store: Arc::new(Counted::new(s)),
                _dir: Some(dir),
            }
        }
        Engine::Cassandra => TestStore {
            store: cluster().await,
            _dir: None,
        },
    }
}

impl TestStore {
    /// The same store seen through `wrap` (e.g. a [`Faulty`] one).
    pub fn wrapped(self, wrap: impl FnOnce(DynStore) -> DynStore) -> TestStore {
        TestStore {
            store: wrap(self.store),
            _dir: self._dir,
        }
    }
}
