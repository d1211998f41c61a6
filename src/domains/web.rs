//! The crawler's HTTP client: fetching from the web without becoming a proxy into our own
//! network (SSRF). Every address a connection may use comes from our own
//! resolver, which drops loopback, private, link-local, multicast and
//! unspecified addresses unless an allow-listed CIDR covers them; IP-literal
//! URLs (which skip the resolver) are checked directly, on the first request
//! and on every redirect. No proxy from the environment is used, since a proxy
//! would make the connection to an address we never checked.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH};

/// An allow-listed network, `ADDR/PREFIX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, p) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = a.parse().map_err(|_| format!("{s}: not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = if p.is_empty() {
            max
        } else {
            p.parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s}: prefix must be 0..={max}"))?
        };
        Ok(Cidr { addr, prefix })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// Longest ETag, Last-Modified or Content-Type kept from a response.
const MAX_VALIDATOR_BYTES: usize = 256;

/// An IPv6 address that carries an IPv4 address is judged as that address:
/// IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`, which a NAT64
/// gateway forwards to a.b.c.d) and 6to4 (`2002:aabb:ccdd::`).
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    let s = v6.segments();
    let o = v6.octets();
    let v4 = |a: u8, b: u8, c: u8, d: u8| IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d));
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    match s {
        [0, 0, 0, 0, 0xffff, 0, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => {
            v4(o[12], o[13], o[14], o[15])
        }
        // `::` and `::1` stay IPv6 (unspecified, loopback).
        [0, 0, 0, 0, 0, 0, _, _] if !v6.is_loopback() && !v6.is_unspecified() => {
            v4(o[12], o[13], o[14], o[15])
        }
        [0x2002, ..] => v4(o[2], o[3], o[4], o[5]),
        _ => ip,
    }
}

/// Addresses inside our own networks, which a fetch must never reach.
pub fn is_internal(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(a) => {
            let [a0, a1, a2, _] = a.octets();
            a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_multicast()
                || a.is_unspecified()
                || a.is_broadcast()
                || a0 == 0
                // Shared address space (carrier-grade NAT), 100.64.0.0/10.
                || (a0 == 100 && (a1 & 0xC0) == 64)
                // IETF protocol assignments 192.0.0.0/24, benchmarking
                // 198.18.0.0/15, reserved 240.0.0.0/4.
                || (a0, a1, a2) == (192, 0, 0)
                || (a0 == 198 && (a1 & 0xFE) == 18)
                || a0 >= 240
        }
        IpAddr::V6(a) => {
            let s0 = a.segments()[0];
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                // Unique local fc00::/7, link-local fe80::/10, site-local fec0::/10.
                || (s0 & 0xFE00) == 0xFC00
                || (s0 & 0xFFC0) == 0xFE80
                || (s0 & 0xFFC0) == 0xFEC0
                // Local-use NAT64 64:ff9b:1::/48 (its IPv4 may sit anywhere in
                // it) and Teredo 2001::/32 (its IPv4 is obscured): tunnels
                // into networks we cannot judge.
                || (s0, a.segments()[1], a.segments()[2]) == (0x64, 0xff9b, 1)
                || (s0, a.segments()[1]) == (0x2001, 0)
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct FetchPolicy {
    pub allow: Vec<Cidr>,
}

impl FetchPolicy {
    pub fn permits(&self, ip: IpAddr) -> bool {
        self.allow.iter().any(|c| c.contains(ip)) || !is_internal(ip)
    }
}

struct CheckedResolver(Arc<FetchPolicy>);

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| policy.permits(a.ip()))
                .collect();
            if allowed.is_empty() {
                let err: Box<dyn std::error::Error + Send + Sync> = format!(
                    "{} resolves only to refused addresses ({})",
                    name.as_str(),
                    found
                        .iter()
                        .map(|a| a.ip().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                .into();
                return Err(err);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

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
    response: Box<reqwest::Response>,
    started: tokio::time::Instant,
    deadline: tokio::time::Instant,
    total: Duration,
    min_rate: u64,
    received: u64,
}

impl Download {
    /// The next piece of the body; a temporary failure once the deadline has
    /// passed or the average rate stays below the minimum.
    pub async fn next_chunk(&mut self) -> Result<Option<bytes::Bytes>, FetchError> {
        let piece = tokio::time::timeout_at(self.deadline, self.response.chunk())
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
    /// The response headers, `name: value`, at most [`MAX_HEADERS`] of them
    /// and [`MAX_HEADER_BYTES`] in all.
    pub headers: Vec<String>,
}

pub const MAX_HEADERS: usize = 32;
pub const MAX_HEADER_BYTES: usize = 4096;

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

/// Removes `user:password@` from a URL and says whether there was any:
/// credentials in a URL are never stored, shown nor sent (readers see every
/// stored URL, its crawl history and its logs).
pub fn strip_credentials(url: &mut reqwest::Url) -> bool {
    let had = !url.username().is_empty() || url.password().is_some();
    if had {
        // Both only fail for a URL without a host, which `check_url` refuses.
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    had
}

/// `url` as text without its credentials.
fn without_credentials(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    strip_credentials(&mut url);
    url.to_string()
}

/// Response headers never stored: they carry a site's sessions or
/// credentials, and a link's history is public.
const SECRET_HEADERS: &[&str] = &[
    "set-cookie",
    "set-cookie2",
    "cookie",
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
];

/// Whether a stored `name: value` line (or a bare name) is one of
/// [`SECRET_HEADERS`]: filtered on reading too, for rows stored before.
pub fn is_secret_header(line: &str) -> bool {
    let name = line.split(':').next().unwrap_or_default().trim();
    SECRET_HEADERS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Checks a URL before anything is fetched: http(s), a host, and, for an IP
/// literal, a permitted address.
pub fn check_url(policy: &FetchPolicy, url: &str) -> Result<reqwest::Url, String> {
    if url.len() > 4096 {
        return Err("the URL is longer than 4096 bytes".into());
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("only http and https URLs can be fetched".into());
    }
    match parsed.host() {
        None => return Err("the URL has no host".into()),
        Some(url::Host::Ipv4(a)) if !policy.permits(IpAddr::V4(a)) => {
            return Err(format!("{a} is an internal address"));
        }
        Some(url::Host::Ipv6(a)) if !policy.permits(IpAddr::V6(a)) => {
            return Err(format!("{a} is an internal address"));
        }
        _ => {}
    }
    Ok(parsed)
}

/// Resolves the URL's host now: a host with only refused addresses can be
/// refused at registration (it would fail later anyway). A host that does not
/// resolve at all is left to the download, which may succeed later.
pub async fn check_host_now(policy: &FetchPolicy, url: &reqwest::Url) -> Result<(), String> {
    let Some(url::Host::Domain(host)) = url.host() else {
        return Ok(());
    };
    // A name server that never answers must not hold the registering
    // request (nor a thread of the resolver's pool) for its full timeout.
    let lookup = tokio::time::timeout(Duration::from_secs(2), tokio::net::lookup_host((host, 0)));
    let Ok(Ok(found)) = lookup.await else {
        return Ok(());
    };
    let found: Vec<IpAddr> = found.map(|a| a.ip()).collect();
    if !found.is_empty() && found.iter().all(|ip| !policy.permits(*ip)) {
        return Err(format!("{host} resolves only to internal addresses"));
    }
    Ok(())
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
                response: Box::new(response),
                started,
                deadline,
                total: self.limits.total_timeout,
                min_rate: self.limits.min_rate,
                received: 0,
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

fn kept_headers(map: &HeaderMap) -> Vec<String> {
    let mut out = Vec::new();
    let mut bytes = 0;
    for (name, value) in map {
        if is_secret_header(name.as_str()) {
            continue;
        }
        let line = format!("{}: {}", name, String::from_utf8_lossy(value.as_bytes()));
        if out.len() >= MAX_HEADERS || bytes + line.len() > MAX_HEADER_BYTES {
            break;
        }
        bytes += line.len();
        out.push(line);
    }
    out
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

    #[test]
    fn internal_addresses_are_refused_unless_allowed() {
        let p = FetchPolicy::default();
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:0:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::",
            "2001:0:4136:e378::1",
            "fec0::1",
            "192.0.0.8",
            "198.18.0.1",
            "240.0.0.1",
        ] {
            assert!(!p.permits(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
        ] {
            assert!(p.permits(ip.parse().unwrap()), "{ip}");
        }
        let p = FetchPolicy {
            allow: vec!["127.0.0.0/8".parse().unwrap()],
        };
        assert!(p.permits("127.0.0.1".parse().unwrap()));
        assert!(!p.permits("10.0.0.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert_eq!(
            "::1".parse::<Cidr>().unwrap(),
            Cidr {
                addr: IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
                prefix: 128
            }
        );
    }

    #[test]
    fn cookies_and_credentials_are_never_kept() {
        let mut map = HeaderMap::new();
        for (name, value) in [
            ("set-cookie", "sid=1"),
            ("Set-Cookie2", "sid=2"),
            ("www-authenticate", "Basic realm=x"),
            ("proxy-authenticate", "Basic realm=x"),
            ("authorization", "Bearer t"),
            ("proxy-authorization", "Basic x"),
            ("content-type", "image/jpeg"),
        ] {
            map.append(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        assert_eq!(kept_headers(&map), ["content-type: image/jpeg"]);
        assert!(is_secret_header("Set-Cookie: a=b"));
        assert!(!is_secret_header("x-set-cookie-note: a"));

        let mut url = reqwest::Url::parse("https://user:pa%40ss@example.org/x.jpg?a=1").unwrap();
        assert!(strip_credentials(&mut url));
        assert_eq!(url.as_str(), "https://example.org/x.jpg?a=1");
        let mut url = reqwest::Url::parse("https://token@example.org/").unwrap();
        assert!(strip_credentials(&mut url));
        assert_eq!(url.as_str(), "https://example.org/");
        let mut url = reqwest::Url::parse("https://example.org/a@b").unwrap();
        assert!(!strip_credentials(&mut url));
        assert_eq!(url.as_str(), "https://example.org/a@b");
    }

    #[test]
    fn urls_are_checked_before_fetching() {
        let p = FetchPolicy::default();
        assert!(check_url(&p, "ftp://example.org/x").is_err());
        assert!(check_url(&p, "http://127.0.0.1:8080/x.jpg").is_err());
        assert!(check_url(&p, "http://[::1]/x.jpg").is_err());
        assert!(check_url(&p, "not a url").is_err());
        assert!(check_url(&p, "https://example.org/x.jpg").is_ok());
    }
}
