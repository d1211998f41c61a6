//! A progress bar for the command-line importers, drawn on stderr only when
//! it is a terminal (so logs and CI output stay clean).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Prints a progress bar on stderr when it is a terminal.
pub struct Progress {
    total: usize,
    done: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Progress {
    pub fn start(total: usize) -> Self {
        let done = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        if std::io::stderr().is_terminal() {
            let d = done.clone();
            tokio::spawn(async move {
                loop {
                    let n = d.load(Ordering::Relaxed);
                    let width = 40;
                    let filled = (n * width).checked_div(total).unwrap_or(width);
                    eprint!(
                        "\r[{}{}] {n}/{total}",
                        "#".repeat(filled),
                        " ".repeat(width - filled)
                    );
                    let _ = std::io::stderr().flush();
                    tokio::select! {
                        _ = &mut rx => { eprintln!(); break; }
                        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    }
                }
            });
        }
        Progress {
            total,
            done,
            stop: Some(tx),
        }
    }
    pub fn tick(&self) {
        self.advance(1);
    }
    pub fn advance(&self, n: usize) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
    pub fn finish(mut self) {
        self.done.store(self.total, Ordering::Relaxed);
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
