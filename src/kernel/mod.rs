//! The kernel, the bottom layer: what every other layer uses and none owns.
//! Ids and their bounds, the one clock, page sizes, running work a few at a
//! time (here); the API error (`error`), who calls and with which roles
//! (`roles`), the request limits (`limits`), the metrics, and the importers'
//! line reader and progress bar. It imports nothing of the crate.

pub mod chunked;
pub mod error;
pub mod limits;
pub mod metrics;
pub mod ndjson;
pub mod progress;
pub mod roles;
pub mod worker;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use error::{ApiError, ApiResult};

/// The longest id (of a category, keyword, portal, context, creator, ...).
pub const MAX_ID: usize = 200;

/// Refuses an id that is empty, too long, padded, or holds control characters.
pub fn check_id(what: &str, id: &str) -> ApiResult<()> {
    if id.trim().is_empty()
        || id.len() > MAX_ID
        || id.chars().any(char::is_control)
        || id != id.trim()
    {
        return Err(ApiError::bad_input(format!(
            "{what} id must be 1 to {MAX_ID} characters without surrounding spaces or control characters"
        )));
    }
    Ok(())
}

/// Whether a process with this id runs on this machine.
#[cfg(unix)]
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    #[allow(unsafe_code)]
    // SAFETY: signal 0 only asks whether the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether a process with this id runs on this machine (unknown here: no).
#[cfg(not(unix))]
pub fn process_alive(_pid: u32) -> bool {
    false
}

/// This machine's name (for records of who did what where).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// A random URL-safe id of `n` base62 characters (about 5.95 bits each).
pub fn random_id(n: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(n);
    while out.len() < n {
        let mut buf = [0u8; 32];
        getrandom::fill(&mut buf).expect("the OS has randomness");
        for b in buf {
            // 248 = 4 × 62: reject the rest so every character is equally likely.
            if b < 248 && out.len() < n {
                out.push(ALPHABET[(b % 62) as usize] as char);
            }
        }
    }
    out
}

/// Runs `f` over `items` with at most `n` at a time, keeping results in order.
pub async fn bounded<T, R, F, Fut>(items: Vec<T>, n: usize, f: F) -> Vec<R>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = R>,
{
    futures::stream::iter(items)
        .map(f)
        .buffered(n.max(1))
        .collect()
        .await
}

/// Default and largest `first` of a list or connection.
pub const DEFAULT_FIRST: i32 = 20;
pub const MAX_FIRST: i32 = 100;

/// Validates `first`: 1 to [`MAX_FIRST`], default [`DEFAULT_FIRST`].
pub fn page_size(first: Option<i32>) -> ApiResult<usize> {
    let n = first.unwrap_or(DEFAULT_FIRST);
    if !(1..=MAX_FIRST).contains(&n) {
        return Err(ApiError::bad_input(format!(
            "first must be between 1 and {MAX_FIRST}"
        )));
    }
    Ok(n as usize)
}

/// The one clock. Services hold one; tests may give them a clock of their own.
#[derive(Clone, Default)]
pub struct Clock {
    fixed: Option<Arc<dyn Fn() -> OffsetDateTime + Send + Sync>>,
}

impl Clock {
    /// The system's clock, in UTC.
    pub fn system() -> Self {
        Clock::default()
    }

    /// A clock that reads `now` (for tests of time-dependent rules).
    pub fn from_fn(now: impl Fn() -> OffsetDateTime + Send + Sync + 'static) -> Self {
        Clock {
            fixed: Some(Arc::new(now)),
        }
    }

    pub fn now(&self) -> OffsetDateTime {
        match &self.fixed {
            Some(f) => f(),
            None => OffsetDateTime::now_utc(),
        }
    }

    /// Now in RFC 3339 to the second (the timestamps users see on records).
    pub fn rfc3339(&self) -> String {
        format_time(self.now().replace_nanosecond(0).unwrap_or(self.now()))
    }

    /// Now in RFC 3339 to the nanosecond (sorts as text: logs, leases, tokens).
    pub fn precise(&self) -> String {
        format_time(self.now())
    }

    /// `d` from now, to the nanosecond.
    pub fn after(&self, d: Duration) -> String {
        format_time(self.now() + d)
    }
}

fn format_time(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// Reads an RFC 3339 time.
pub fn parse_time(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

/// The settings of every property test: 256 cases (the debug build's test
/// run stays short), and failing inputs are written into the tests as
/// explicit cases rather than into files.
#[cfg(test)]
pub(crate) fn proptest_config() -> proptest::prelude::ProptestConfig {
    proptest::prelude::ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_and_random_ids_are_base62() {
        assert!(check_id("x", "c-wr").is_ok());
        for bad in ["", " a", "a ", "a\nb", &"x".repeat(MAX_ID + 1)] {
            assert!(check_id("x", bad).is_err(), "{bad:?}");
        }
        let id = random_id(22);
        assert_eq!(id.len(), 22);
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn a_clock_can_be_set_and_formats_sort() {
        let t = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let clock = Clock::from_fn(move || t + Duration::from_nanos(1500));
        assert_eq!(clock.rfc3339(), "2023-11-14T22:13:20Z");
        assert_eq!(clock.precise(), "2023-11-14T22:13:20.0000015Z");
        assert!(clock.after(Duration::from_secs(1)) > clock.precise());
        assert_eq!(parse_time(&clock.precise()), Some(clock.now()));
    }

    proptest::proptest! {
        /// `first` comes from the client as any GraphQL Int.
        #[test]
        fn any_first_is_a_page_size_or_bad_input(first in proptest::option::of(proptest::prelude::any::<i32>())) {
            match page_size(first) {
                Ok(n) => proptest::prop_assert!(
                    (1..=MAX_FIRST as usize).contains(&n)
                        && first.is_none_or(|f| f as usize == n)
                ),
                Err(e) => {
                    proptest::prop_assert!(first.is_some_and(|f| !(1..=MAX_FIRST).contains(&f)));
                    proptest::prop_assert_eq!(e.code(), "BAD_USER_INPUT");
                }
            }
        }
    }

    #[test]
    fn page_sizes_are_one_to_a_hundred() {
        assert_eq!(page_size(None).unwrap(), 20);
        assert_eq!(page_size(Some(100)).unwrap(), 100);
        assert!(page_size(Some(0)).is_err());
        assert!(page_size(Some(101)).is_err());
    }
}
