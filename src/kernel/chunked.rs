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

/// The bad lines of an import, and where and why it stopped, if it did.
#[derive(Debug, Default)]
pub struct Ended {
    pub errors: BadLines,
    pub stopped: Option<String>,
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

/// Reads `input` (of `size` bytes, for the progress bar) in chunks of
/// `chunk` lines parsed by `parse`, writes `concurrency` chunks at a time
/// with `write` (one result per row, in order; an `Err` is the whole
/// chunk's: the store failed, the import stops), and hands each row's
/// result to `row`.
pub async fn import<T, R, W, Fut>(
    input: impl BufRead,
    size: usize,
    chunk: usize,
    concurrency: usize,
    parse: fn(&str) -> Result<T, String>,
    write: W,
    mut row: impl FnMut(ApiResult<R>) -> Row,
) -> Ended
where
    W: Fn(Vec<T>) -> Fut,
    Fut: Future<Output = ApiResult<Vec<ApiResult<R>>>>,
{
    let mut ended = Ended::default();
    let progress = Progress::start(size.max(1));
    let mut read_error = None;
    let lines = ndjson::lines_until_error(input, &mut read_error);
    let chunks = ndjson::chunks(lines, &progress, chunk, parse);
    let write = &write;
    let mut results = futures::stream::iter(chunks)
        .map(|(good, bad)| async move {
            let (numbers, inputs): (Vec<usize>, Vec<T>) = good.into_iter().unzip();
            (numbers, write(inputs).await, bad)
        })
        .buffer_unordered(concurrency.clamp(1, 64));
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
    ended
}
