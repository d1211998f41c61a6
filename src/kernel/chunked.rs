//! How every NDJSON importer that writes through a service runs: the input
//! read line by line (`ndjson`), parsed in chunks, a few chunks written at
//! once, each row's outcome counted by the importer, bad lines collected
//! with their numbers, and a failing store stopping the import where it was
//! (a rerun of the same file goes on from there).

use std::future::Future;
use std::io::BufRead;

use futures::StreamExt;

use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::ndjson::{self, BadLines};
use crate::kernel::progress::Progress;

/// What a row's outcome means for the import.
pub enum Row {
    /// Counted by the importer (written, or found as it should be).
    Counted,
    /// The line is bad: reported with its number, the import goes on.
    Bad(ApiError),
    /// The store failed: the import stops at this line.
    Stop(ApiError),
}

/// An import's input: its lines, their size in bytes (for the progress
/// bar), and how many chunks are written at once.
pub struct Input<R> {
    pub lines: R,
    pub size: usize,
    pub concurrency: usize,
}

impl<R: BufRead> Input<R> {
    pub fn new(lines: R, size: usize, concurrency: usize) -> Self {
        Input {
            lines,
            size,
            concurrency,
        }
    }
}

/// The bad lines of an import, where and why it stopped, if it did, and
/// the time it took.
#[derive(Debug, Default)]
pub struct Ended {
    pub errors: BadLines,
    pub stopped: Option<String>,
    pub elapsed: std::time::Duration,
}

/// What an import's console needs of its report: the bad lines, where it
/// stopped (if it did), and the one-line summary.
pub trait Report {
    fn errors(&self) -> &BadLines;
    fn stopped(&self) -> Option<&str>;
    fn summary(&self) -> String;
}

/// Declares a chunked importer's report: its counts, each with the words
/// its summary gives it, then the bad lines, where the store stopped it and
/// the time it took; with its [`Report`].
#[macro_export]
macro_rules! import_report {
    ($name:ident { $($count:ident: $words:literal),+ $(,)? }) => {
        #[derive(Debug, Default)]
        pub struct $name {
            $(pub $count: usize,)+
            /// (1-based line number, what was wrong).
            pub errors: $crate::kernel::ndjson::BadLines,
            /// The store failed (a full disk, an unreachable cluster): the
            /// import stopped there; a rerun of the same file goes on from
            /// there.
            pub stopped: Option<String>,
            pub elapsed: std::time::Duration,
        }

        impl $name {
            pub fn summary(&self) -> String {
                $crate::kernel::chunked::summary(
                    &[$((self.$count, $words)),+],
                    &self.errors,
                    self.elapsed,
                )
            }
        }

        impl $crate::kernel::chunked::Report for $name {
            fn errors(&self) -> &$crate::kernel::ndjson::BadLines {
                &self.errors
            }
            fn stopped(&self) -> Option<&str> {
                self.stopped.as_deref()
            }
            fn summary(&self) -> String {
                $name::summary(self)
            }
        }
    };
}

/// An import's one-line summary: each count with its words (`"objects
/// created"`), the bad lines, the time and the rate of rows counted.
pub fn summary(
    counts: &[(usize, &str)],
    errors: &BadLines,
    elapsed: std::time::Duration,
) -> String {
    let secs = elapsed.as_secs_f64().max(1e-6);
    let rows: usize = counts.iter().map(|(n, _)| n).sum();
    let mut out = String::new();
    for (n, words) in counts {
        out.push_str(&format!("{n} {words}, "));
    }
    out.push_str(&format!(
        "{} errors, {secs:.1} s, {:.0} rows/s",
        errors.len(),
        rows as f64 / secs
    ));
    out
}

/// Reads `input` in chunks of `chunk` lines parsed by `parse`, writes its
/// `concurrency` chunks at a time with `write` (one result per row, in order; an `Err` is the whole
/// chunk's: the store failed, the import stops), and hands each row's
/// result to `row`.
pub async fn import<T, R, W, Fut>(
    input: Input<impl BufRead>,
    chunk: usize,
    parse: fn(&str) -> Result<T, String>,
    write: W,
    mut row: impl FnMut(ApiResult<R>) -> Row,
) -> Ended
where
    W: Fn(Vec<T>) -> Fut,
    Fut: Future<Output = ApiResult<Vec<ApiResult<R>>>>,
{
    let started = std::time::Instant::now();
    let mut ended = Ended::default();
    let progress = Progress::start(input.size.max(1));
    let mut read_error = None;
    let lines = ndjson::lines_until_error(input.lines, &mut read_error);
    let chunks = ndjson::chunks(lines, &progress, chunk, parse);
    let write = &write;
    let mut results = futures::stream::iter(chunks)
        .map(|(good, bad)| async move {
            let (numbers, inputs): (Vec<usize>, Vec<T>) = good.into_iter().unzip();
            (numbers, write(inputs).await, bad)
        })
        .buffer_unordered(input.concurrency.clamp(1, 64));
    'chunks: while let Some((numbers, outcome, bad)) = results.next().await {
        for b in bad {
            ended.errors.push(b);
        }
        match outcome {
            Ok(rows) => {
                for (n, r) in numbers.into_iter().zip(rows) {
                    match row(r) {
                        Row::Counted => {}
                        Row::Bad(e) => ended.errors.push((n, e.message())),
                        Row::Stop(e) => {
                            ended.stopped = Some(format!("at line {n}: {}", e.message()));
                            break 'chunks;
                        }
                    }
                }
            }
            // The store failed for the whole chunk: stop, rather than fail
            // every line that follows the same way.
            Err(e) => {
                let first = numbers.first().copied().unwrap_or(0);
                ended.stopped = Some(format!("at line {first}: {}", e.message()));
                break;
            }
        }
    }
    drop(results);
    progress.finish();
    if let Some(e) = read_error {
        // The input itself failed: report it; what was read is imported.
        ended.errors.push((0, format!("cannot read further: {e}")));
    }
    ended.errors.sort();
    ended.elapsed = started.elapsed();
    ended
}
