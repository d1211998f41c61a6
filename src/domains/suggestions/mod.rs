//! Image suggestions (seed 003): per wiki, datasets of suggested images for
//! encyclopedia pages that replace each other at once, editors' feedback that
//! masks what they reviewed, lookups by page id, by title and for many pages.
//! Its GraphQL and the public service's read API are in `api`.

pub mod import;
pub mod model;
pub mod service;

/// This domain's tables, for [`crate::domains::tables`].
pub static TABLES: &[&[&crate::store::Table]] = &[model::TABLES];
