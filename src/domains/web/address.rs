//! The SSRF rules: which addresses a fetch may reach. Loopback, private,
//! link-local, multicast, unspecified and other internal addresses are
//! refused (an IPv6 address carrying an IPv4 one judged as that one) unless
//! an allow-listed CIDR covers them, in the resolver every connection uses
//! and, for IP-literal URLs that skip it, on the URL itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

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

/// The resolver of every connection the client makes: only permitted addresses.
pub(super) struct CheckedResolver(pub(super) Arc<FetchPolicy>);

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn urls_are_checked_before_fetching() {
        let p = FetchPolicy::default();
        assert!(check_url(&p, "ftp://example.org/x").is_err());
        assert!(check_url(&p, "http://127.0.0.1:8080/x.jpg").is_err());
        assert!(check_url(&p, "http://[::1]/x.jpg").is_err());
        assert!(check_url(&p, "not a url").is_err());
        assert!(check_url(&p, "https://example.org/x.jpg").is_ok());
    }
}
