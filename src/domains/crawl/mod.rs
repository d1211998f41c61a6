//! The crawl frontier (seed 004, walker): how binaries' URLs are fetched.
//! Links with their fetch history, segments of up to 500 links per domain
//! built by a dispatcher, fetchers that claim a domain by compare-and-set,
//! announce themselves with a TTL, honour robots.txt and a delay per domain,
//! and hand each body to the binaries domain ([`crate::domains::binaries::service::Binaries::link_fetched`]).
//! Every `kartei serve` instance runs a dispatcher and fetchers; they share
//! nothing but the store.
//!
//! Where each part lives: `model` the tables and a link's key, `state` a
//! domain's states and their compare-and-set moves, `links` wanting a link
//! and reading its history, `dispatch` building segments, `claims` claims
//! and heartbeats, `fetcher` the fetch loop and its politeness, `pipeline`
//! records written beside the next requests, `robots` robots.txt,
//! `outcomes` what a fetch's result records, `admin` the
//! operators' reads and levers, `service` the handle and its loops.

mod admin;
mod claims;
pub mod dispatch;
mod fetcher;
pub mod links;
pub mod model;
mod outcomes;
mod pipeline;
pub mod robots;
pub mod service;
mod state;

/// This domain's tables, for [`crate::domains::tables`].
pub static TABLES: &[&[&crate::store::Table]] = &[model::TABLES];
