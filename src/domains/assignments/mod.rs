//! The assignments domain: keywords assigned to catalogue objects within a
//! portal, the curation workflow, the release queue for the reindexer, the bulk
//! importer of machine suggestions, `repair-views`, and the change feed that
//! subscriptions read (`events`).

pub mod events;
pub mod import;
pub mod model;
pub mod repair;
pub mod service;

/// This domain's tables, for [`crate::domains::tables`].
pub static TABLES: &[&[&crate::store::Table]] =
    &[
        model::RELEASE_TABLES,
        model::TARGET_TABLES,
        events::TABLES,
        model::HISTORY_TABLES,
    ];
