//! What a fetch never keeps: a URL's credentials (never stored, shown nor
//! sent) and the response headers that carry a site's sessions or
//! credentials, since a link's history is public.

use reqwest::header::HeaderMap;

/// The most response headers kept of an answer, and their bytes in all.
pub const MAX_HEADERS: usize = 32;
pub const MAX_HEADER_BYTES: usize = 4096;

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
pub(super) fn without_credentials(url: &reqwest::Url) -> String {
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

/// The response headers kept of an answer: none of [`SECRET_HEADERS`], at
/// most [`MAX_HEADERS`] lines and [`MAX_HEADER_BYTES`] in all.
pub(super) fn kept_headers(map: &HeaderMap) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
