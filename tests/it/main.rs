//! The one integration-test binary. Every store-facing test runs against the
//! embedded engine and against a real Cassandra node (KARTEI_TEST_CASSANDRA).

mod support;

mod assignments;
mod auth;
mod binaries;
mod cli;
mod cluster;
mod crawl;
mod engine;
mod faults;
mod hostile;
mod http;
mod layers;
mod live;
mod objects;
mod suggestions;
mod themes;
