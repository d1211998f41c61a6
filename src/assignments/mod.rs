//! The assignments domain: keywords assigned to catalogue objects within a
//! portal, the curation workflow, the release queue for the reindexer, the bulk
//! importer of machine suggestions, and `repair-views`.

pub mod graphql;
pub mod import;
pub mod model;
pub mod repair;
pub mod service;
