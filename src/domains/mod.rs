//! The domains: each one's tables, rows, rules and service, its importers and
//! its background work. A domain talks to the `store` and uses the `kernel`;
//! it never sees GraphQL or HTTP (`api`, `edge`). A domain may use another's
//! service only where the list below allows it (a test keeps it so):
//! assignments -> themes (the vocabulary a suggestion names), binaries -> web
//! (the safe fetcher), crawl -> binaries and web (it fetches their bodies),
//! objects -> binaries (an object's image is registered as a binary).

/// Every domain, once: its module, and its `TABLES` in [`tables`]. A new
/// domain is one more name here (themes first: the server probes its first
/// table to know the store answers).
macro_rules! domains {
    ($($name:ident),* $(,)?) => {
        $(pub mod $name;)*

        /// Every declared table, for schema checks and maintenance.
        pub fn tables() -> Vec<&'static crate::store::Table> {
            [$($name::TABLES),*].concat().concat()
        }
    };
}

domains! {
    themes,
    assignments,
    binaries,
    suggestions,
    crawl,
    web,
    jobs,
    objects,
}
