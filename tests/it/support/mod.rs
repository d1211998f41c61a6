//! Test harness: a shared runtime, a fresh store per test (embedded: its own
//! directory; Cassandra: one fresh keyspace set per test binary, unique ids per
//! test), and a real HTTP server on 127.0.0.1, built by [`TestApp`].
//!
//! A test reads as a story: `TestApp::on(engine).with_vocabulary().build()`,
//! then `app.as_editor("anna").query(..)`. The older helpers (`server`,
//! `server_with`, `serve_store`, `TestServer::data`...) are thin wrappers
//! over the same builder.

mod app;
mod faulty;
mod server;
mod settings;
mod stores;
mod vocabulary;

use std::future::Future;
use std::sync::LazyLock;

use kartei::store::DynStore;
use serde_json::Value;

// Whole modules: a helper no test of this tree calls stays at hand for the next.
pub use app::*;
pub use faulty::*;
pub use server::*;
pub use settings::*;
pub use stores::*;
pub use vocabulary::*;

/// One runtime for the whole binary: the Cassandra session must outlive single tests.
static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
});

pub fn run<F: Future>(f: F) -> F::Output {
    RT.block_on(f)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Engine {
    Embedded,
    Cassandra,
}

/// Generates one `#[test]` per engine for each named `async fn(Engine)`.
#[macro_export]
macro_rules! both_engines {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $( #[test] fn $name() { $crate::support::run(super::$name($crate::support::Engine::Embedded)) } )*
        }
        mod cassandra {
            $( #[test] fn $name() {
                if $crate::support::cassandra_off() { return; }
                $crate::support::run(super::$name($crate::support::Engine::Cassandra))
            } )*
        }
    };
}

/// `KARTEI_TEST_CASSANDRA=off` skips the Cassandra tier explicitly; unset is an error,
/// so that a run without the node cannot pass by testing nothing.
pub fn cassandra_off() -> bool {
    match std::env::var("KARTEI_TEST_CASSANDRA") {
        Ok(v) if v == "off" => {
            eprintln!("Cassandra tier skipped (KARTEI_TEST_CASSANDRA=off)");
            true
        }
        Ok(_) => false,
        Err(_) => panic!(
            "set KARTEI_TEST_CASSANDRA=127.0.0.1:9042 (scripts/test.sh starts a node) or KARTEI_TEST_CASSANDRA=off"
        ),
    }
}

/// Fragments `F0` to `F{levels - 1}` on `ty`, each spreading the one before
/// twice: `...F{levels - 1}` expands to 2^(levels - 1) copies of `base`.
pub fn doubling_fragments(ty: &str, base: &str, levels: usize) -> String {
    let mut q = format!("fragment F0 on {ty} {{ {base} }}");
    for i in 1..levels {
        q.push_str(&format!(
            " fragment F{i} on {ty} {{ ...F{p} ...F{p} }}",
            p = i - 1
        ));
    }
    q
}

pub fn uid() -> String {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).expect("random");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `extensions.code` of the first error.
pub fn code(response: &Value) -> &str {
    response["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error code in {response:#}"))
}

/// The store's round trips while `f` runs.
pub async fn round_trips<F: Future>(store: &DynStore, f: F) -> (u64, F::Output) {
    let before = store.round_trips();
    let out = f.await;
    (store.round_trips() - before, out)
}
