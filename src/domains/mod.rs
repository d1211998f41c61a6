//! The domains: each one's tables, rows, rules and service, its importers and
//! its background work. A domain talks to the `store` and uses the `kernel`;
//! it never sees GraphQL or HTTP (`api`, `edge`). A domain may use another's
//! service only where the list below allows it (a test keeps it so):
//! assignments -> themes (the vocabulary a suggestion names), binaries -> web
//! (the safe fetcher), crawl -> binaries and web (it fetches their bodies).

pub mod assignments;
pub mod binaries;
pub mod crawl;
pub mod suggestions;
pub mod themes;
pub mod web;
