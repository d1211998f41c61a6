//! Catalogue objects: what curators see of an object beside its keywords
//! (title, holding institution, a link to its page on the portal, its image),
//! imported from the catalogue with `kartei import-objects`. The image URL of
//! an object is registered as a binary under the object's ddb id (the context
//! the queue and the object page read images from), so the crawler fetches it
//! like any other.

pub mod import;
pub mod model;
pub mod service;

/// This domain's tables, for [`crate::domains::tables`].
pub static TABLES: &[&[&crate::store::Table]] = &[model::TABLES];
