//! Jobs: every batch command (an import, a dataset switch, a maintenance
//! pass) as a record in the store while it runs and after it ended: what
//! it is, who started it, its input, how far it has read, its bad lines so
//! far and its result. The command line, a server a command handed its job
//! to, and `POST /jobs` all record through [`service::Jobs`]; admins and
//! editors read the records in GraphQL (`api::jobs`). A job whose process
//! died stays `RUNNING` in its row until a server starts and sweeps it to
//! `INTERRUPTED`; readers see it as interrupted as soon as its heartbeat is
//! stale, so it never reads as done.

pub mod model;
pub mod service;

/// This domain's tables, for [`crate::domains::tables`].
pub static TABLES: &[&[&crate::store::Table]] = &[model::TABLES];
