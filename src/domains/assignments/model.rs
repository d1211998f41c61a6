//! The assignment tables (seed 000 with the changes cql/README.md lists):
//! the base table objects_keywords, the seven query tables (five replace the
//! seed's materialized views, two order a status by confidence and by age),
//! the release queue and runs, the history and the counts.
//!
//! Every table whose seed key is partitioned by portal or by keyword is bucketed
//! by a hash of the ddb id ([`crate::store::buckets`]). All of them carry every
//! column of the assignment, so a query never needs a second read.

use crate::store::ColumnType::{Double, Text};
use crate::store::buckets::bucket_of;
use crate::store::table;
use crate::store::{DynStore, Mutation, Row, StoreError, Table, col};

/// The non-key columns every assignment table carries (minus its key columns).
macro_rules! assignment_columns {
    ($($extra:expr),* $(,)?) => {
        &[
            $($extra,)*
            col("child_category_id", Text),
            col("assignment_type", Text),
            col("created_at", Text),
            col("modified_at", Text),
            col("confidence_value", Double),
        ]
    };
}

/// The assignment tables: the base table and its query tables, each
/// `NAME: table (partition key) (clustering, all text, ascending)`, with
/// `+ status` where `status` is not part of the key.
macro_rules! assignment_tables {
    ($($(#[$meta:meta])* $name:ident: $table:tt ($($pk:tt: $pkt:ident),+) ($($ck:tt),+) $(+ $status:tt)?;)*) => {
    $(
        table! {
            $(#[$meta])*
            pub $name: Target.$table
                partition($($pk: $pkt),+)
                clustering($($ck: Text Asc),+)
                columns = assignment_columns![$(col(stringify!($status), Text))?]
        }
    )*
    };
}

assignment_tables! {
    /// The base table. Seed key `(top_level_category_id, ddb_id, keyword_id, creator)`,
    /// with the bucket added to the partition key.
    OBJECTS_KEYWORDS: objects_keywords (top_level_category_id: Text, bucket: Int) (ddb_id, keyword_id, creator) + status;
    OBJECTS_KEYWORDS_CREATOR: objects_keywords_creator (top_level_category_id: Text, bucket: Int) (creator, ddb_id, keyword_id) + status;
    OBJECTS_KEYWORDS_STATUS: objects_keywords_status (top_level_category_id: Text, bucket: Int) (status, ddb_id, keyword_id, creator);
    /// All assignments of one object: bounded by the keywords one object can carry,
    /// so it keeps the seed's key unbucketed.
    OBJECTS_KEYWORDS_DDBID: objects_keywords_ddbid (ddb_id: Text) (top_level_category_id, keyword_id, creator) + status;
    OBJECTS_KEYWORDS_KEYWORD: objects_keywords_keyword (keyword_id: Text, bucket: Int) (top_level_category_id, ddb_id, creator) + status;
    OBJECTS_KEYWORDS_CREATORS_WITH_STATUS: objects_keywords_creators_with_status (top_level_category_id: Text, bucket: Int) (status, creator, ddb_id, keyword_id);
}

table! {
    /// A portal's assignments by status, highest confidence first (`rank`:
    /// minus the confidence, 1 for none, so those come last; ascending like
    /// every other clustering column, so a cursor is one tuple comparison
    /// on Cassandra); for the queue's sort by confidence.
    pub OBJECTS_KEYWORDS_STATUS_CONFIDENCE: Target.objects_keywords_status_confidence
        partition(top_level_category_id: Text, bucket: Int)
        clustering(status: Text Asc, rank: Double Asc, ddb_id: Text Asc, keyword_id: Text Asc, creator: Text Asc)
        columns = assignment_columns![]
}

table! {
    /// A portal's assignments by status, oldest first (by `created_at`); for
    /// the queue's sort by age.
    pub OBJECTS_KEYWORDS_STATUS_AGE: Target.objects_keywords_status_age
        partition(top_level_category_id: Text, bucket: Int)
        clustering(status: Text Asc, created_at: Text Asc, ddb_id: Text Asc, keyword_id: Text Asc, creator: Text Asc)
        columns = &[
            col("child_category_id", Text),
            col("assignment_type", Text),
            col("modified_at", Text),
            col("confidence_value", Double),
        ]
}

/// The assignment tables, the base table first.
pub static TARGET_TABLES: &[&Table] = &[
    &OBJECTS_KEYWORDS,
    &OBJECTS_KEYWORDS_CREATOR,
    &OBJECTS_KEYWORDS_STATUS,
    &OBJECTS_KEYWORDS_DDBID,
    &OBJECTS_KEYWORDS_KEYWORD,
    &OBJECTS_KEYWORDS_CREATORS_WITH_STATUS,
    &OBJECTS_KEYWORDS_STATUS_CONFIDENCE,
    &OBJECTS_KEYWORDS_STATUS_AGE,
];

/// The query tables, each rebuilt from the base table by `repair-views`.
pub static VIEWS: &[&Table] = TARGET_TABLES.split_at(1).1;

/// The query tables keyed by status: an assignment's row moves with it.
pub static BY_STATUS: &[&Table] = &[
    &OBJECTS_KEYWORDS_STATUS,
    &OBJECTS_KEYWORDS_CREATORS_WITH_STATUS,
    &OBJECTS_KEYWORDS_STATUS_CONFIDENCE,
    &OBJECTS_KEYWORDS_STATUS_AGE,
];

/// The order of a portal's assignments in one status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, async_graphql::Enum)]
pub enum AssignmentOrder {
    /// By ddb id, keyword id, creator (the object's assignments together).
    #[default]
    Object,
    /// Highest confidence first (none last), then as `OBJECT`.
    Confidence,
    /// Oldest first (by `createdAt`), then as `OBJECT`.
    Oldest,
}

table! {
    /// The ddb ids waiting for the reindexer, bucketed by a hash of the id.
    pub RELEASE_DDBIDS: Themes.release_ddbids
        partition(bucket: Int)
        clustering(id: Text Asc)
        columns(enqueued_at: Text)
}

table! {
    /// Per portal, the last successful (1) and the last failed (0) release run.
    pub RELEASE_RUNS: Themes.release_runs
        partition(top_level_category_id: Text)
        clustering(successful: Int Asc)
        columns(time: Text, published: BigInt, message: Text)
}

table! {
    /// Per portal, every recorded release run, newest first, with who ran
    /// it (one row a run; rows expire after `RELEASE_LOG_DAYS`).
    pub RELEASE_LOG: Themes.release_log
        partition(top_level_category_id: Text)
        clustering(time: Text Desc)
        columns(successful: Int, published: BigInt, message: Text, actor: Text)
}

table! {
    /// Every status change of one assignment, oldest first: a partition per
    /// assignment, a row per change (a handful; `MAX_HISTORY` are read).
    /// Written in the batch of the change's query rows.
    pub ASSIGNMENT_HISTORY: Target.assignment_history
        partition(top_level_category_id: Text, ddb_id: Text, keyword_id: Text, creator: Text)
        clustering(at: Text Asc)
        columns(actor: Text, from_status: Text, to_status: Text)
}

table! {
    /// Per portal, whether a release needs a second editor's approval
    /// (four eyes) and the request waiting for it (one row a portal).
    pub RELEASE_APPROVALS: Themes.release_approvals
        partition(top_level_category_id: Text)
        columns(required: Int, requested_by: Text, requested_at: Text)
}

/// A portal's four-eyes setting and the release request waiting, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReleaseApproval {
    pub portal_id: String,
    pub required: bool,
    /// Who asked for the release that waits for approval, and when.
    pub requested_by: Option<String>,
    pub requested_at: Option<String>,
}

impl ReleaseApproval {
    pub fn row(&self) -> Row {
        Row::new(&RELEASE_APPROVALS)
            .set("top_level_category_id", &self.portal_id)
            .set("required", i32::from(self.required))
            .set_opt("requested_by", self.requested_by.clone())
            .set_opt("requested_at", self.requested_at.clone())
    }

    pub fn from_row(r: &Row) -> ReleaseApproval {
        ReleaseApproval {
            portal_id: r.string("top_level_category_id"),
            required: r.int("required") == Some(1),
            requested_by: r.text("requested_by").map(str::to_owned),
            requested_at: r.text("requested_at").map(str::to_owned),
        }
    }
}

/// The changes of one assignment a read returns at most (the latest).
pub const MAX_HISTORY: usize = 50;

/// One status change of an assignment.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusChange {
    /// When (RFC 3339 to the nanosecond: the assignment's `modified_at`).
    pub at: String,
    /// Who made it (the token's subject); none for a release run's
    /// publication.
    pub actor: Option<String>,
    pub from: AssignmentStatus,
    pub to: AssignmentStatus,
}

impl StatusChange {
    pub fn row(&self, key: &AssignmentKey) -> Row {
        Row::new(&ASSIGNMENT_HISTORY)
            .set("top_level_category_id", &key.portal_id)
            .set("ddb_id", &key.ddb_id)
            .set("keyword_id", &key.keyword_id)
            .set("creator", &key.creator)
            .set("at", &self.at)
            .set_opt("actor", self.actor.clone())
            .set("from_status", self.from.as_str())
            .set("to_status", self.to.as_str())
    }

    pub fn from_row(r: &Row) -> Option<StatusChange> {
        Some(StatusChange {
            at: r.string("at"),
            actor: r.text("actor").map(str::to_owned),
            from: AssignmentStatus::parse(r.text("from_status")?)?,
            to: AssignmentStatus::parse(r.text("to_status")?)?,
        })
    }
}

/// How long the release log keeps a run.
pub const RELEASE_LOG_DAYS: u32 = 400;

pub static RELEASE_TABLES: &[&Table] = &[
    &RELEASE_DDBIDS,
    &RELEASE_RUNS,
    &RELEASE_LOG,
    &RELEASE_APPROVALS,
];

/// The tables of assignments' histories and counts.
pub static HISTORY_TABLES: &[&Table] = &[&ASSIGNMENT_HISTORY, &ASSIGNMENT_COUNTS];

table! {
    /// Per portal, how many assignments each creator has in each status:
    /// counters that every suggestion and status change moves in the
    /// writes that follow it, recomputed by `repair-views`.
    pub ASSIGNMENT_COUNTS: Target.assignment_counts
        partition(top_level_category_id: Text)
        clustering(creator: Text Asc, status: Text Asc)
        columns(assignments: Counter)
}

/// `by` more (negative: fewer) assignments of `creator` in `status` in a
/// portal.
pub fn count_change(portal_id: &str, creator: &str, status: AssignmentStatus, by: i64) -> Mutation {
    Mutation::Add {
        table: &ASSIGNMENT_COUNTS,
        key: vec![portal_id.into(), creator.into(), status.as_str().into()],
        column: "assignments",
        by,
    }
}

/// The count changes of an assignment of `key` moving from `from` (none: a
/// new one) to `to`.
pub fn count_moves(key: &AssignmentKey, from: Option<AssignmentStatus>, to: AssignmentStatus) -> Vec<Mutation> {
    let mut out = vec![count_change(&key.portal_id, &key.creator, to, 1)];
    if let Some(from) = from {
        out.push(count_change(&key.portal_id, &key.creator, from, -1));
    }
    out
}

/// How many assignments of one creator a portal holds in one status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatorCount {
    pub creator: String,
    pub status: AssignmentStatus,
    pub count: i64,
}

/// Count rows read a page (a portal has one a creator and status).
const COUNT_PAGE: usize = 1_000;

impl CreatorCount {
    /// A portal's counts as stored, by creator and status, in that order,
    /// without the zero ones.
    pub async fn of_portal(
        store: &DynStore,
        portal_id: &str,
    ) -> Result<Vec<CreatorCount>, StoreError> {
        use futures::TryStreamExt;
        let slice = crate::store::Slice::partition(vec![portal_id.into()]).limit(COUNT_PAGE);
        let mut rows = std::pin::pin!(crate::store::pages(
            store.as_ref(),
            &ASSIGNMENT_COUNTS,
            slice
        ));
        let mut out = Vec::new();
        while let Some(page) = rows.try_next().await? {
            out.extend(
                page.rows
                    .iter()
                    .filter_map(CreatorCount::from_row)
                    .filter(|c| c.count != 0),
            );
        }
        Ok(out)
    }

    pub fn from_row(r: &Row) -> Option<CreatorCount> {
        Some(CreatorCount {
            creator: r.text("creator")?.to_owned(),
            status: AssignmentStatus::parse(r.text("status")?)?,
            count: r.bigint("assignments").unwrap_or(0),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, async_graphql::Enum)]
pub enum AssignmentStatus {
    Autosuggested,
    Suggested,
    Deletesuggested,
    Accepted,
    Rejected,
    Published,
    Deleted,
}

impl AssignmentStatus {
    pub const ALL: [AssignmentStatus; 7] = [
        AssignmentStatus::Autosuggested,
        AssignmentStatus::Suggested,
        AssignmentStatus::Deletesuggested,
        AssignmentStatus::Accepted,
        AssignmentStatus::Rejected,
        AssignmentStatus::Published,
        AssignmentStatus::Deleted,
    ];

    /// The stored spelling (the seed's).
    pub fn as_str(self) -> &'static str {
        match self {
            AssignmentStatus::Autosuggested => "AUTOSUGGESTED",
            AssignmentStatus::Suggested => "SUGGESTED",
            AssignmentStatus::Deletesuggested => "DELETESUGGESTED",
            AssignmentStatus::Accepted => "ACCEPTED",
            AssignmentStatus::Rejected => "REJECTED",
            AssignmentStatus::Published => "PUBLISHED",
            AssignmentStatus::Deleted => "DELETED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Does reaching this status change the search index (the ddb id is queued)?
    pub fn reindexes(self) -> bool {
        matches!(
            self,
            AssignmentStatus::Published | AssignmentStatus::Deleted
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, async_graphql::Enum)]
pub enum AssignmentType {
    Machine,
    Archive,
    Anybody,
}

impl AssignmentType {
    pub fn as_str(self) -> &'static str {
        match self {
            AssignmentType::Machine => "MACHINE",
            AssignmentType::Archive => "ARCHIVE",
            AssignmentType::Anybody => "ANYBODY",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            AssignmentType::Machine,
            AssignmentType::Archive,
            AssignmentType::Anybody,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

/// The primary key of an assignment (the seed's, without the bucket).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AssignmentKey {
    pub portal_id: String,
    pub ddb_id: String,
    pub keyword_id: String,
    pub creator: String,
}

impl AssignmentKey {
    /// The base table's full primary key.
    pub fn base_key(&self) -> Vec<crate::store::Value> {
        vec![
            self.portal_id.as_str().into(),
            bucket_of(&self.ddb_id).into(),
            self.ddb_id.as_str().into(),
            self.keyword_id.as_str().into(),
            self.creator.as_str().into(),
        ]
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub key: AssignmentKey,
    pub child_category_id: String,
    pub assignment_type: AssignmentType,
    pub status: AssignmentStatus,
    pub created_at: String,
    pub modified_at: String,
    pub confidence: Option<f64>,
}

impl Assignment {
    /// This assignment as a row of `table` (any of the assignment tables: they
    /// share column names and differ only in how the key is arranged).
    pub fn row(&self, table: &'static Table) -> Row {
        let k = &self.key;
        let cells: [(&str, crate::store::Value); 11] = [
            ("top_level_category_id", k.portal_id.as_str().into()),
            ("bucket", bucket_of(&k.ddb_id).into()),
            ("ddb_id", k.ddb_id.as_str().into()),
            ("keyword_id", k.keyword_id.as_str().into()),
            ("creator", k.creator.as_str().into()),
            ("child_category_id", self.child_category_id.as_str().into()),
            ("status", self.status.as_str().into()),
            ("assignment_type", self.assignment_type.as_str().into()),
            ("created_at", self.created_at.as_str().into()),
            ("modified_at", self.modified_at.as_str().into()),
            ("rank", self.confidence.map_or(1.0, |c| -c).into()),
        ];
        let mut row = Row::new(table);
        for (name, v) in cells {
            if table.index_of(name).is_some() {
                row = row.set(name, v);
            }
        }
        row.set_opt("confidence_value", self.confidence)
    }

    /// Reads an assignment from a row of any assignment table. `None` when the
    /// row is not a well-formed assignment (which `repair-views` reports).
    pub fn from_row(r: &Row) -> Option<Assignment> {
        Self::from_owned(r.clone())
    }

    /// The same, taking the row: its texts move into the assignment (a
    /// page of them is read this way, with nothing copied).
    pub fn from_owned(mut r: Row) -> Option<Assignment> {
        Some(Assignment {
            assignment_type: AssignmentType::parse(r.text("assignment_type")?)?,
            status: AssignmentStatus::parse(r.text("status")?)?,
            confidence: r.double("confidence_value"),
            key: AssignmentKey {
                portal_id: r.take_text("top_level_category_id")?,
                ddb_id: r.take_text("ddb_id")?,
                keyword_id: r.take_text("keyword_id")?,
                creator: r.take_text("creator")?,
            },
            child_category_id: r.take_text("child_category_id").unwrap_or_default(),
            created_at: r.take_text("created_at").unwrap_or_default(),
            modified_at: r.take_text("modified_at").unwrap_or_default(),
        })
    }

    /// The assignment stored under `key` in the base table, if any (and well-formed).
    pub async fn stored(
        store: &DynStore,
        key: &AssignmentKey,
    ) -> Result<Option<Assignment>, StoreError> {
        let row = store.get(&OBJECTS_KEYWORDS, &key.base_key()).await?;
        Ok(row.as_ref().and_then(Assignment::from_row))
    }

    /// The query-table rows derived from this assignment (one a view).
    pub fn view_rows(&self) -> Vec<Row> {
        VIEWS.iter().map(|t| self.row(t)).collect()
    }

    /// The batch that makes the query tables agree with this assignment: its rows
    /// under every other status are deleted (whatever an earlier, possibly
    /// reordered, write left there), then its rows are written.
    pub fn view_batch(&self) -> Vec<Mutation> {
        let mut batch = Vec::new();
        for other in AssignmentStatus::ALL {
            if other == self.status {
                continue;
            }
            let mut a = self.clone();
            a.status = other;
            for t in BY_STATUS {
                let key = a.row(t).key().expect("assignment rows have full keys");
                batch.push(Mutation::delete(t, key));
            }
        }
        batch.extend(self.view_rows().into_iter().map(Mutation::upsert));
        batch
    }
}

/// A row of `release_runs`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReleaseRun {
    pub portal_id: String,
    pub successful: bool,
    pub time: String,
    pub published: i64,
    pub message: Option<String>,
    /// Who ran it (the token's subject); kept in the release log only.
    pub actor: Option<String>,
}

impl ReleaseRun {
    /// Its row in `release_runs` (the last success and failure) or in the
    /// release log.
    pub fn row_in(&self, table: &'static Table) -> Row {
        let row = Row::new(table)
            .set("top_level_category_id", &self.portal_id)
            .set("successful", i32::from(self.successful))
            .set("time", &self.time)
            .set("published", self.published)
            .set_opt("message", self.message.clone());
        match table.index_of("actor") {
            Some(_) => row.set_opt("actor", self.actor.clone()),
            None => row,
        }
    }

    pub fn from_row(r: &Row) -> ReleaseRun {
        ReleaseRun {
            portal_id: r.string("top_level_category_id"),
            successful: r.int("successful") == Some(1),
            time: r.string("time"),
            published: r.bigint("published").unwrap_or(0),
            message: r.text("message").map(str::to_owned),
            // `release_runs` has no actor column; the release log has.
            actor: r
                .table
                .index_of("actor")
                .and_then(|_| r.text("actor"))
                .map(str::to_owned),
        }
    }
}

/// The release-queue row of a ddb id.
pub fn queue_row(ddb_id: &str, now: &str) -> Row {
    Row::new(&RELEASE_DDBIDS)
        .set("bucket", bucket_of(ddb_id))
        .set("id", ddb_id)
        .set("enqueued_at", now)
}

pub fn queue_key(ddb_id: &str) -> Vec<crate::store::Value> {
    vec![bucket_of(ddb_id).into(), ddb_id.into()]
}
