//! The crawl frontier (seed 004, walker): how binaries' URLs are fetched.
//! Links with their fetch history, segments of up to 500 links per domain
//! built by a dispatcher, fetchers that claim a domain by compare-and-set,
//! announce themselves with a TTL, honour robots.txt and a delay per domain,
//! and hand each body to the binaries domain ([`crate::domains::binaries::service::Binaries::link_fetched`]).
//! Every `kartei serve` instance runs a dispatcher and fetchers; they share
//! nothing but the store.

pub mod model;
pub mod robots;
pub mod service;
