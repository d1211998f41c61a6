//! What a fetch's result does: the binary behind the link is told (its body,
//! a 304, or a failure, temporary or not), the link's history gains a row,
//! its state keeps the new validators, and it stays wanted while a binary
//! still waits for it.

use std::time::Duration;

use time::OffsetDateTime;

use super::model::*;
use super::service::Crawl;
use crate::domains::binaries::service::Arrival;
use crate::domains::web::{FetchError, Fetched, Response, Validators};
use crate::kernel::error::ApiResult;
use crate::kernel::parse_time;
use crate::store::{Mutation, Row, Value};

/// A fetch's result, ready to record.
pub(super) struct Outcome {
    arrival: Arrival,
    pub(super) response: Option<Response>,
    robots_excluded: bool,
    mime: Option<String>,
}

/// Whether an answer's status says "not now" (the link is retried later,
/// and the site's Retry-After honoured) rather than "never".
fn temporary_status(status: u16) -> bool {
    status == 429 || status >= 500 || status == 408
}

impl Outcome {
    pub(super) fn failed(e: FetchError) -> Self {
        Outcome {
            arrival: Arrival::Failed(e),
            response: None,
            robots_excluded: false,
            mime: None,
        }
    }

    pub(super) fn robots(site: &str) -> Self {
        Outcome {
            robots_excluded: true,
            ..Outcome::failed(FetchError::Permanent(format!(
                "the robots.txt of {site} does not allow {} to fetch it",
                super::robots::AGENT
            )))
        }
    }

    /// Reads a body off the connection now, up to one chunk (see
    /// `Download::read_ahead`); for a larger one, returns what resolves once
    /// the rest has been read (while it is recorded).
    pub(super) async fn read_ahead(&mut self) -> Option<impl Future<Output = ()> + use<>> {
        match &mut self.arrival {
            Arrival::Body { body, .. } => {
                (!body.read_ahead(crate::domains::binaries::service::CHUNK).await)
                    .then(|| body.finished())
            }
            _ => None,
        }
    }

    /// The outcome of a request, and how long the site asked us to wait.
    pub(super) fn of(got: Result<Fetched, FetchError>) -> (Outcome, Option<Duration>) {
        match got {
            Err(e) => (Outcome::failed(e), None),
            Ok(Fetched::NotModified { response }) => (
                Outcome {
                    arrival: Arrival::NotModified,
                    response: Some(response),
                    robots_excluded: false,
                    mime: None,
                },
                None,
            ),
            Ok(Fetched::Body {
                body,
                mime,
                validators,
                response,
            }) => (
                Outcome {
                    mime: mime.clone(),
                    arrival: Arrival::Body {
                        body,
                        mime,
                        validators,
                    },
                    response: Some(response),
                    robots_excluded: false,
                },
                None,
            ),
            Ok(Fetched::Refused {
                response,
                retry_after,
            }) => {
                let status = response.status;
                let text = format!("the server answered {status}");
                let temporary = temporary_status(status);
                let e = if temporary {
                    FetchError::Temporary(text)
                } else {
                    FetchError::Permanent(text)
                };
                (
                    Outcome {
                        response: Some(response),
                        ..Outcome::failed(e)
                    },
                    retry_after.filter(|_| temporary),
                )
            }
        }
    }
}

/// How long a fetch's record books beyond the slot after next: the next
/// request may go out this much later than reckoned (the loop's own work)
/// and still find its slot booked (see `Crawl::wait_turn`).
pub(super) const BOOKING_SLACK: Duration = Duration::from_millis(100);

/// The spacing of a domain's requests, for the record of a fetch that the
/// next request follows: the record books that request's slot with the
/// fetch's rows, so that request needs no booking of its own.
pub(super) struct Pace<'a> {
    pub domain: &'a str,
    /// The earliest the next request may go out anyway (a Retry-After).
    pub next_at: OffsetDateTime,
    pub delay: Duration,
}

impl Pace<'_> {
    /// When the next request may go out, the fetch having ended at `now`,
    /// and the slot booked for the one after it.
    fn after(&self, now: OffsetDateTime) -> (OffsetDateTime, OffsetDateTime) {
        let next = spaced(self.next_at, now, self.delay);
        (next, next + self.delay + BOOKING_SLACK)
    }
}

/// When a domain's next request may go out, its last having ended at `now`:
/// `delay` later, or at `next_at` if that is later still (a Retry-After).
pub(super) fn spaced(next_at: OffsetDateTime, now: OffsetDateTime, delay: Duration) -> OffsetDateTime {
    next_at.max(now + delay)
}

/// The key of a segment row (to remove it once its link is recorded).
pub(super) fn segment_key(row: &Row) -> Vec<Value> {
    ["dom", "subdom", "path", "proto"]
        .iter()
        .map(|c| row.get(c).cloned().unwrap_or(Value::Text(String::new())))
        .collect()
}

/// What one fetch of a link is recorded as, once the binaries domain has
/// taken its answer.
struct Recorded<'a> {
    time: &'a str,
    response: Option<&'a Response>,
    error: Option<String>,
    robots_excluded: bool,
    mime: Option<String>,
    /// The content's hash, when a body was stored.
    content_hash: Option<i64>,
    /// The validators of a new body (none: keep the stored ones; a 304).
    validators: Option<Validators>,
    /// A binary still waits for a body from this URL.
    retry: bool,
}

impl Recorded<'_> {
    /// The link's history row of this fetch.
    fn history(&self, link: &LinkKey) -> Row {
        let history = link
            .row(&LINKS)
            .set("time", self.time)
            .set("getnow", false)
            .set_opt("stat", self.response.map(|r| i32::from(r.status)))
            .set_opt("err", self.error.clone())
            .set_opt(
                "redto_url",
                self.response.and_then(|r| r.redirected_to.clone()),
            )
            .set_opt("mime", self.mime.clone())
            .set_opt("fnv", self.content_hash)
            .set(
                "headers",
                Value::TextList(self.response.map(|r| r.headers.clone()).unwrap_or_default()),
            );
        if self.robots_excluded {
            history.set("robot_ex", true)
        } else {
            history
        }
    }

    /// The link's state after this fetch, given the one stored before.
    fn state(&self, link: &LinkKey, old: Option<&Row>) -> Row {
        let keep = |c: &str| old.and_then(|r| r.get(c).cloned());
        // A new answer's validators, else the ones stored (a 304 keeps them).
        let (e_tag, last_modified) = match &self.validators {
            Some(v) => (
                v.e_tag.clone().map(Value::Text),
                v.last_modified.clone().map(Value::Text),
            ),
            None => (keep("e_tag"), keep("last_modified")),
        };
        link.row(&LINK_STATE)
            .set("last_time", self.time)
            .set("getnow", self.retry)
            .set_opt("stat", self.response.map(|r| i32::from(r.status)))
            .set_opt(
                "fnv",
                self.content_hash.map(Value::BigInt).or_else(|| keep("fnv")),
            )
            .set_opt("e_tag", e_tag)
            .set_opt("last_modified", last_modified)
    }
}

impl Crawl {
    /// Hands the answer to the binaries domain and records the fetch: a
    /// links row, the link's state, its getnow row (kept, with the due time,
    /// for a RETRY), the segment row gone and, with a `pace`, the domain's
    /// slot after next booked, in one batch. Returns, with a `pace`, when
    /// the next request may go out and the slot booked.
    pub(super) async fn record(
        &self,
        link: &LinkKey,
        segment_row: &Row,
        outcome: Outcome,
        pace: Option<Pace<'_>>,
    ) -> ApiResult<Option<(OffsetDateTime, OffsetDateTime)>> {
        let time = self.now();
        let Outcome {
            arrival,
            response,
            robots_excluded,
            mime,
        } = outcome;
        let error = match &arrival {
            Arrival::Failed(e) => Some(e.message().to_owned()),
            _ => None,
        };
        let validators = match &arrival {
            Arrival::Body { validators, .. } => Some(validators.clone()),
            _ => None,
        };
        let settled = self.inner.binaries.link_fetched(&link.url, arrival).await?;
        // The body has been read: the spacing counts from now.
        let paced = pace.map(|p| (p.domain, p.after(self.inner.clock.now())));
        let recorded = Recorded {
            time: &time,
            response: response.as_ref(),
            error,
            robots_excluded,
            mime,
            content_hash: settled.checksum.as_deref().and_then(fingerprint),
            validators,
            // Kept wanted while a binary still waits for this URL's body: a
            // RETRY when it is due, or a new original now.
            retry: settled.waiting,
        };
        // The stored state is read only for what this answer does not
        // replace (a body brings both validators and a content hash).
        let old = if recorded.validators.is_some() && recorded.content_hash.is_some() {
            None
        } else {
            self.store().get(&LINK_STATE, &link.bucketed()).await?
        };
        let mut batch = vec![
            Mutation::upsert(recorded.history(link)),
            Mutation::upsert(recorded.state(link, old.as_ref())),
            Mutation::delete(&SEGMENTS, segment_key(segment_row)),
        ];
        if recorded.retry {
            let due = settled
                .retry_at
                .as_deref()
                .and_then(parse_time)
                .map(fixed_time)
                .unwrap_or_else(|| self.now());
            batch.push(Mutation::upsert(link.row(&GETNOW).set("due", due)));
        } else {
            batch.push(Mutation::delete(&GETNOW, link.bucketed()));
        }
        if let Some((domain, (_, slot))) = paced {
            batch.push(next_crawl_row(domain, slot));
        }
        self.store().apply(batch).await?;
        // A registration that gave the URL a new original after
        // `link_fetched` looked found the link still wanted and wrote nothing;
        // the batch above has just cleared that want. Looked at again after
        // the batch, such an original is always seen (it was made before its
        // want was skipped), and a want made from now on sees the cleared flag.
        if !recorded.retry && self
                .inner
                .binaries
                .url_waits(&link.url, settled.ok_original.as_deref())
                .await? {
            self.inner.links.want_now(&link.url).await?;
        }
        Ok(paced.map(|(_, times)| times))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, retry_after: Option<Duration>) -> Result<Fetched, FetchError> {
        Ok(Fetched::Refused {
            response: Response {
                status,
                ..Response::default()
            },
            retry_after,
        })
    }

    fn link() -> LinkKey {
        LinkKey::of("https://example.org/a.jpg").unwrap()
    }

    #[test]
    fn a_record_books_the_slot_after_next_with_room_for_the_loop() {
        let t0 = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let second = Duration::from_secs(1);
        let pace = Pace {
            domain: "example.org",
            next_at: t0,
            delay: second,
        };
        let (next, slot) = pace.after(t0 + second);
        assert_eq!(next, t0 + 2 * second, "the delay counts from the fetch's end");
        assert_eq!(slot, next + second + BOOKING_SLACK);
        let waiting = Pace {
            next_at: t0 + 60 * second,
            ..pace
        };
        assert_eq!(waiting.after(t0).0, t0 + 60 * second, "a Retry-After holds");
    }

    #[test]
    fn busy_and_failing_servers_are_asked_again_and_their_retry_after_honoured() {
        let minute = Some(Duration::from_secs(60));
        for status in [429, 500, 503, 408] {
            let (o, wait) = Outcome::of(refused(status, minute));
            assert!(
                matches!(o.arrival, Arrival::Failed(FetchError::Temporary(_))),
                "{status}"
            );
            assert_eq!(wait, minute, "{status}");
            assert_eq!(o.response.map(|r| r.status), Some(status));
        }
        for status in [404, 403, 410] {
            let (o, wait) = Outcome::of(refused(status, minute));
            let Arrival::Failed(FetchError::Permanent(text)) = o.arrival else {
                panic!("{status} is for good");
            };
            assert_eq!(text, format!("the server answered {status}"));
            assert_eq!(wait, None, "{status}: no waiting for a refusal");
        }
        let (o, wait) = Outcome::of(Err(FetchError::Temporary("timeout".into())));
        assert!(o.response.is_none() && wait.is_none());
        let (o, _) = Outcome::of(Ok(Fetched::NotModified {
            response: Response {
                status: 304,
                ..Response::default()
            },
        }));
        assert!(matches!(o.arrival, Arrival::NotModified));
    }

    #[test]
    fn a_robots_exclusion_is_a_permanent_failure_that_says_so() {
        let o = Outcome::robots("https://example.org");
        assert!(o.robots_excluded);
        let Arrival::Failed(FetchError::Permanent(text)) = &o.arrival else {
            panic!("permanent");
        };
        assert!(text.contains("robots.txt of https://example.org"), "{text}");
        let recorded = Recorded {
            time: "t",
            response: None,
            error: Some(text.clone()),
            robots_excluded: true,
            mime: None,
            content_hash: None,
            validators: None,
            retry: false,
        };
        let row = recorded.history(&link());
        assert_eq!(row.boolean("robot_ex"), Some(true));
        assert_eq!(row.text("err"), Some(text.as_str()));
        assert_eq!(row.int("stat"), None);
    }

    #[test]
    fn a_not_modified_answer_keeps_the_stored_validators_and_hash() {
        let old = link()
            .row(&LINK_STATE)
            .set("e_tag", "\"v1\"")
            .set("last_modified", "Mon, 01 Jan 2024 00:00:00 GMT")
            .set("fnv", 9i64);
        let response = Response {
            status: 304,
            ..Response::default()
        };
        let not_modified = Recorded {
            time: "t",
            response: Some(&response),
            error: None,
            robots_excluded: false,
            mime: None,
            content_hash: None,
            validators: None,
            retry: false,
        };
        let state = not_modified.state(&link(), Some(&old));
        assert_eq!(state.text("e_tag"), Some("\"v1\""));
        assert_eq!(state.text("last_modified"), old.text("last_modified"));
        assert_eq!(state.bigint("fnv"), Some(9));
        assert_eq!(state.int("stat"), Some(304));
        assert_eq!(state.boolean("getnow"), Some(false));
        let history = not_modified.history(&link());
        assert_eq!(
            history.boolean("robot_ex"),
            None,
            "only an exclusion is marked"
        );
        let new_body = Recorded {
            content_hash: Some(10),
            validators: Some(Validators {
                e_tag: Some("\"v2\"".into()),
                last_modified: None,
            }),
            retry: true,
            ..not_modified
        };
        let state = new_body.state(&link(), Some(&old));
        assert_eq!(state.text("e_tag"), Some("\"v2\""));
        assert_eq!(state.text("last_modified"), None, "the new answer had none");
        assert_eq!(state.bigint("fnv"), Some(10));
        assert_eq!(state.boolean("getnow"), Some(true), "a binary still waits");
    }

    #[test]
    fn a_segment_rows_key_is_its_link() {
        let key = link();
        let row = Row::new(&SEGMENTS)
            .set("dom", &key.dom)
            .set("subdom", &key.subdom)
            .set("path", &key.path)
            .set("proto", &key.proto);
        let mut expected = key.bucketed();
        expected.remove(1);
        assert_eq!(segment_key(&row), expected);
    }
}
