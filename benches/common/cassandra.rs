//! Keyspaces of its own on Cassandra for one benchmark run (`*_bench<random>`,
//! migrated, dropped afterwards), shared by the benches that run on both engines.

use std::sync::Arc;

use kartei::store::cql::CqlStore;
use kartei::store::{Counted, DynStore};

/// The keyspaces one run made.
pub struct BenchKeyspaces {
    pub nodes: Vec<String>,
    pub env: String,
}

impl BenchKeyspaces {
    /// Connects to `nodes` (comma-separated host:port), makes and migrates
    /// fresh keyspaces; returns them and a counting store over them.
    pub async fn create(nodes: &str) -> (Self, DynStore) {
        let nodes: Vec<String> = nodes.split(',').map(str::to_owned).collect();
        let mut b = [0u8; 4];
        getrandom::fill(&mut b).expect("random");
        let env = format!(
            "bench{}",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        );
        let cql = CqlStore::connect(
            &nodes,
            &env,
            "{'class': 'SimpleStrategy', 'replication_factor': 1}".into(),
        )
        .await
        .expect("connect to Cassandra");
        cql.migrate(kartei::CQL_FILES).await.expect("migrate");
        (BenchKeyspaces { nodes, env }, Arc::new(Counted::new(cql)))
    }

    /// Drops every keyspace of the run.
    pub async fn drop_all(self) {
        let admin = CqlStore::connect(&self.nodes, &self.env, String::new())
            .await
            .expect("connect to Cassandra");
        for family in ["themes", "target", "binaries", "suggestions", "crawl"] {
            let _ = admin
                .ddl(&format!("DROP KEYSPACE IF EXISTS {family}_{}", self.env))
                .await;
        }
    }
}
