//! `repair-views`: compares every assignment query table with what the base
//! table objects_keywords says it must hold, and (unless only checking) rewrites
//! what differs. Streams both sides page by page, so memory stays flat however
//! many assignments there are.
//!
//! Two passes: the base table, looking up each assignment's five expected rows
//! (missing or different rows are rewritten, and a PUBLISHED or DELETED one
//! whose status row was lost is queued for the reindexer again: the change
//! wrote both in one batch); then each query table, looking up each row's
//! base assignment (rows with no such assignment, or under another status,
//! are deleted). Then the counts (`assignment_counts`): each portal's, as
//! counted in the first pass, against the stored ones (read before and after
//! the passes; a portal whose counts moved meanwhile is counted again on its
//! own), the differences added.

use std::collections::BTreeMap;

use super::model::*;
use futures::TryStreamExt;

use crate::store::buckets::all_buckets;
use crate::store::{DynStore, Mutation, Row, Slice, StoreError, Table};
use crate::store::{pages, table_pages};

const PAGE: usize = 500;
/// Rows per repair batch: small enough for Cassandra's batch size thresholds.
const WRITE_BATCH: usize = 20;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableReport {
    /// Rows the base table implies that were absent.
    pub missing: u64,
    /// Rows present with other values than the base table implies.
    pub different: u64,
    /// Rows with no assignment behind them.
    pub stale: u64,
}

impl TableReport {
    pub fn total(&self) -> u64 {
        self.missing + self.different + self.stale
    }
}

#[derive(Debug, Default)]
pub struct RepairReport {
    pub assignments: u64,
    /// Base rows that are not well-formed assignments (left alone, reported).
    pub malformed: u64,
    pub tables: BTreeMap<&'static str, TableReport>,
    pub repaired: bool,
    /// Portals whose counts kept moving while they were counted (busy with
    /// changes): left as they were, to be counted again by another run.
    pub unsettled: Vec<String>,
}

impl RepairReport {
    pub fn differences(&self) -> u64 {
        self.tables.values().map(TableReport::total).sum::<u64>()
            + self.malformed
            + self.unsettled.len() as u64
    }

    pub fn summary(&self) -> String {
        let mut out = format!(
            "{} assignments checked, {} differences{}",
            self.assignments,
            self.differences(),
            if self.repaired && self.differences() > 0 {
                " (repaired)"
            } else {
                ""
            }
        );
        if self.malformed > 0 {
            out.push_str(&format!(
                "\n  objects_keywords: {} malformed rows (not repairable from the base table)",
                self.malformed
            ));
        }
        for p in &self.unsettled {
            out.push_str(&format!(
                "\n  assignment_counts: the counts of portal {p} changed while they were counted; run again when it is quieter"
            ));
        }
        for (t, r) in &self.tables {
            if r.total() > 0 {
                out.push_str(&format!(
                    "\n  {t}: {} missing, {} different, {} stale",
                    r.missing, r.different, r.stale
                ));
            }
        }
        out
    }
}

/// Checks (and with `repair`, rewrites) every query table, or only the rows of
/// one portal.
pub async fn repair_views(
    store: &DynStore,
    repair: bool,
    portal: Option<&str>,
) -> Result<RepairReport, StoreError> {
    let mut report = RepairReport {
        repaired: repair,
        ..Default::default()
    };
    for t in VIEWS.iter().chain([&&ASSIGNMENT_COUNTS]) {
        report.tables.insert(t.name, TableReport::default());
    }
    let in_scope = |r: &Row| portal.is_none_or(|p| r.text("top_level_category_id") == Some(p));
    let queued_at = crate::kernel::Clock::system().rfc3339();
    let counts_before = stored_counts(store, portal).await?;
    let mut counted = Counts::new();

    // Pass 1: every assignment's expected rows exist with the right values.
    let mut base = std::pin::pin!(table_pages(store.as_ref(), &OBJECTS_KEYWORDS, None, PAGE));
    while let Some(page) = base.try_next().await? {
        let mut assignments = Vec::new();
        for r in page.rows.iter().filter(|r| in_scope(r)) {
            match Assignment::from_row(r) {
                Some(a) => assignments.push(a),
                None => report.malformed += 1,
            }
        }
        report.assignments += assignments.len() as u64;
        for a in &assignments {
            *counted.entry(count_key(&a.key.portal_id, &a.key.creator, a.status)).or_default() += 1;
        }
        let mut fixes: Vec<Mutation> = Vec::new();
        for t in VIEWS {
            let expected: Vec<Row> = assignments.iter().map(|a| a.row(t)).collect();
            let keys = expected
                .iter()
                .map(Row::key)
                .collect::<Result<Vec<_>, _>>()?;
            let found = store.get_many(t, &keys).await?;
            let entry = report.tables.get_mut(t.name).expect("every view");
            for ((a, want), got) in assignments.iter().zip(expected).zip(found) {
                match got {
                    None => entry.missing += 1,
                    Some(g) if g != want => entry.different += 1,
                    Some(_) => continue,
                }
                // The status row and the release-queue row of a change that
                // must reach the search index are one batch: one lost, both.
                if t.name == OBJECTS_KEYWORDS_STATUS.name && a.status.reindexes() {
                    fixes.push(Mutation::upsert(queue_row(&a.key.ddb_id, &queued_at)));
                }
                fixes.push(Mutation::upsert(want));
            }
        }
        if repair {
            write(store, fixes).await?;
        }
    }

    // Pass 2: every query row belongs to an assignment that has it.
    for t in VIEWS {
        let mut view = std::pin::pin!(table_pages(store.as_ref(), t, None, PAGE));
        while let Some(page) = view.try_next().await? {
            let rows: Vec<&Row> = page.rows.iter().filter(|r| in_scope(r)).collect();
            let stale = stale_rows(store, t, &rows).await?;
            report.tables.get_mut(t.name).expect("every view").stale += stale.len() as u64;
            if repair {
                let deletes = stale
                    .into_iter()
                    .map(|r| Ok(Mutation::delete(t, r.key()?)))
                    .collect::<Result<Vec<_>, StoreError>>()?;
                write(store, deletes).await?;
            }
        }
    }

    // Pass 3: the counts, portal by portal.
    let counts_after = stored_counts(store, portal).await?;
    let portals: std::collections::BTreeSet<&str> = [&counts_before, &counts_after, &counted]
        .into_iter()
        .flat_map(|c| c.keys().map(|(p, _, _)| p.as_str()))
        .collect();
    let mut fixes = Vec::new();
    for p in portals {
        let (want, have) = if of_portal(&counts_before, p) == of_portal(&counts_after, p) {
            (of_portal(&counted, p), of_portal(&counts_after, p))
        } else {
            match recount(store, p).await? {
                Some(settled) => settled,
                None => {
                    report.unsettled.push(p.to_owned());
                    continue;
                }
            }
        };
        let entry = report
            .tables
            .get_mut(ASSIGNMENT_COUNTS.name)
            .expect("the counts");
        for key in want.keys().chain(have.keys()).collect::<std::collections::BTreeSet<_>>() {
            let (w, h) = (want.get(key).copied(), have.get(key).copied());
            let by = w.unwrap_or(0) - h.unwrap_or(0);
            if by == 0 {
                continue;
            }
            match (w, h) {
                (_, None) => entry.missing += 1,
                (None, Some(_)) => entry.stale += 1,
                (Some(_), Some(_)) => entry.different += 1,
            }
            let (portal_id, creator, status) = key;
            fixes.push(count_change(portal_id, creator, *status, by));
        }
    }
    if repair {
        write(store, fixes).await?;
    }
    Ok(report)
}

/// Counts by (portal, creator, status).
type Counts = BTreeMap<(String, String, AssignmentStatus), i64>;

fn count_key(
    portal_id: &str,
    creator: &str,
    status: AssignmentStatus,
) -> (String, String, AssignmentStatus) {
    (portal_id.to_owned(), creator.to_owned(), status)
}

fn of_portal(counts: &Counts, portal: &str) -> Counts {
    counts
        .iter()
        .filter(|((p, _, _), _)| p == portal)
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// The stored counts (all portals', or one's), without the zero ones.
async fn stored_counts(store: &DynStore, portal: Option<&str>) -> Result<Counts, StoreError> {
    let mut out = Counts::new();
    if let Some(p) = portal {
        for c in CreatorCount::of_portal(store, p).await? {
            out.insert(count_key(p, &c.creator, c.status), c.count);
        }
        return Ok(out);
    }
    let mut rows = std::pin::pin!(table_pages(store.as_ref(), &ASSIGNMENT_COUNTS, None, PAGE));
    while let Some(page) = rows.try_next().await? {
        for r in &page.rows {
            if let (Some(p), Some(c)) = (r.text("top_level_category_id"), CreatorCount::from_row(r))
                && c.count != 0
            {
                out.insert(count_key(p, &c.creator, c.status), c.count);
            }
        }
    }
    Ok(out)
}

/// A portal's assignments counted from the base table, and its stored
/// counts, as of a moment when the stored counts did not move during the
/// count (a few tries; none if they kept moving).
async fn recount(store: &DynStore, portal: &str) -> Result<Option<(Counts, Counts)>, StoreError> {
    for _ in 0..3 {
        let before = stored_counts(store, Some(portal)).await?;
        let mut counted = Counts::new();
        for partition in all_buckets(&[portal.into()]) {
            let slice = Slice::partition(partition).limit(PAGE);
            let mut rows = std::pin::pin!(pages(store.as_ref(), &OBJECTS_KEYWORDS, slice));
            while let Some(page) = rows.try_next().await? {
                for a in page.rows.iter().filter_map(Assignment::from_row) {
                    *counted.entry(count_key(portal, &a.key.creator, a.status)).or_default() += 1;
                }
            }
        }
        let after = stored_counts(store, Some(portal)).await?;
        if before == after {
            return Ok(Some((counted, after)));
        }
    }
    Ok(None)
}

/// The rows of `table` whose assignment does not exist or would not have them.
async fn stale_rows<'a>(
    store: &DynStore,
    table: &'static Table,
    rows: &[&'a Row],
) -> Result<Vec<&'a Row>, StoreError> {
    let mut keyed = Vec::new();
    let mut stale = Vec::new();
    for r in rows {
        let key = match (
            r.text("top_level_category_id"),
            r.text("ddb_id"),
            r.text("keyword_id"),
            r.text("creator"),
        ) {
            (Some(p), Some(d), Some(k), Some(c)) => AssignmentKey {
                portal_id: p.to_owned(),
                ddb_id: d.to_owned(),
                keyword_id: k.to_owned(),
                creator: c.to_owned(),
            },
            _ => {
                stale.push(*r);
                continue;
            }
        };
        keyed.push((*r, key));
    }
    let keys: Vec<_> = keyed.iter().map(|(_, k)| k.base_key()).collect();
    let bases = store.get_many(&OBJECTS_KEYWORDS, &keys).await?;
    for ((r, _), base) in keyed.into_iter().zip(bases) {
        let wanted_key = base
            .as_ref()
            .and_then(Assignment::from_row)
            .map(|a| a.row(table).key())
            .transpose()?;
        if wanted_key != Some(r.key()?) {
            stale.push(r);
        }
    }
    Ok(stale)
}

async fn write(store: &DynStore, mutations: Vec<Mutation>) -> Result<(), StoreError> {
    let mut it = mutations.into_iter().peekable();
    while it.peek().is_some() {
        let chunk: Vec<Mutation> = it.by_ref().take(WRITE_BATCH).collect();
        store.apply(chunk).await?;
    }
    Ok(())
}
