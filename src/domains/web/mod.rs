//! Fetching from the web without becoming a proxy into our own network
//! (SSRF): the addresses a fetch may reach (`address`), what it never keeps
//! (`secrets`), and the HTTP client built on both (`client`). Every address
//! a connection may use comes from our own resolver, which drops internal
//! addresses unless an allow-listed CIDR covers them; IP-literal URLs (which
//! skip the resolver) are checked directly, on the first request and on
//! every redirect.

mod address;
mod client;
mod secrets;

pub use address::{Cidr, FetchPolicy, check_host_now, check_url, is_internal};
pub use client::{
    Download, FetchError, FetchLimits, Fetched, Fetcher, RATE_GRACE, Response, Validators,
    retry_after,
};
pub use secrets::{MAX_HEADER_BYTES, MAX_HEADERS, is_secret_header, strip_credentials};

/// The fetcher keeps nothing in the store.
pub static TABLES: &[&[&crate::store::Table]] = &[];
