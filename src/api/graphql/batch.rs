//! DataLoader batches that close when the request yields, not when a timer
//! runs out. The request's loaders hand their fetches to [`Batches`] instead
//! of spawning them; [`Batches::drive`] polls the request and, when it
//! returns Pending with no wave of fetches still running (so every resolver
//! that could ask for keys has asked), starts the fetches it collected as the
//! next wave. A resolver level is one wave of round trips whatever the timing
//! of the store or the machine's load, and no level waits for a window.
//!
//! A wave's fetches are polled right there, on the request's own task, not
//! spawned: a store read short enough to run on the calling thread (the
//! embedded engine's) answers within the same poll, and the request goes
//! on without a hop to another worker thread and back.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::{BoxFuture, CatchUnwind};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};

/// The fetches a request's loaders asked for, waiting for the next wave.
#[derive(Clone, Default)]
pub struct Batches(Arc<Mutex<Vec<BoxFuture<'static, ()>>>>);

impl Batches {
    fn queued(&self) -> Vec<BoxFuture<'static, ()>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Queues a fetch for the next wave.
    pub fn queue(&self, fetch: BoxFuture<'static, ()>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(fetch);
    }

    /// The spawner to give a request's DataLoaders.
    pub fn spawner(&self) -> impl Fn(BoxFuture<'static, ()>) + Send + Sync + 'static {
        let batches = self.clone();
        move |fetch| batches.queue(fetch)
    }

    /// Runs `request` (a future, or a subscription's stream), starting the
    /// collected fetches whenever it yields.
    pub fn drive<F>(self, request: F) -> Driven<F> {
        Driven {
            request: Box::pin(request),
            batches: self,
            wave: FuturesUnordered::new(),
        }
    }
}

/// A fetch of a wave. One that panics counts as answered (its loads fail),
/// so the next wave starts and the request ends instead of waiting for its
/// deadline (a subscription, for ever).
type Fetch = CatchUnwind<AssertUnwindSafe<BoxFuture<'static, ()>>>;

pub struct Driven<F> {
    request: Pin<Box<F>>,
    batches: Batches,
    /// The fetches of the wave under way.
    wave: FuturesUnordered<Fetch>,
}

impl<F> Driven<F> {
    /// After a pass of the request: starts the collected fetches as one
    /// wave, unless a wave is still running (a wave starts once every fetch
    /// of the previous one has answered and the request has seen the
    /// answers, so a resolver level is one wave however the fetches of the
    /// level before it were timed), and polls the wave. Returns whether a
    /// fetch answered, so that the request is polled again.
    fn step(&mut self, cx: &mut Context<'_>) -> bool {
        if self.wave.is_empty() {
            self.wave.extend(
                self.batches
                    .queued()
                    .into_iter()
                    .map(|f| AssertUnwindSafe(f).catch_unwind()),
            );
        }
        let mut answered = false;
        while let Poll::Ready(Some(done)) = self.wave.poll_next_unpin(cx) {
            if done.is_err() {
                tracing::error!("a DataLoader fetch panicked; its loads fail");
            }
            answered = true;
        }
        answered
    }
}

impl<F: Future> Future for Driven<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        loop {
            if let Poll::Ready(out) = self.request.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
            // This pass has asked for all it will ask for until a fetch answers.
            if !self.step(cx) {
                return Poll::Pending;
            }
        }
    }
}

/// A subscription's stream, driven the same way: each event's resolvers
/// batch their loads as one request's would.
impl<S: futures::Stream> futures::Stream for Driven<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        loop {
            if let Poll::Ready(out) = self.request.as_mut().poll_next(cx) {
                return Poll::Ready(out);
            }
            if !self.step(cx) {
                return Poll::Pending;
            }
        }
    }
}

/// Data an operation gets afresh for each execution: a subscription gets it
/// for each event, so the DataLoaders in it (their caches, and the errors
/// they keep) live as long as one event, not as long as the subscription.
/// Put into a request's data; [`PerExecution`] hands it out.
#[derive(Clone)]
pub struct Fresh(pub Arc<dyn Fn() -> async_graphql::Data + Send + Sync>);

/// The schema extension that gives each execution its [`Fresh`] data.
pub struct PerExecution;

impl async_graphql::extensions::ExtensionFactory for PerExecution {
    fn create(&self) -> Arc<dyn async_graphql::extensions::Extension> {
        Arc::new(PerExecution)
    }
}

#[async_trait::async_trait]
impl async_graphql::extensions::Extension for PerExecution {
    async fn execute(
        &self,
        ctx: &async_graphql::extensions::ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: async_graphql::extensions::NextExecute<'_>,
    ) -> async_graphql::Response {
        match ctx.data_opt::<Fresh>() {
            Some(fresh) => next.run_with_data(ctx, operation_name, (fresh.0)()).await,
            None => next.run(ctx, operation_name).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_of_loads_is_one_batch_and_starts_when_the_request_yields() {
        let batches = Batches::default();
        let spawn = batches.spawner();
        let started = Arc::new(AtomicUsize::new(0));
        let s = started.clone();
        let request = async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let s2 = s.clone();
            spawn(Box::pin(async move {
                s2.fetch_add(1, Ordering::SeqCst);
                let _ = tx.send(());
            }));
            // Not started while the request has not yielded.
            assert_eq!(s.load(Ordering::SeqCst), 0);
            rx.await.unwrap();
            s.load(Ordering::SeqCst)
        };
        assert_eq!(batches.drive(request).await, 1);
        assert_eq!(started.load(Ordering::SeqCst), 1);
    }

    /// A loader's fetch that panics still counts as answered: the next wave
    /// starts, and the request finishes instead of waiting for its deadline.
    #[tokio::test]
    async fn a_fetch_that_panics_does_not_stop_the_next_wave() {
        let batches = Batches::default();
        let b = batches.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let request = async move {
            b.queue(Box::pin(async { panic!("a loader's bug") }));
            tokio::task::yield_now().await;
            b.queue(Box::pin(async move {
                let _ = tx.send(());
            }));
            rx.await.is_ok()
        };
        let answered =
            tokio::time::timeout(std::time::Duration::from_secs(5), batches.drive(request)).await;
        assert_eq!(answered.ok(), Some(true));
    }
}
