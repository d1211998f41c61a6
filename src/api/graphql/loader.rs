//! A request's batched, caching loader by string id, started by
//! [`Batches`]: the keys every resolver of a pass asks for become one fetch,
//! which starts when the request yields (the next wave), with no timer.
//!
//! async-graphql's `DataLoader` does the same but awaits
//! `futures_timer::Delay::new(delay)` before every fetch, even a zero one,
//! and such a delay is fired by futures-timer's global thread: one thread
//! hop per loader and wave on the request's critical path. This loader hands
//! its fetch to [`Batches`] directly (or, with a batch window, sleeps on the
//! tokio timer). Values are cached for the request, as DataLoader's are, and
//! handed out behind an `Arc` (a page of 50 assignments resolves 50 keywords
//! without copying one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use super::batch::Batches;

type Fetched<V> = Result<Arc<HashMap<String, Arc<V>>>, async_graphql::Error>;
type Batch<V> = Shared<BoxFuture<'static, Fetched<V>>>;

/// Reads the values of some ids (missing ids are simply absent).
pub type Fetch<V> = Arc<
    dyn Fn(Vec<String>) -> BoxFuture<'static, Result<HashMap<String, V>, async_graphql::Error>>
        + Send
        + Sync,
>;

/// How a batch's fetch is started.
enum Start {
    /// Handed to the request's [`Batches`]: it starts when the request yields.
    Batches(Batches),
    /// Spawned at once; it collects keys for this long, then fetches.
    Window(Duration),
}

struct State<V> {
    /// Every key asked for, with the batch that fetches (or fetched) it.
    known: HashMap<String, Batch<V>>,
    /// The batch still collecting keys, if any.
    open: Option<Open<V>>,
}

/// A batch whose fetch has not started: its keys, where its result goes,
/// and the shared result the loads of its keys await.
struct Open<V> {
    keys: Vec<String>,
    tx: futures::channel::oneshot::Sender<Fetched<V>>,
    batch: Batch<V>,
}

pub struct BatchLoader<V> {
    fetch: Fetch<V>,
    state: Arc<Mutex<State<V>>>,
    start: Start,
}

impl<V: Clone + Send + Sync + 'static> BatchLoader<V> {
    /// A loader whose fetches `batches` starts (a zero `window`), or that
    /// waits `window` for keys before each fetch.
    pub fn new(fetch: Fetch<V>, window: Duration, batches: &Batches) -> Self {
        BatchLoader {
            fetch,
            state: Arc::new(Mutex::new(State {
                known: HashMap::new(),
                open: None,
            })),
            start: if window.is_zero() {
                Start::Batches(batches.clone())
            } else {
                Start::Window(window)
            },
        }
    }

    /// The batch that answers `key`: the one that already has it, else the
    /// open one, which it joins; with none open, a new one whose fetch is
    /// queued now (it takes the batch's keys when it runs).
    fn batch_of(&self, key: String) -> Batch<V> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = st.known.get(&key) {
            return b.clone();
        }
        let batch = match st.open.as_mut() {
            Some(open) => {
                open.keys.push(key.clone());
                open.batch.clone()
            }
            None => {
                let (tx, rx) = futures::channel::oneshot::channel::<Fetched<V>>();
                let batch: Batch<V> = async move {
                    rx.await.unwrap_or_else(|_| {
                        Err(async_graphql::Error::new("a batched read was dropped"))
                    })
                }
                .boxed()
                .shared();
                st.open = Some(Open {
                    keys: vec![key.clone()],
                    tx,
                    batch: batch.clone(),
                });
                self.queue_fetch();
                batch
            }
        };
        st.known.insert(key, batch.clone());
        batch
    }

    /// Queues the fetch of the open batch: when it runs, it takes the batch
    /// (later keys open the next one) and answers its loads.
    fn queue_fetch(&self) {
        let state = self.state.clone();
        let fetch = self.fetch.clone();
        let task = async move {
            let taken = state.lock().unwrap_or_else(|p| p.into_inner()).open.take();
            if let Some(Open { keys, tx, .. }) = taken {
                let fetched = fetch(keys).await.map(|values| {
                    Arc::new(values.into_iter().map(|(k, v)| (k, Arc::new(v))).collect())
                });
                let _ = tx.send(fetched);
            }
        };
        match &self.start {
            Start::Batches(b) => b.queue(task.boxed()),
            Start::Window(w) => {
                let w = *w;
                tokio::spawn(async move {
                    tokio::time::sleep(w).await;
                    task.await;
                });
            }
        }
    }

    /// The values of `keys` that exist.
    pub async fn load_many(
        &self,
        keys: impl IntoIterator<Item = String>,
    ) -> Result<HashMap<String, Arc<V>>, async_graphql::Error> {
        let wanted: Vec<(String, Batch<V>)> = keys
            .into_iter()
            .map(|k| {
                let batch = self.batch_of(k.clone());
                (k, batch)
            })
            .collect();
        let mut out = HashMap::with_capacity(wanted.len());
        for (k, batch) in wanted {
            if let Some(v) = batch.await?.get(&k) {
                out.insert(k, v.clone());
            }
        }
        Ok(out)
    }

    /// Asks for `keys` and waits until they are loaded, handing nothing
    /// out: the loads of them that follow find them cached. The error of a
    /// failed read is kept for those loads too.
    pub async fn prime(&self, keys: impl IntoIterator<Item = String>) {
        let batches: Vec<Batch<V>> = keys.into_iter().map(|k| self.batch_of(k)).collect();
        for batch in batches {
            let _ = batch.await;
        }
    }

    /// The value of `key`, if it exists.
    pub async fn load_one(&self, key: String) -> Result<Option<Arc<V>>, async_graphql::Error> {
        let batch = self.batch_of(key.clone());
        Ok(batch.await?.get(&key).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(calls: Arc<AtomicUsize>, seen: Arc<Mutex<Vec<Vec<String>>>>) -> Fetch<String> {
        Arc::new(move |keys: Vec<String>| {
            calls.fetch_add(1, Ordering::SeqCst);
            seen.lock().unwrap().push(keys.clone());
            async move {
                Ok(keys
                    .into_iter()
                    .filter(|k| !k.starts_with("missing"))
                    .map(|k| (k.clone(), format!("v-{k}")))
                    .collect())
            }
            .boxed()
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_of_loads_is_one_fetch_a_later_pass_another_and_values_are_cached() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let batches = Batches::default();
        let loader = Arc::new(BatchLoader::new(
            counting(calls.clone(), seen.clone()),
            Duration::ZERO,
            &batches,
        ));
        let l = loader.clone();
        let request = async move {
            // First pass: three resolvers at once, one of them twice.
            let (a, b, c) = futures::join!(
                l.load_one("a".into()),
                l.load_one("b".into()),
                l.load_many(["a".to_owned(), "missing-1".to_owned()]),
            );
            assert_eq!(a.unwrap().as_deref().map(String::as_str), Some("v-a"));
            assert_eq!(b.unwrap().as_deref().map(String::as_str), Some("v-b"));
            let c = c.unwrap();
            assert_eq!(c.len(), 1);
            assert_eq!(c["a"].as_str(), "v-a");
            // Second pass: a cached key and a new one.
            let (a, d) = futures::join!(l.load_one("a".into()), l.load_one("d".into()));
            assert_eq!(a.unwrap().as_deref().map(String::as_str), Some("v-a"));
            assert_eq!(d.unwrap().as_deref().map(String::as_str), Some("v-d"));
        };
        batches.drive(request).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "{:?}",
            seen.lock().unwrap()
        );
        let seen = seen.lock().unwrap();
        let mut first = seen[0].clone();
        first.sort();
        assert_eq!(first, ["a", "b", "missing-1"]);
        assert_eq!(seen[1], ["d"]);
    }

    /// Primed keys are one fetch, and the loads after it fetch nothing more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn primed_keys_load_without_another_fetch() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let batches = Batches::default();
        let loader = Arc::new(BatchLoader::new(
            counting(calls.clone(), seen),
            Duration::ZERO,
            &batches,
        ));
        let l = loader.clone();
        let request = async move {
            l.prime(["a".to_owned(), "missing-1".to_owned()]).await;
            assert_eq!(calls.load(Ordering::SeqCst), 1);
            let (a, m) = futures::join!(l.load_one("a".into()), l.load_one("missing-1".into()));
            assert_eq!(a.unwrap().as_deref().map(String::as_str), Some("v-a"));
            assert_eq!(m.unwrap(), None);
            calls.load(Ordering::SeqCst)
        };
        assert_eq!(batches.drive(request).await, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_window_collects_keys_without_batches() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let loader = BatchLoader::new(
            counting(calls.clone(), seen),
            Duration::from_millis(5),
            &Batches::default(),
        );
        let (a, b) = futures::join!(loader.load_one("a".into()), loader.load_one("b".into()));
        assert_eq!(a.unwrap().as_deref().map(String::as_str), Some("v-a"));
        assert_eq!(b.unwrap().as_deref().map(String::as_str), Some("v-b"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failed_fetch_fails_each_load_of_it() {
        let fetch: Fetch<String> =
            Arc::new(|_| async { Err(async_graphql::Error::new("store down")) }.boxed());
        let batches = Batches::default();
        let loader = BatchLoader::new(fetch, Duration::ZERO, &batches);
        let r = batches
            .drive(async {
                futures::join!(loader.load_one("a".into()), loader.load_one("b".into()))
            })
            .await;
        assert_eq!(r.0.unwrap_err().message, "store down");
        assert_eq!(r.1.unwrap_err().message, "store down");
    }
}
