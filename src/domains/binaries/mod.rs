//! The binaries domain (seed 001): originals fetched from URLs or uploaded,
//! stored in chunks and deduplicated by content, four scaled JPEGs, references
//! grouped by context, logs, and the collector of unreferenced originals.

pub mod iiif;
pub mod imaging;
pub mod model;
pub mod render_budget;
pub mod service;

/// This domain's tables, for [`crate::domains::tables`].
pub static TABLES: &[&[&crate::store::Table]] = &[model::TABLES];
