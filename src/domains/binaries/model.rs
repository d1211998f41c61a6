//! The binaries tables (seed 001 with the changes cql/README.md lists):
//! references grouped by context, originals (one per distinct URL or upload,
//! deduplicated by content checksum), their chunks, the four scaled JPEGs,
//! per-reference logs, and the work queue of originals still to process.

use crate::store::ColumnType::{BigInt, Blob, Int, Text};
use crate::store::{Keyspace, Row, Table, col};
use crate::store::{record, table, text_cell};

table! {
    pub BINARY_REFS: Binaries.binary_refs
        partition(reference_id: Text)
        columns(original_id: Text, context: Text, created: Text)
}

table! {
    /// Query table (was the view binaryrefs_context): the references of a context.
    pub BINARY_REFS_CONTEXT: Binaries.binaryrefs_context
        partition(context: Text)
        clustering(reference_id: Text Asc)
        columns(original_id: Text)
}

table! {
    /// Query table (was the view binaryrefs_original): who references an original.
    pub BINARY_REFS_ORIGINAL: Binaries.binaryrefs_original
        partition(original_id: Text)
        clustering(reference_id: Text Asc)
        columns(context: Text)
}

table! {
    pub ORIGINALS: Binaries.originals
        partition(original_id: Text)
        columns = &[
        col("last_modified", Text),
        col("e_tag", Text),
        col("mime", Text),
        col("created", Text),
        col("last_checked", Text),
        col("checksum", Text),
        col("status", Text),
        // Not in the seed: what serving and processing need.
        col("url", Text),
        col("size", BigInt),
        col("parts", Int),
        col("width", Int),
        col("height", Int),
        col("attempts", Int),
        col("next_attempt", Text),
        col("error", Text),
        col("touched", Text),
    ]
}

table! {
    pub URLS: Binaries.urls
        partition(url: Text)
        columns(original_id: Text)
}

table! {
    /// Query table (was the view urls_original).
    pub URLS_ORIGINAL: Binaries.urls_original
        partition(original_id: Text)
        clustering(url: Text Asc)
}

table! {
    /// One chunk (≤ 1 MiB) per partition: the seed's `(original_id, part)` key
    /// with both columns in the partition key, so no partition holds a whole file.
    pub ORIGINALS_DATA: Binaries.originals_data
        partition(original_id: Text, part: Int)
        columns(data: Blob)
}

table! {
    /// Content checksum (sha256, hex) -> the original holding those bytes.
    pub ORIGINALS_CHECKSUM: Binaries.originals_checksum
        partition(checksum: Text)
        columns(original_id: Text)
}

table! {
    pub LOGS: Binaries.logs
        partition(reference_id: Text)
        clustering(timestamp: Text Asc)
        columns(message: Text)
}

table! {
    /// Originals waiting for work (download, derivatives, collection), bucketed by
    /// a hash of the id; every instance's worker reads it and claims with an LWT.
    pub PENDING_ORIGINALS: Binaries.pending_originals
        partition(bucket: Int)
        clustering(original_id: Text Asc)
        columns(due: Text)
}

table! {
    /// The deep-zoom pyramid of an original: JPEG tiles of `TILE` pixels
    /// at each scale factor (1, 2, 4, ...), one partition per scale (the
    /// largest, scale 1 of a 10,000-pixel square, holds 400 tiles of some
    /// 50 KiB).
    pub TILES: Binaries.tiles
        partition(original_id: Text, scale: Int)
        clustering(col: Int Asc, row: Int Asc)
        columns(data: Blob)
}

table! {
    /// An original whose pyramid is complete: written after its last tile.
    pub TILE_PYRAMIDS: Binaries.tile_pyramids
        partition(original_id: Text)
        columns(tile: Int, scales: Int, built: Text)
}

macro_rules! scaled {
    ($name:ident, $table:literal) => {
        pub static $name: Table = Table {
            keyspace: Keyspace::Binaries,
            name: $table,
            partition_key: &[col("original_id", Text)],
            clustering: &[],
            columns: &[col("data", Blob)],
        };
    };
}
scaled!(SCALED_800X600, "scaled_800x600");
scaled!(SCALED_440X330, "scaled_440x330");
scaled!(SCALED_140X105, "scaled_140x105");
scaled!(SCALED_116X87, "scaled_116x87");

/// The derivative boxes of seed 001, largest first, with their tables.
pub static DERIVATIVES: [(u32, u32, &Table); 4] = [
    (800, 600, &SCALED_800X600),
    (440, 330, &SCALED_440X330),
    (140, 105, &SCALED_140X105),
    (116, 87, &SCALED_116X87),
];

pub static TABLES: &[&Table] = &[
    &BINARY_REFS,
    &BINARY_REFS_CONTEXT,
    &BINARY_REFS_ORIGINAL,
    &ORIGINALS,
    &URLS,
    &URLS_ORIGINAL,
    &ORIGINALS_DATA,
    &ORIGINALS_CHECKSUM,
    &LOGS,
    &PENDING_ORIGINALS,
    &SCALED_800X600,
    &SCALED_440X330,
    &SCALED_140X105,
    &SCALED_116X87,
    &TILES,
    &TILE_PYRAMIDS,
];

/// Where an original is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, async_graphql::Enum)]
pub enum BinaryStatus {
    /// Being downloaded, received or scaled.
    Processing,
    Ok,
    /// Permanently failed (4xx, not an image, too large, corrupt).
    Error,
    /// Failed for now (5xx, timeout); tried again later.
    Retry,
    /// Nobody references it; the collector is removing it.
    Deleting,
}

impl BinaryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryStatus::Processing => "PROCESSING",
            BinaryStatus::Ok => "OK",
            BinaryStatus::Error => "ERROR",
            BinaryStatus::Retry => "RETRY",
            BinaryStatus::Deleting => "DELETING",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            BinaryStatus::Processing,
            BinaryStatus::Ok,
            BinaryStatus::Error,
            BinaryStatus::Retry,
            BinaryStatus::Deleting,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

text_cell!(BinaryStatus);

record! {
    /// An original as stored.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Original in ORIGINALS {
        pub id: String = "original_id",
        pub status: Option<BinaryStatus>,
        pub url: Option<String>,
        pub mime: Option<String>,
        pub size: Option<i64>,
        pub parts: Option<i32>,
        pub checksum: Option<String>,
        pub width: Option<i32>,
        pub height: Option<i32>,
        pub created: Option<String>,
        pub last_checked: Option<String>,
        pub last_modified: Option<String>,
        pub e_tag: Option<String>,
        pub attempts: i32,
        pub next_attempt: Option<String>,
        pub error: Option<String>,
        pub touched: Option<String>,
    }
}

record! {
    /// A reference as stored (its row in `binary_refs`).
    #[derive(Clone, Debug, PartialEq)]
    pub struct Reference in BINARY_REFS {
        pub id: String = "reference_id",
        pub original_id: String,
        pub context: String,
        pub created: String,
    }
}

impl Reference {
    /// The reference's base row and its two query rows.
    pub fn rows(&self) -> [Row; 3] {
        [
            self.to_row(),
            Row::new(&BINARY_REFS_CONTEXT)
                .set("context", &self.context)
                .set("reference_id", &self.id)
                .set("original_id", &self.original_id),
            Row::new(&BINARY_REFS_ORIGINAL)
                .set("original_id", &self.original_id)
                .set("reference_id", &self.id)
                .set("context", &self.context),
        ]
    }
}
