//! The suggestion rules: datasets that switch at once, feedback that masks,
//! reads by page id, by title and for many pages, and the dataset lifecycle
//! (begin, write, publish or fail, rollback, purge).
//!
//! Visibility: every row of a dataset carries its id in its key, and readers
//! read only the rows of the id in `current_dataset`. An import writes its rows
//! while the pointer still names the previous dataset; publishing is one
//! compare-and-set of the pointer. So a reader sees the old dataset or the new
//! one, never a mix, and an import that never publishes is never read.

use std::collections::{BTreeSet, HashMap};

use super::model::*;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::kernel::{Clock, check_id};
use futures::TryStreamExt;

use crate::store::pages;
use crate::store::{Cas, Condition, DynStore, Mutation, Row, Scan, Slice, Table, Value};

mod datasets;

/// Pages one multi-page read may name.
pub const MAX_PAGES: usize = 100;
/// Pages `randomPages` may return.
pub const MAX_RANDOM: usize = 50;
/// Suggestions (and feedback rows) read for one page.
const PER_PAGE: usize = 1_000;
/// An importing dataset whose heartbeat is older than this is dead.
pub const DEAD_AFTER_SECS: i64 = 60;
/// How often an import writes its heartbeat.
pub const HEARTBEAT_SECS: u64 = 10;

/// How a read filters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOptions {
    pub min_confidence: Option<f64>,
    /// Also images that have feedback (with the feedback attached).
    pub include_reviewed: bool,
}

/// A suggestion with the feedback it has (empty unless `include_reviewed`).
#[derive(Clone, Debug)]
pub struct Reviewed {
    pub suggestion: Suggestion,
    pub feedback: Vec<Feedback>,
}

/// One record of an import file.
#[derive(Clone, Debug)]
pub enum Record {
    Suggestion(Suggestion),
    Title {
        title: String,
        page_id: i32,
        page_rev: Option<i32>,
    },
    InstanceOf {
        page_id: i32,
        page_rev: Option<i32>,
        instance_of: Vec<String>,
    },
}

#[derive(Clone, Debug)]
pub struct FeedbackInput {
    pub wiki: String,
    pub page_id: i32,
    pub filename: String,
    pub accepted: bool,
    pub rejection_reasons: Vec<String>,
}

/// A version-1 (time-based) UUID for `now`, as text: the dataset and feedback
/// ids of the public schema are timeuuids.
pub fn time_uuid(now: time::OffsetDateTime) -> String {
    let ticks = (now.unix_timestamp_nanos() / 100) as u64 + 0x01B2_1DD2_1381_4000;
    let mut r = [0u8; 8];
    getrandom::fill(&mut r).expect("the OS has randomness");
    let clock_seq = (u16::from_be_bytes([r[0], r[1]]) & 0x3FFF) | 0x8000;
    let node = u64::from_be_bytes([0, 0, r[2] | 0x01, r[3], r[4], r[5], r[6], r[7]]);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        ticks & 0xFFFF_FFFF,
        (ticks >> 32) & 0xFFFF,
        ((ticks >> 48) & 0x0FFF) | 0x1000,
        clock_seq,
        node
    )
}

/// The time a [`time_uuid`] was made, in RFC 3339 (None for other text).
pub fn uuid_time(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('-').collect();
    if parts.len() != 5 || !parts[2].starts_with('1') {
        return None;
    }
    let low = u64::from_str_radix(parts[0], 16).ok()?;
    let mid = u64::from_str_radix(parts[1], 16).ok()?;
    let hi = u64::from_str_radix(&parts[2][1..], 16).ok()?;
    let ticks = (hi << 48) | (mid << 32) | low;
    let nanos = (ticks.checked_sub(0x01B2_1DD2_1381_4000)? as i128) * 100;
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

pub fn check_wiki(wiki: &str) -> ApiResult<()> {
    check_id("wiki", wiki)
}

/// A `minConfidence` filter must be a number (JSON has no NaN, but floats
/// from other callers might).
pub fn check_min_confidence(min: Option<f64>) -> ApiResult<()> {
    match min {
        Some(c) if !c.is_finite() => Err(ApiError::bad_input("minConfidence must be a number")),
        _ => Ok(()),
    }
}

fn bucket(page_id: i32) -> i32 {
    page_id.rem_euclid(KEY_BUCKETS)
}

#[derive(Clone)]
pub struct Suggestions {
    store: DynStore,
    clock: Clock,
    dead_after: i64,
    /// The metrics refresher, once started.
    workers: crate::kernel::worker::Workers,
}

impl Suggestions {
    pub fn new(store: DynStore) -> Self {
        Suggestions {
            store,
            clock: Clock::system(),
            dead_after: DEAD_AFTER_SECS,
            workers: Default::default(),
        }
    }

    /// Starts refreshing the current-dataset age of every wiki for /metrics
    /// every `every`, until `workers().stop()` (or the process ends).
    pub fn spawn_metrics(&self, every: std::time::Duration) {
        self.workers.spawn(MetricsWorker {
            suggestions: self.clone(),
            every,
        });
    }

    /// The metrics refresher, as the admin sees it.
    pub fn workers(&self) -> &crate::kernel::worker::Workers {
        &self.workers
    }

    /// Counts an IMPORTING dataset as dead after `secs` without a heartbeat
    /// (default [`DEAD_AFTER_SECS`]; 0 treats every other import as dead).
    pub fn with_dead_after(self, secs: i64) -> Self {
        Suggestions {
            dead_after: secs.max(0),
            ..self
        }
    }

    pub fn store(&self) -> &DynStore {
        &self.store
    }

    /// The current dataset of `wiki`, if any.
    pub async fn current(&self, wiki: &str) -> ApiResult<Option<String>> {
        check_wiki(wiki)?;
        Ok(self
            .store
            .get(&CURRENT, &[wiki.into()])
            .await?
            .and_then(|r| r.text("id").map(str::to_owned)))
    }

    /// The registry of `wiki`, newest first.
    pub async fn datasets(&self, wiki: &str) -> ApiResult<Vec<Dataset>> {
        check_wiki(wiki)?;
        let rows = self
            .store
            .partition_rows(&DATASETS, wiki.into(), 10_000)
            .await?;
        let mut all: Vec<Dataset> = rows.iter().filter_map(Dataset::from_row).collect();
        all.sort_by(|a, b| b.started.cmp(&a.started).then(b.id.cmp(&a.id)));
        Ok(all)
    }

    /// The suggestions of one page of the current dataset, masked by feedback
    /// unless `include_reviewed`, above `min_confidence`, by confidence (highest first).
    pub async fn page(
        &self,
        wiki: &str,
        page_id: i32,
        opts: ReadOptions,
    ) -> ApiResult<Vec<Reviewed>> {
        Ok(self
            .pages(wiki, &[page_id], opts)
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// The same for up to [`MAX_PAGES`] pages, in the order given: one wave of
    /// reads for the pointer and the pages' feedback, one for their suggestions.
    pub async fn pages(
        &self,
        wiki: &str,
        page_ids: &[i32],
        opts: ReadOptions,
    ) -> ApiResult<Vec<Vec<Reviewed>>> {
        self.pages_of(wiki, None, page_ids, opts).await
    }

    /// [`Suggestions::pages`] in dataset `known`, if the caller has read the
    /// pointer already, else in the current one.
    async fn pages_of(
        &self,
        wiki: &str,
        known: Option<&str>,
        page_ids: &[i32],
        opts: ReadOptions,
    ) -> ApiResult<Vec<Vec<Reviewed>>> {
        check_wiki(wiki)?;
        if page_ids.len() > MAX_PAGES {
            return Err(ApiError::bad_input(format!(
                "at most {MAX_PAGES} pages per call"
            )));
        }
        check_min_confidence(opts.min_confidence)?;
        if page_ids.is_empty() {
            return Ok(Vec::new());
        }
        let partitions = |p: i32| vec![Value::from(wiki), Value::Int(p)];
        let current = async {
            match known {
                Some(id) => Ok(Some(id.to_owned())),
                None => self.current(wiki).await,
            }
        };
        let (current, feedback) = futures::try_join!(current, self.feedback_rows(wiki, page_ids))?;
        let Some(current) = current else {
            return Ok(page_ids.iter().map(|_| Vec::new()).collect());
        };
        let slices: Vec<Slice> = page_ids
            .iter()
            .map(|p| {
                Slice::partition(partitions(*p))
                    .prefix(vec![current.as_str().into()])
                    .limit(PER_PAGE)
            })
            .collect();
        let pages = self.store.slice_many(&SUGGESTIONS, &slices).await?;
        Ok(pages
            .into_iter()
            .zip(feedback)
            .map(|(page, fb)| {
                let mut by_file: HashMap<String, Vec<Feedback>> = HashMap::new();
                for f in fb.iter().map(Feedback::from_row) {
                    by_file.entry(f.filename.clone()).or_default().push(f);
                }
                let mut out: Vec<Reviewed> = page
                    .rows
                    .iter()
                    .map(Suggestion::from_row)
                    .filter(|s| opts.min_confidence.is_none_or(|m| s.confidence >= m))
                    .filter_map(|s| {
                        let feedback = by_file.get(&s.image).cloned().unwrap_or_default();
                        (opts.include_reviewed || feedback.is_empty()).then_some(Reviewed {
                            suggestion: s,
                            feedback,
                        })
                    })
                    .collect();
                out.sort_by(|a, b| {
                    b.suggestion
                        .confidence
                        .total_cmp(&a.suggestion.confidence)
                        .then(a.suggestion.image.cmp(&b.suggestion.image))
                });
                out
            })
            .collect())
    }

    /// The page a title names in the current dataset (and its revision).
    pub async fn title(&self, wiki: &str, title: &str) -> ApiResult<Option<(i32, Option<i32>)>> {
        check_wiki(wiki)?;
        if title.is_empty() || title.len() > 1_000 {
            return Err(ApiError::bad_input("a title has 1 to 1000 bytes"));
        }
        let row = self
            .current_cache_row(&TITLE_CACHE, wiki, title.into())
            .await?;
        Ok(row.and_then(|r| Some((r.int("page_id")?, r.int("page_rev")))))
    }

    /// The classes of a page's item in the current dataset.
    pub async fn instance_of(
        &self,
        wiki: &str,
        page_id: i32,
    ) -> ApiResult<Option<(Option<i32>, Vec<String>)>> {
        let row = self
            .current_cache_row(&INSTANCEOF_CACHE, wiki, Value::Int(page_id))
            .await?;
        Ok(row.map(|r| (r.int("page_rev"), r.text_list("instance_of"))))
    }

    /// The row a per-dataset cache (`title_cache`, `instanceof_cache`) holds
    /// under `(wiki, key)` for the wiki's current dataset.
    async fn current_cache_row(
        &self,
        cache: &'static Table,
        wiki: &str,
        key: Value,
    ) -> ApiResult<Option<Row>> {
        let Some(current) = self.current(wiki).await? else {
            return Ok(None);
        };
        let slice = Slice::partition(vec![wiki.into(), key])
            .prefix(vec![current.as_str().into()])
            .limit(1);
        Ok(self
            .store
            .slice(cache, &slice)
            .await?
            .rows
            .into_iter()
            .next())
    }

    /// Every feedback row of a page.
    pub async fn feedback(&self, wiki: &str, page_id: i32) -> ApiResult<Vec<Feedback>> {
        check_wiki(wiki)?;
        let mut pages = self.feedback_rows(wiki, &[page_id]).await?;
        let rows = pages.pop().unwrap_or_default();
        Ok(rows.iter().map(Feedback::from_row).collect())
    }

    /// Every feedback row of each page, in the order given: one wave of
    /// concurrent single-partition reads, and a page with more than
    /// [`PER_PAGE`] rows read on to its end, so that no verdict is ever left
    /// out (a page holds one row per user and suggested image: more rows than
    /// that take that many users).
    async fn feedback_rows(&self, wiki: &str, page_ids: &[i32]) -> ApiResult<Vec<Vec<Row>>> {
        let slice =
            |p: i32| Slice::partition(vec![Value::from(wiki), Value::Int(p)]).limit(PER_PAGE);
        let slices: Vec<Slice> = page_ids.iter().map(|p| slice(*p)).collect();
        let first = self.store.slice_many(&FEEDBACK, &slices).await?;
        let rest = first.into_iter().zip(page_ids).map(|(page, p)| async move {
            let mut rows = page.rows;
            let mut next = page.next;
            while let Some(after) = next {
                let more = self
                    .store
                    .slice(&FEEDBACK, &slice(*p).after(Some(after)))
                    .await?;
                rows.extend(more.rows);
                next = more.next;
            }
            Ok::<_, ApiError>(rows)
        });
        futures::future::try_join_all(rest).await
    }

    /// Records an editor's verdict (editor or contributor) on an image the
    /// page's current dataset suggests: kept across datasets, and from then on
    /// the image is not suggested for the page again. A user's new verdict on
    /// the image replaces theirs.
    pub async fn record_feedback(
        &self,
        who: &Principal,
        input: FeedbackInput,
    ) -> ApiResult<Feedback> {
        let user = who
            .require_any(&[Role::Editor, Role::Contributor])?
            .to_owned();
        check_wiki(&input.wiki)?;
        if input.filename.trim().is_empty() || input.filename.len() > 1_000 {
            return Err(ApiError::bad_input("a filename has 1 to 1000 bytes"));
        }
        if input.accepted && !input.rejection_reasons.is_empty() {
            return Err(ApiError::bad_input(
                "rejectionReasons go with accepted: false",
            ));
        }
        if input.rejection_reasons.len() > 20
            || input.rejection_reasons.iter().any(|r| r.len() > 200)
        {
            return Err(ApiError::bad_input(
                "at most 20 rejection reasons of at most 200 bytes",
            ));
        }
        let mut reasons: Vec<String> = input
            .rejection_reasons
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        reasons.retain(|r| !r.trim().is_empty());
        // Only a suggested image: a verdict on any other file masks nothing,
        // and rows under made-up names would grow a page without bound.
        let Some(origin) = self
            .page(
                &input.wiki,
                input.page_id,
                ReadOptions {
                    include_reviewed: true,
                    ..Default::default()
                },
            )
            .await?
            .into_iter()
            .find(|r| r.suggestion.image == input.filename)
            .map(|r| r.suggestion.origin_wiki)
        else {
            return Err(ApiError::NotFound(format!(
                "a suggestion of {:?} for page {} in the current dataset of {}",
                input.filename, input.page_id, input.wiki
            )));
        };
        let feedback = Feedback {
            wiki: input.wiki,
            page_id: input.page_id,
            filename: input.filename,
            id: time_uuid(self.clock.now()),
            origin_wiki: Some(origin),
            user_name: user,
            is_accepted: input.accepted,
            is_rejected: !input.accepted,
            rejection_reasons: reasons,
        };
        self.store
            .apply(vec![Mutation::upsert(feedback.to_row())])
            .await?;
        crate::kernel::metrics::suggestion_feedback();
        Ok(feedback)
    }

    /// Up to `count` (at most [`MAX_RANDOM`]) pages of the current dataset that
    /// still have unreviewed suggestions. Samples from a random bucket and a
    /// random page id of the dataset's key list, walking on from there (no scan
    /// of the suggestions table).
    pub async fn random_pages(&self, wiki: &str, count: usize) -> ApiResult<Vec<i32>> {
        if count == 0 || count > MAX_RANDOM {
            return Err(ApiError::bad_input(format!(
                "count must be between 1 and {MAX_RANDOM}"
            )));
        }
        let Some(current) = self.current(wiki).await? else {
            return Ok(Vec::new());
        };
        let mut r = [0u8; 8];
        getrandom::fill(&mut r).expect("the OS has randomness");
        let start_bucket = i32::from(r[0]) % KEY_BUCKETS;
        let start_page = format!(
            "{}",
            u32::from_be_bytes([r[1], r[2], r[3], r[4]]) % 1_000_000_000
        );
        let mut found = Vec::new();
        for step in 0..KEY_BUCKETS {
            let b = (start_bucket + step) % KEY_BUCKETS;
            for from_start in [false, true] {
                let mut slice =
                    Slice::partition(vec![wiki.into(), current.as_str().into(), Value::Int(b)])
                        .prefix(vec![Value::Int(0)])
                        .limit(count * 4);
                if !from_start {
                    slice = slice.lower(crate::store::Bound::Inclusive(start_page.as_str().into()));
                }
                let page = self.store.slice(&DATASET_KEYS, &slice).await?;
                let ids: Vec<i32> = page
                    .rows
                    .iter()
                    .filter_map(|r| r.string("item").parse().ok())
                    .filter(|p| !found.contains(p))
                    .collect();
                // `count * 4` keys (up to 200) in reads of at most MAX_PAGES.
                for ids in ids.chunks(MAX_PAGES) {
                    let open = self
                        .pages_of(wiki, Some(&current), ids, ReadOptions::default())
                        .await?;
                    for (id, s) in ids.iter().zip(open) {
                        if !s.is_empty() && found.len() < count {
                            found.push(*id);
                        }
                    }
                    if found.len() >= count {
                        return Ok(found);
                    }
                }
            }
        }
        Ok(found)
    }

    /// Sets the current-dataset age metric of every wiki (the pointer table
    /// holds one row per wiki; the server calls this once a minute).
    pub async fn refresh_metrics(&self) -> ApiResult<()> {
        let page = self
            .store
            .scan(
                &CURRENT,
                Scan {
                    after: None,
                    limit: 10_000,
                },
            )
            .await?;
        let now = self.clock.now();
        for r in &page.rows {
            let switched = r.text("switched").and_then(|t| {
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
            });
            if let Some(t) = switched {
                crate::kernel::metrics::suggestion_dataset_age(
                    &r.string("wiki"),
                    (now - t).whole_seconds(),
                );
            }
        }
        Ok(())
    }

    // The dataset lifecycle.
}

/// Refreshes the suggestion metrics, a pass a unit of work.
struct MetricsWorker {
    suggestions: Suggestions,
    every: std::time::Duration,
}

#[async_trait::async_trait]
impl crate::kernel::worker::Worker for MetricsWorker {
    fn name(&self) -> String {
        "suggestions-metrics".into()
    }

    async fn work(&mut self) -> ApiResult<crate::kernel::worker::WorkerState> {
        self.suggestions.refresh_metrics().await?;
        Ok(crate::kernel::worker::WorkerState::Idle)
    }

    async fn wait_for_work(&mut self) {
        tokio::time::sleep(self.every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_uuids_carry_their_time() {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_796_317_200_500_000_000).unwrap();
        let id = time_uuid(t);
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "1", "version 1: {id}");
        assert_eq!(uuid_time(&id).unwrap(), "2026-12-03T17:00:00.5Z", "{t}");
        assert!(uuid_time("not-a-uuid").is_none());
        assert_ne!(time_uuid(t), id, "random clock sequence and node");
    }
}
