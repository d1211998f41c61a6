//! `kartei import-assignments FILE --creator NAME`: bulk machine suggestions as
//! NDJSON, one `{portalId, ddbId, keywordId, childCategoryId, confidence}` per
//! line. Each line goes through the same rules as `suggestAssignment` with the
//! machine role. The file is streamed (never held in memory) with a bounded
//! number of writes in flight. An assignment that exists already is counted,
//! not an error, so the same file can be imported again.

use std::io::BufRead;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Deserialize;

use super::service::{Assignments, SuggestInput, Suggester};
use crate::error::ApiError;
use crate::progress::Progress;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Line {
    portal_id: String,
    ddb_id: String,
    keyword_id: String,
    child_category_id: String,
    #[serde(default)]
    confidence: Option<f64>,
}

#[derive(Debug, Default)]
pub struct ImportReport {
    pub created: usize,
    pub existing: usize,
    pub errors: Vec<(usize, String)>,
    pub elapsed: Duration,
}

impl ImportReport {
    pub fn summary(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-6);
        let rows = self.created + self.existing;
        format!(
            "{} assignments created, {} already present, {} errors, {:.1} s, {:.0} rows/s",
            self.created,
            self.existing,
            self.errors.len(),
            secs,
            rows as f64 / secs
        )
    }
}

enum Outcome {
    Created,
    Existing,
    Failed(String),
}

/// Imports `input` (of `size` bytes, for the progress bar) as `creator`.
pub async fn import(
    assignments: &Assignments,
    creator: &str,
    input: impl BufRead,
    size: usize,
    concurrency: usize,
) -> std::io::Result<ImportReport> {
    let started = Instant::now();
    let who = Suggester::machine(creator);
    let mut report = ImportReport::default();
    if let Err(e) = crate::common::check_id("creator", creator) {
        report.errors.push((0, e.message()));
        return Ok(report);
    }
    let progress = Progress::start(size.max(1));
    let mut read_error = None;
    let lines = crate::ndjson::lines(input).map_while(|l| match l {
        Ok(l) => Some(l),
        Err(e) => {
            read_error = Some(e);
            None
        }
    });
    let who = &who;
    let progress_ref = &progress;
    let mut results = futures::stream::iter(lines)
        .map(|line| async move {
            progress_ref.advance(line.bytes);
            let n = line.number;
            let text = match line.text {
                Ok(t) => t,
                Err(reason) => return Some((n, Outcome::Failed(reason))),
            };
            if text.trim().is_empty() {
                return None;
            }
            let outcome = match serde_json::from_str::<Line>(&text) {
                Err(e) => Outcome::Failed(format!("invalid record: {e}")),
                Ok(l) => match assignments
                    .suggest(
                        who,
                        SuggestInput {
                            portal_id: l.portal_id,
                            ddb_id: l.ddb_id,
                            keyword_id: l.keyword_id,
                            child_category_id: l.child_category_id,
                            confidence: l.confidence,
                        },
                    )
                    .await
                {
                    Ok(_) => Outcome::Created,
                    Err(ApiError::Conflict { .. }) => Outcome::Existing,
                    Err(e) => Outcome::Failed(e.message()),
                },
            };
            Some((n, outcome))
        })
        .buffer_unordered(concurrency.clamp(1, 256));
    while let Some(r) = results.next().await {
        match r {
            None => {}
            Some((_, Outcome::Created)) => report.created += 1,
            Some((_, Outcome::Existing)) => report.existing += 1,
            Some((n, Outcome::Failed(m))) => report.errors.push((n, m)),
        }
    }
    drop(results);
    progress.finish();
    if let Some(e) = read_error {
        // The input itself failed: report it; what was read is imported.
        report.errors.push((0, format!("cannot read further: {e}")));
    }
    report.errors.sort();
    report.elapsed = started.elapsed();
    Ok(report)
}
