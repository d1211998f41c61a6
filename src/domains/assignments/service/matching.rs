//! Whole-filter actions: every assignment of a portal in one status (of one
//! creator, or of all) moved to another status on the server, as a job, not
//! as thousands of requests from a browser. Checked first against the count
//! the curator saw (refused when it changed), then page by page, each
//! assignment a compare-and-set from the status like any transition.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// Assignments one whole-filter action moves at most.
pub const MAX_MATCHING: i64 = 100_000;
/// Assignments read a page by a whole-filter action.
const MATCHING_PAGE: usize = 200;

/// What a whole-filter action matches: a portal's assignments in `status`,
/// of `creator` when one is named.
#[derive(Clone, Debug, PartialEq)]
pub struct Matching {
    pub portal_id: String,
    pub status: AssignmentStatus,
    pub creator: Option<String>,
}

impl Matching {
    /// As a job's input names it.
    pub fn describe(&self, to: AssignmentStatus) -> String {
        format!(
            "portal {} {}{} -> {}",
            self.portal_id,
            self.status.as_str(),
            self.creator
                .as_deref()
                .map(|c| format!(" by {c}"))
                .unwrap_or_default(),
            to.as_str()
        )
    }
}

/// How a whole-filter action went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchingReport {
    /// Moved to the new status.
    pub applied: u64,
    /// Changed by someone else first (no longer in the status).
    pub conflicts: u64,
    /// Not moved for another reason (each said to `failed`).
    pub failed: u64,
}

impl MatchingReport {
    pub fn summary(&self) -> String {
        format!(
            "{} changed, {} changed by someone else first, {} failed",
            self.applied, self.conflicts, self.failed
        )
    }
}

impl Assignments {
    /// How many assignments `m` matches now (from the counts).
    pub async fn count_matching(&self, m: &Matching) -> ApiResult<i64> {
        let counts = self.counts(&m.portal_id).await?;
        Ok(counts
            .iter()
            .filter(|c| c.status == m.status && m.creator.as_ref().is_none_or(|x| *x == c.creator))
            .map(|c| c.count)
            .sum())
    }

    /// Before a whole-filter action: the caller may make the change, and `m`
    /// matches `expected` assignments now, as many as the curator saw
    /// (MATCH_COUNT_CHANGED otherwise, NOTHING_MATCHES for none).
    pub async fn check_matching(
        &self,
        who: &Principal,
        m: &Matching,
        to: AssignmentStatus,
        expected: i64,
    ) -> ApiResult<()> {
        check_transition(who, m.status, to)?;
        if let Some(c) = &m.creator {
            check_id("creator", c)?;
        }
        if !(1..=MAX_MATCHING).contains(&expected) {
            return Err(ApiError::bad_input(format!(
                "a whole-filter action moves 1 to {MAX_MATCHING} assignments"
            )));
        }
        let now = self.count_matching(m).await?;
        if now == 0 {
            return Err(ApiError::Refused {
                code: "NOTHING_MATCHES",
                message: "no assignment matches the filter now: nothing was changed".into(),
            });
        }
        if now != expected {
            return Err(ApiError::Refused {
                code: "MATCH_COUNT_CHANGED",
                message: format!(
                    "the filter matches {now} assignments now, not {expected}: look again; nothing was changed"
                ),
            });
        }
        Ok(())
    }

    /// Moves up to `limit` of `m`'s assignments to `to` as `who`, page by
    /// page, each a compare-and-set from `m.status` recorded like any
    /// transition (history, change feed, release queue). `done` counts the
    /// assignments handled; `failed` hears of each one not moved for another
    /// reason than a conflict. Fails only when a whole page fails.
    pub async fn transition_matching(
        &self,
        who: &Principal,
        m: &Matching,
        to: AssignmentStatus,
        limit: u64,
        done: &AtomicU64,
        failed: &(dyn Fn(&str) + Sync),
    ) -> ApiResult<MatchingReport> {
        check_transition(who, m.status, to)?;
        let feed = Feed::By(who.sub.as_deref());
        let mut report = MatchingReport::default();
        let mut after: Option<Cursor> = None;
        let mut handled = 0u64;
        while handled < limit {
            let first = MATCHING_PAGE.min(usize::try_from(limit - handled).unwrap_or(MATCHING_PAGE));
            let page = self
                .list(&m.portal_id, Some(m.status), m.creator.as_deref(), first, after.take())
                .await?;
            let Some((last, _)) = page.items.last() else {
                break;
            };
            // The rows moved leave the status; the rest follow the last key.
            after = Some(last.clone());
            let keys: Vec<AssignmentKey> = page.items.iter().map(|(_, a)| a.key.clone()).collect();
            let results = bounded(keys, WRITE_CONCURRENCY, |k| async move {
                let r = self.change_status(&k, m.status, to, feed, None).await;
                (k, r)
            })
            .await;
            let mut page_failed = 0;
            let page_len = results.len();
            for (k, r) in results {
                handled += 1;
                done.fetch_add(1, Ordering::Relaxed);
                match r {
                    Ok(_) => report.applied += 1,
                    Err(ApiError::Conflict { .. } | ApiError::NotFound(_)) => report.conflicts += 1,
                    Err(e) => {
                        report.failed += 1;
                        page_failed += 1;
                        failed(&format!(
                            "{} {} {}: {} ({})",
                            k.ddb_id,
                            k.keyword_id,
                            k.creator,
                            e.code(),
                            e.message()
                        ));
                    }
                }
            }
            if page_failed == page_len {
                return Err(ApiError::Unavailable);
            }
            if !page.has_next {
                break;
            }
        }
        Ok(report)
    }
}
