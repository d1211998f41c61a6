//! The crawler's HTTP client: a GET with the validators of an earlier
//! download, its body streamed within a deadline and a least rate, its
//! answer recorded as the links table keeps it, and every failure said to be
//! temporary or permanent. Connections go only to addresses the SSRF rules
//! permit (`address`); no proxy from the environment is used, since a proxy
//! would make the connection to an address we never checked.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH};

use super::address::{CheckedResolver, FetchPolicy, check_url};
use super::secrets::{kept_headers, strip_credentials, without_credentials};

/// Longest ETag, Last-Modified or Content-Type kept from a response.
const MAX_VALIDATOR_BYTES: usize = 256;

/// Why a fetch failed: permanently (4xx, refused, too large) or for now (5xx, timeout).
#[derive(Debug, Clone, PartialEq)]
pub enum FetchError {
    Permanent(String),
    Temporary(String),
}

impl FetchError {
    pub fn message(&self) -> &str {
        match self {
            FetchError::Permanent(m) | FetchError::Temporary(m) => m,
        }
    }
}

#[derive(Clone, Debug)]
pub struct FetchLimits {
    pub max_bytes: u64,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    /// The whole download, from the request to the last byte.
    pub total_timeout: Duration,
    /// Slowest average transfer rate accepted once [`RATE_GRACE`] has passed, bytes/s.
    pub min_rate: u64,
    pub max_redirects: usize,
}

/// How long a download may start slowly before its average rate is checked.
pub const RATE_GRACE: Duration = Duration::from_secs(10);

/// A response body being received, within the download's deadline and rate.
pub struct Download {
    /// Dropped (and its connection with it) once the body has ended or failed.
    response: Option<Box<reqwest::Response>>,
    started: tokio::time::Instant,
    deadline: tokio::time::Instant,
    total: Duration,
    min_rate: u64,
    received: u64,
    /// Read ahead ([`Download::read_ahead`]), handed out before the rest.
    ahead: Option<bytes::Bytes>,
    /// The end (or failure) met while reading ahead, handed out after it.
    ahead_end: Option<Result<(), FetchError>>,
    /// Dropped when the body has been read to its end or failed, or the
    /// download is dropped: what [`Download::finished`] waits for.
    done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Download {
    /// The next piece of the body; a temporary failure once the deadline has
    /// passed or the average rate stays below the minimum.
    pub async fn next_chunk(&mut self) -> Result<Option<bytes::Bytes>, FetchError> {
        if let Some(ahead) = self.ahead.take() {
            return Ok(Some(ahead));
        }
        if let Some(end) = self.ahead_end.take() {
            return end.map(|()| None);
        }
        let piece = self.receive().await;
        if !matches!(piece, Ok(Some(_))) {
            self.end();
        }
        piece
    }

    /// The body has ended or failed: the connection goes (back to the pool,
    /// or closed) before anyone waiting in [`Download::finished`] goes on.
    fn end(&mut self) {
        self.response = None;
        self.done = None;
    }

    /// Reads up to `limit` bytes (at least one piece) ahead into memory, so
    /// that a small body is off the connection before anyone consumes it;
    /// [`Download::next_chunk`] hands them out first, then the end, failure
    /// or rest. Returns whether the whole body has been read.
    pub async fn read_ahead(&mut self, limit: usize) -> bool {
        let mut ahead = bytes::BytesMut::new();
        loop {
            match self.receive().await {
                Ok(Some(piece)) => {
                    ahead.extend_from_slice(&piece);
                    if ahead.len() >= limit {
                        self.ahead = Some(ahead.freeze());
                        return false;
                    }
                }
                end => {
                    self.ahead = (!ahead.is_empty()).then(|| ahead.freeze());
                    self.ahead_end = Some(end.map(|_| ()));
                    self.end();
                    return true;
                }
            }
        }
    }

    /// Resolves once the body has been read to its end (or failed), or the
    /// download was dropped: when the connection is free for the next
    /// request to its site.
    pub fn finished(&mut self) -> impl std::future::Future<Output = ()> + use<> {
        debug_assert!(self.done.is_none(), "one waiter at a time");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        if self.response.is_some() {
            self.done = Some(tx);
        }
        async move {
            let _ = rx.await;
        }
    }

    async fn receive(&mut self) -> Result<Option<bytes::Bytes>, FetchError> {
        let Some(response) = self.response.as_mut() else {
            return Ok(None);
        };
        let piece = tokio::time::timeout_at(self.deadline, response.chunk())
            .await
            .map_err(|_| past_deadline(self.total))?
            .map_err(classify)?;
        if let Some(p) = &piece {
            self.received += p.len() as u64;
        }
        let elapsed = self.started.elapsed();
        if piece.is_some()
            && elapsed > RATE_GRACE
            && (self.received as f64) < self.min_rate as f64 * elapsed.as_secs_f64()
        {
            return Err(FetchError::Temporary(format!(
                "the server sends slower than {} bytes/s ({} bytes in {:.0} s)",
                self.min_rate,
                self.received,
                elapsed.as_secs_f64()
            )));
        }
        Ok(piece)
    }
}

fn past_deadline(total: Duration) -> FetchError {
    FetchError::Temporary(format!(
        "the download took longer than {} s",
        total.as_secs()
    ))
}

/// Validators from an earlier download, for a conditional re-check.
#[derive(Clone, Debug, Default)]
pub struct Validators {
    pub e_tag: Option<String>,
    pub last_modified: Option<String>,
}

// One per request, moved once or twice: boxing the body would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Fetched {
    /// 304: the content has not changed.
    NotModified { response: Response },
    /// 2xx: the body follows.
    Body {
        body: Download,
        mime: Option<String>,
        validators: Validators,
        response: Response,
    },
    /// Any other status (4xx, 5xx, 429), with the delay the server asked for.
    Refused {
        response: Response,
        retry_after: Option<Duration>,
    },
}

/// What the crawler records of every answer (the links row).
#[derive(Clone, Debug, Default)]
pub struct Response {
    pub status: u16,
    /// The URL that answered, when redirects led elsewhere.
    pub redirected_to: Option<String>,
    /// The response headers, `name: value`, at most [`super::MAX_HEADERS`] of them
    /// and [`super::MAX_HEADER_BYTES`] in all.
    pub headers: Vec<String>,
}

impl Fetched {
    pub fn response(&self) -> &Response {
        match self {
            Fetched::NotModified { response }
            | Fetched::Body { response, .. }
            | Fetched::Refused { response, .. } => response,
        }
    }
}

/// A `Retry-After` value: seconds, or an HTTP date (RFC 9110 10.2.3).
pub fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[derive(Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    policy: Arc<FetchPolicy>,
    pub limits: FetchLimits,
}

impl Fetcher {
    pub fn new(policy: FetchPolicy, limits: FetchLimits) -> anyhow::Result<Fetcher> {
        let policy = Arc::new(policy);
        let redirect_policy = {
            let policy = policy.clone();
            let max = limits.max_redirects;
            reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= max {
                    return attempt.error(format!("more than {max} redirects"));
                }
                match check_url(&policy, attempt.url().as_str()) {
                    Ok(_) => attempt.follow(),
                    Err(e) => attempt.error(format!("redirect refused: {e}")),
                }
            })
        };
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(Arc::new(CheckedResolver(policy.clone())))
            .redirect(redirect_policy)
            .connect_timeout(limits.connect_timeout)
            .read_timeout(limits.read_timeout)
            .user_agent(concat!("kartei/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Fetcher {
            client,
            policy,
            limits,
        })
    }

    pub fn policy(&self) -> &FetchPolicy {
        &self.policy
    }

    /// Starts a GET; the caller streams the body with [`Download::next_chunk`].
    pub async fn get(&self, url: &str, validators: &Validators) -> Result<Fetched, FetchError> {
        let started = tokio::time::Instant::now();
        let deadline = started + self.limits.total_timeout;
        let mut parsed = check_url(&self.policy, url).map_err(FetchError::Permanent)?;
        // reqwest would send a URL's credentials as basic auth; registration
        // strips them, and a URL stored before that never sends them either.
        strip_credentials(&mut parsed);
        let mut headers = HeaderMap::new();
        if let Some(e) = validators.e_tag.as_deref().and_then(|v| v.parse().ok()) {
            headers.insert(IF_NONE_MATCH, e);
        }
        if let Some(m) = validators
            .last_modified
            .as_deref()
            .and_then(|v| v.parse().ok())
        {
            headers.insert(IF_MODIFIED_SINCE, m);
        }
        let parsed_for_compare = parsed.clone();
        let response = self.client.get(parsed).headers(headers).send();
        let response = tokio::time::timeout_at(deadline, response)
            .await
            .map_err(|_| past_deadline(self.limits.total_timeout))?
            .map_err(classify)?;
        let status = response.status();
        let recorded = Response {
            status: status.as_u16(),
            // A redirect's target comes from the site, credentials and all.
            redirected_to: (response.url() != &parsed_for_compare)
                .then(|| without_credentials(response.url())),
            headers: kept_headers(response.headers()),
        };
        if status == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(Fetched::NotModified { response: recorded });
        }
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after(v, std::time::SystemTime::now()));
            return Ok(Fetched::Refused {
                response: recorded,
                retry_after,
            });
        }
        if let Some(len) = response.content_length()
            && len > self.limits.max_bytes
        {
            return Err(FetchError::Permanent(format!(
                "{len} bytes is more than the limit of {} bytes",
                self.limits.max_bytes
            )));
        }
        let header = |name: reqwest::header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        // Each is stored with the link and sent back on a re-crawl: a value
        // longer than any real one (a 300 KB ETag) is dropped, not kept.
        let header = |name| header(name).filter(|v| v.len() <= MAX_VALIDATOR_BYTES);
        let mime = header(reqwest::header::CONTENT_TYPE)
            .map(|m| m.split(';').next().unwrap_or_default().trim().to_owned());
        let validators = Validators {
            e_tag: header(reqwest::header::ETAG),
            last_modified: header(reqwest::header::LAST_MODIFIED),
        };
        Ok(Fetched::Body {
            body: Download {
                response: Some(Box::new(response)),
                started,
                deadline,
                total: self.limits.total_timeout,
                min_rate: self.limits.min_rate,
                received: 0,
                ahead: None,
                ahead_end: None,
                done: None,
            },
            mime,
            validators,
            response: recorded,
        })
    }

    /// A small body in full (robots.txt), at most `max` bytes (the rest is cut).
    pub async fn small(&self, url: &str, max: usize) -> Result<(u16, Vec<u8>), FetchError> {
        match self.get(url, &Validators::default()).await? {
            Fetched::Body {
                mut body, response, ..
            } => {
                let mut out = Vec::new();
                while let Some(piece) = body.next_chunk().await? {
                    let room = max.saturating_sub(out.len());
                    out.extend_from_slice(&piece[..piece.len().min(room)]);
                    if out.len() >= max {
                        break;
                    }
                }
                Ok((response.status, out))
            }
            other => Ok((other.response().status, Vec::new())),
        }
    }
}

fn classify(mut e: reqwest::Error) -> FetchError {
    // The error's text names its URL (a redirect's, credentials and all), and
    // it is stored as the fetch's error.
    if let Some(url) = e.url_mut() {
        strip_credentials(url);
    }
    // The resolver's and the redirect policy's refusals are permanent.
    let text = error_chain(&e);
    if text.contains("refused addresses") || text.contains("redirect refused") {
        return FetchError::Permanent(text);
    }
    if e.is_redirect() {
        return FetchError::Permanent(text);
    }
    if e.is_timeout() || e.is_connect() || e.is_request() || e.is_body() {
        return FetchError::Temporary(text);
    }
    FetchError::Permanent(text)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(retry_after(&later, now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(retry_after("soon", now), None);
    }
}
