//! DataLoader batches that close when the request yields, not when a timer
//! runs out. The request's loaders hand their fetches to [`Batches`] instead
//! of spawning them; [`Batches::drive`] polls the request and, each time it
//! returns Pending (every sibling resolver polled in that pass has asked for
//! its keys), spawns the fetches it collected. A resolver level is one batch
//! whatever the machine's load, and no level waits for a window.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;

/// The fetches a request's loaders asked for since its last yield.
#[derive(Clone, Default)]
pub struct Batches(Arc<Mutex<Vec<BoxFuture<'static, ()>>>>);

impl Batches {
    /// The spawner to give a request's DataLoaders.
    pub fn spawner(&self) -> impl Fn(BoxFuture<'static, ()>) + Send + Sync + 'static {
        let queue = self.0.clone();
        move |fetch| queue.lock().unwrap_or_else(|p| p.into_inner()).push(fetch)
    }

    fn flush(&self) {
        let fetches = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for fetch in fetches {
            tokio::spawn(fetch);
        }
    }

    /// Runs `request`, starting the collected fetches whenever it yields.
    pub fn drive<F: Future>(self, request: F) -> Driven<F> {
        Driven {
            request: Box::pin(request),
            batches: self,
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
        // Pending: this pass has asked for all it will ask for until a fetch answers.
        self.batches.flush();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_pass_of_loads_is_one_batch_and_starts_when_the_request_yields() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
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
        });
    }
}
