//! The image-suggestion tables (seed 003 and the public service's schema, with
//! the changes cql/README.md lists): suggestions, feedback, title_cache and
//! instanceof_cache, each row tagged with the dataset it came from, plus the
//! per-wiki dataset registry, the pointer to the current dataset, and the keys
//! of each dataset (to purge it and to sample its pages without a scan).

use serde::Serialize;

use crate::store::Table;
use crate::store::{record, table, text_cell};

table! {
    /// One page's suggestions of one dataset: the public key `((wiki, page_id), id, image)`,
    /// `id` being the dataset.
    pub SUGGESTIONS: Suggestions.suggestions
        partition(wiki: Text, page_id: Int)
        clustering(id: Text Asc, image: Text Asc)
        columns(
            origin_wiki: Text, confidence: Double, found_on: TextList, kind: TextList,
            page_rev: Int, section_heading: Text, section_index: Int, page_qid: Text
        )
}

table! {
    /// Editors' feedback, independent of datasets: one verdict per user and
    /// image, `((wiki, page_id), filename, user_name)`, the latest replacing the
    /// one before (the public schema's `feedback` kept every verdict under its
    /// timeuuid, so one user's repeats could grow a page without bound).
    pub FEEDBACK: Suggestions.user_feedback
        partition(wiki: Text, page_id: Int)
        clustering(filename: Text Asc, user_name: Text Asc)
        columns(
            id: Text, origin_wiki: Text, is_accepted: Boolean, is_rejected: Boolean,
            rejection_reasons: TextList
        )
}

table! {
    /// Title -> page id, per dataset: `((wiki, title), id)`.
    pub TITLE_CACHE: Suggestions.title_cache
        partition(wiki: Text, title: Text)
        clustering(id: Text Asc)
        columns(page_id: Int, page_rev: Int)
}

table! {
    /// Page id -> the Wikidata classes of its item, per dataset: `((wiki, page_id), id)`.
    pub INSTANCEOF_CACHE: Suggestions.instanceof_cache
        partition(wiki: Text, page_id: Int)
        clustering(id: Text Asc)
        columns(page_rev: Int, instance_of: TextList)
}

table! {
    /// The registry: every dataset of a wiki.
    pub DATASETS: Suggestions.datasets
        partition(wiki: Text)
        clustering(id: Text Asc)
        columns(
            state: Text, row_count: BigInt, bad_lines: BigInt, started: Text, finished: Text,
            heartbeat: Text, source: Text
        )
}

table! {
    /// The one row readers look at: which dataset of a wiki is current.
    pub CURRENT: Suggestions.current_dataset
        partition(wiki: Text)
        columns(id: Text, switched: Text)
}

table! {
    /// The keys a dataset wrote, bucketed: `kind` 0 = a page id (decimal), 1 = a title.
    pub DATASET_KEYS: Suggestions.dataset_keys
        partition(wiki: Text, id: Text, bucket: Int)
        clustering(kind: Int Asc, item: Text Asc)
}

/// Buckets of [`DATASET_KEYS`].
pub const KEY_BUCKETS: i32 = 16;

pub static TABLES: &[&Table] = &[
    &SUGGESTIONS,
    &FEEDBACK,
    &TITLE_CACHE,
    &INSTANCEOF_CACHE,
    &DATASETS,
    &CURRENT,
    &DATASET_KEYS,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, async_graphql::Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DatasetState {
    Importing,
    Complete,
    Failed,
    Purged,
}

impl DatasetState {
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetState::Importing => "IMPORTING",
            DatasetState::Complete => "COMPLETE",
            DatasetState::Failed => "FAILED",
            DatasetState::Purged => "PURGED",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "IMPORTING" => DatasetState::Importing,
            "COMPLETE" => DatasetState::Complete,
            "FAILED" => DatasetState::Failed,
            "PURGED" => DatasetState::Purged,
            _ => return None,
        })
    }
}

text_cell!(DatasetState);

record! {
    /// A dataset in the registry.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub struct Dataset in DATASETS (from_row -> Option) {
        pub wiki: String,
        pub id: String,
        pub state: DatasetState,
        pub rows: i64 = "row_count",
        pub bad_lines: i64,
        pub started: String,
        pub finished: Option<String>,
        pub heartbeat: Option<String>,
        pub source: Option<String>,
    }
}

record! {
    /// One suggested image for a page, as the public service's rows carry it.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub struct Suggestion in SUGGESTIONS {
        pub wiki: String,
        pub page_id: i32,
        /// The dataset (the public schema's `id`).
        pub id: String,
        pub image: String,
        pub origin_wiki: String,
        pub confidence: f64,
        pub found_on: Vec<String>,
        pub kind: Vec<String>,
        pub page_rev: Option<i32>,
        pub section_heading: Option<String>,
        pub section_index: Option<i32>,
        pub page_qid: Option<String>,
    }
}

record! {
    /// An editor's verdict on one image for one page.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub struct Feedback in FEEDBACK {
        pub wiki: String,
        pub page_id: i32,
        pub filename: String,
        pub id: String,
        pub origin_wiki: Option<String>,
        pub user_name: String,
        pub is_accepted: bool,
        pub is_rejected: bool,
        pub rejection_reasons: Vec<String>,
    }
}
