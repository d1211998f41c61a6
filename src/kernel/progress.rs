//! The importers' progress bar (indicatif): drawn on stderr only when it is a
//! terminal, hidden otherwise, so logs and CI output stay clean. The importers
//! print their own summary line either way.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress(ProgressBar);

impl Progress {
    /// A bar over `total` units (records or bytes).
    pub fn start(total: usize) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("[{bar:40}] {pos}/{len} ({per_sec}, {eta} left)")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("#> "),
        );
        Progress(bar)
    }

    pub fn tick(&self) {
        self.advance(1);
    }

    pub fn advance(&self, n: usize) {
        self.0.inc(n as u64);
    }

    pub fn finish(self) {
        self.0.finish_and_clear();
    }
}
