//! The themes domain: categories (portals at the top), keywords, keyword
//! search, GND entity types, and the vocabulary importer.

pub mod import;
pub mod model;
pub mod search;
pub mod skos;
pub mod service;

/// This domain's tables, for [`crate::domains::tables`].
pub static TABLES: &[&[&crate::store::Table]] = &[model::TABLES];
