//! DataLoader batches that close when the request yields, not when a timer
//! runs out. The request's loaders hand their fetches to [`Batches`] instead
//! of spawning them; [`Batches::drive`] polls the request and, when it
//! returns Pending with no wave of fetches still running (so every resolver
//! that could ask for keys has asked), starts the fetches it collected as the
//! next wave. A resolver level is one wave of round trips whatever the timing
//! of the store or the machine's load, and no level waits for a window.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures::future::BoxFuture;

/// The fetches a request's loaders asked for, and the wave in flight.
#[derive(Clone, Default)]
pub struct Batches(Arc<Mutex<State>>);

#[derive(Default)]
struct State {
    queue: Vec<BoxFuture<'static, ()>>,
    /// Fetches of the current wave still running.
    in_flight: usize,
    /// Wakes the request when a wave ends with fetches waiting.
    waker: Option<Waker>,
}

impl Batches {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a fetch for the next wave.
    pub fn queue(&self, fetch: BoxFuture<'static, ()>) {
        self.state().queue.push(fetch);
    }

    /// The spawner to give a request's DataLoaders.
    pub fn spawner(&self) -> impl Fn(BoxFuture<'static, ()>) + Send + Sync + 'static {
        let batches = self.clone();
        move |fetch| batches.queue(fetch)
    }

    /// Starts the collected fetches as one wave, unless a wave is still
    /// running: a wave starts once every fetch of the previous one has
    /// answered, so a resolver level is one wave however the fetches of the
    /// level before it were timed.
    fn flush(&self, cx: &Context<'_>) {
        let fetches = {
            let mut state = self.state();
            state.waker = Some(cx.waker().clone());
            if state.in_flight > 0 || state.queue.is_empty() {
                return;
            }
            let fetches = std::mem::take(&mut state.queue);
            state.in_flight = fetches.len();
            fetches
        };
        for fetch in fetches {
            let done = Answered(self.clone());
            tokio::spawn(async move {
                fetch.await;
                drop(done);
            });
        }
    }

    /// Runs `request` (a future, or a subscription's stream), starting the
    /// collected fetches whenever it yields.
    pub fn drive<F>(self, request: F) -> Driven<F> {
        Driven {
            request: Box::pin(request),
            batches: self,
        }
    }
}

/// A fetch of the current wave, counted out when it ends: also when it
/// panics or is dropped unfinished, or the next wave would never start and
/// the request would wait until its deadline (a subscription, for ever).
struct Answered(Batches);

impl Drop for Answered {
    fn drop(&mut self) {
        let wake = {
            let mut state = self.0.state();
            state.in_flight = state.in_flight.saturating_sub(1);
            (state.in_flight == 0 && !state.queue.is_empty())
                .then(|| state.waker.clone())
                .flatten()
        };
        if let Some(w) = wake {
            w.wake();
        }
    }
}

pub struct Driven<F> {
    request: Pin<Box<F>>,
    batches: Batches,
}

impl<F: Future> Future for Driven<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let out = self.request.as_mut().poll(cx);
        // This pass has asked for all it will ask for until a fetch answers.
        self.batches.flush(cx);
        out
    }
}

/// A subscription's stream, driven the same way: each event's resolvers
/// batch their loads as one request's would.
impl<S: futures::Stream> futures::Stream for Driven<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let out = self.request.as_mut().poll_next(cx);
        self.batches.flush(cx);
        out
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
