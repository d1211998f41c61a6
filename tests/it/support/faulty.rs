//! A real store that fails, or waits, on purpose.

use std::sync::Arc;

use kartei::store::{
    Cas, CasOutcome, DynStore, Mutation, Page, Row, Scan, Slice, Store, StoreError, Table,
    Value as KValue,
};

/// What a [`Faulty`] store runs before each `apply`.
pub type ApplyHook = Box<dyn Fn(&[Mutation]) + Send>;

/// A real store that fails on purpose: it stands in for a process that dies
/// between two writes (the writes before the fault are really stored).
pub struct Faulty {
    inner: DynStore,
    /// Every `apply` touching one of these tables fails.
    pub fail_apply_on: std::sync::Mutex<Vec<&'static str>>,
    /// After this many more successful `cas` calls, every `cas` fails (None: never).
    pub cas_budget: std::sync::Mutex<Option<usize>>,
    /// Every read (get, get_many, slice) first waits this long (None: no wait).
    pub read_delay: std::sync::Mutex<Option<std::time::Duration>>,
    /// Delayed reads begun, and delayed reads that ran to their end (a read
    /// whose request was dropped meanwhile never ends).
    pub reads_begun: std::sync::atomic::AtomicUsize,
    pub reads_ended: std::sync::atomic::AtomicUsize,
    /// Runs before every `apply` (a test's clock moving as a slow write would).
    pub before_apply: std::sync::Mutex<Option<ApplyHook>>,
}

impl Faulty {
    pub fn new(inner: DynStore) -> Arc<Self> {
        Arc::new(Faulty {
            inner,
            fail_apply_on: Default::default(),
            cas_budget: Default::default(),
            read_delay: Default::default(),
            reads_begun: Default::default(),
            reads_ended: Default::default(),
            before_apply: Default::default(),
        })
    }

    async fn slow_read(&self) {
        let delay = *self.read_delay.lock().unwrap();
        if let Some(d) = delay {
            use std::sync::atomic::Ordering::SeqCst;
            self.reads_begun.fetch_add(1, SeqCst);
            tokio::time::sleep(d).await;
            self.reads_ended.fetch_add(1, SeqCst);
        }
    }
}

fn injected() -> StoreError {
    StoreError::Unavailable("injected crash".into())
}

#[async_trait::async_trait]
impl Store for Faulty {
    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
    async fn get(&self, table: &'static Table, key: &[KValue]) -> Result<Option<Row>, StoreError> {
        self.slow_read().await;
        self.inner.get(table, key).await
    }
    async fn get_many(
        &self,
        table: &'static Table,
        keys: &[Vec<KValue>],
    ) -> Result<Vec<Option<Row>>, StoreError> {
        self.slow_read().await;
        self.inner.get_many(table, keys).await
    }
    async fn slice(&self, table: &'static Table, slice: &Slice) -> Result<Page, StoreError> {
        self.slow_read().await;
        self.inner.slice(table, slice).await
    }
    async fn apply(&self, batch: Vec<Mutation>) -> Result<(), StoreError> {
        if let Some(hook) = self.before_apply.lock().unwrap().as_ref() {
            hook(&batch);
        }
        let failing = self.fail_apply_on.lock().unwrap().clone();
        let touches = |m: &Mutation| {
            let t = match m {
                Mutation::Upsert { row, .. } => row.table.name,
                Mutation::Delete { table, .. } | Mutation::Add { table, .. } => table.name,
            };
            failing.contains(&t)
        };
        if batch.iter().any(touches) {
            return Err(injected());
        }
        self.inner.apply(batch).await
    }
    async fn cas(&self, cas: Cas) -> Result<CasOutcome, StoreError> {
        {
            let mut budget = self.cas_budget.lock().unwrap();
            match budget.as_mut() {
                Some(0) => return Err(injected()),
                Some(n) => *n -= 1,
                None => {}
            }
        }
        self.inner.cas(cas).await
    }
    async fn scan(&self, table: &'static Table, scan: Scan) -> Result<Page, StoreError> {
        self.inner.scan(table, scan).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
}
