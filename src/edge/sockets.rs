//! The WebSocket places one client may hold. Every socket holds a place of
//! the process (`--max-connections`); a client address holds at most
//! `--max-sockets-per-client` sockets that carry no token (sockets that have
//! not sent `connection_init` yet included), a token's subject at most
//! `--max-sockets-per-subject`; and a share of the places
//! (`--reserved-for-tokens`) is kept for callers with a token, so a flood of
//! anonymous sockets from many addresses still leaves curators room. The same
//! share of subscription places is kept from anonymous operations.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::kernel::error::ApiError;
use crate::kernel::roles::Principal;

/// The bounds the limits flags set.
#[derive(Clone, Copy, Debug)]
pub struct SocketLimits {
    /// Sockets open at once, in all.
    pub total: usize,
    /// Of `total`, the places only a socket with a token may take.
    pub reserved: usize,
    /// Sockets without a token per client address.
    pub per_client: usize,
    /// Sockets per token subject.
    pub per_subject: usize,
    /// Operations (subscriptions, queries) anonymous sockets may run at once, in all.
    pub anonymous_operations: usize,
}

impl SocketLimits {
    pub fn from_limits(l: &crate::kernel::limits::Limits) -> Self {
        let total = l.max_connections.max(1);
        let share = |n: usize| n * usize::from(l.reserved_for_tokens.min(90)) / 100;
        SocketLimits {
            total,
            reserved: share(total),
            per_client: l.max_sockets_per_client.max(1),
            per_subject: l.max_sockets_per_subject.max(1),
            anonymous_operations: (l.max_subscriptions - share(l.max_subscriptions)).max(1),
        }
    }
}

/// The process's WebSocket places.
pub struct Sockets {
    limits: SocketLimits,
    counts: Mutex<Counts>,
    anonymous_operations: Arc<Semaphore>,
}

#[derive(Default)]
struct Counts {
    open: usize,
    /// Sockets without a token (yet).
    anonymous: usize,
    by_client: HashMap<IpAddr, usize>,
    by_subject: HashMap<String, usize>,
}

impl Sockets {
    pub fn new(limits: SocketLimits) -> Arc<Self> {
        Arc::new(Sockets {
            limits,
            counts: Mutex::new(Counts::default()),
            anonymous_operations: Arc::new(Semaphore::new(limits.anonymous_operations)),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new socket from `client` (unknown for a router called
    /// without a connection, as tests do), whose upgrade request named
    /// `caller` (browsers cannot send a token there; other clients may). A
    /// socket without a token counts for its address until
    /// [`SocketPlace::sign_in`]; when only reserved places are left, it must
    /// then show a token.
    pub fn admit(
        self: &Arc<Self>,
        client: Option<IpAddr>,
        caller: &Principal,
    ) -> Result<SocketPlace, ApiError> {
        let l = self.limits;
        let mut c = self.counts();
        if c.open >= l.total {
            return Err(ApiError::limit(
                "SOCKETS_FULL",
                503,
                format!(
                    "all {} WebSocket places (--max-connections) are taken; try again later",
                    l.total
                ),
            ));
        }
        if let Some(sub) = &caller.sub {
            c.take_subject(sub, l.per_subject)
                .map_err(|m| ApiError::limit("TOO_MANY_SOCKETS", 429, m))?;
            c.open += 1;
            return Ok(SocketPlace {
                sockets: self.clone(),
                client: None,
                subject: Some(sub.clone()),
                must_sign_in: false,
            });
        }
        if let Some(ip) = client
            && c.by_client.get(&ip).copied().unwrap_or(0) >= l.per_client
        {
            return Err(ApiError::limit(
                "TOO_MANY_SOCKETS",
                429,
                format!(
                    "this address holds {} WebSockets without a token (--max-sockets-per-client); close one, or sign in",
                    l.per_client
                ),
            ));
        }
        let must_sign_in = c.anonymous >= l.total - l.reserved;
        c.open += 1;
        c.anonymous += 1;
        if let Some(ip) = client {
            *c.by_client.entry(ip).or_default() += 1;
        }
        Ok(SocketPlace {
            sockets: self.clone(),
            client,
            subject: None,
            must_sign_in,
        })
    }

    /// A place for one operation of an anonymous socket; `None` when the
    /// places anonymous operations may take are taken.
    pub fn anonymous_operation(&self) -> Option<OwnedSemaphorePermit> {
        self.anonymous_operations.clone().try_acquire_owned().ok()
    }

    /// How many anonymous operations may run at once.
    pub fn anonymous_operations_limit(&self) -> usize {
        self.limits.anonymous_operations
    }
}

/// One socket's place; given back when dropped.
pub struct SocketPlace {
    sockets: Arc<Sockets>,
    /// The address the socket counts for while it has no token.
    client: Option<IpAddr>,
    /// Set once `connection_init` showed a token: the socket counts for its subject.
    subject: Option<String>,
    /// Admitted into a reserved place: only a token keeps it.
    must_sign_in: bool,
}

impl Counts {
    /// One more socket for `sub`, if it holds fewer than `most`.
    fn take_subject(&mut self, sub: &str, most: usize) -> Result<(), String> {
        let n = self.by_subject.entry(sub.to_owned()).or_default();
        if *n >= most {
            if *n == 0 {
                self.by_subject.remove(sub);
            }
            return Err(format!(
                "this token holds {most} WebSockets (--max-sockets-per-subject); close one"
            ));
        }
        *n += 1;
        Ok(())
    }
}

impl SocketPlace {
    /// `connection_init` named `principal`: a token moves the socket from
    /// its address's count to its subject's; an anonymous socket in a
    /// reserved place is refused.
    pub fn sign_in(&mut self, principal: &Principal) -> Result<(), String> {
        let l = self.sockets.limits;
        if self.subject.is_some() {
            return Ok(());
        }
        let Some(sub) = &principal.sub else {
            if self.must_sign_in {
                return Err(format!(
                    "the last {} WebSocket places are kept for callers with a token (--reserved-for-tokens); try again later",
                    l.reserved
                ));
            }
            return Ok(());
        };
        let mut c = self.sockets.counts();
        c.take_subject(sub, l.per_subject)?;
        c.anonymous -= 1;
        if let Some(ip) = self.client.take() {
            release(&mut c.by_client, &ip);
        }
        self.subject = Some(sub.clone());
        Ok(())
    }
}

impl Drop for SocketPlace {
    fn drop(&mut self) {
        let mut c = self.sockets.counts();
        c.open -= 1;
        match &self.subject {
            Some(sub) => release(&mut c.by_subject, sub),
            None => {
                c.anonymous -= 1;
                if let Some(ip) = self.client {
                    release(&mut c.by_client, &ip);
                }
            }
        }
    }
}

/// One fewer for `key`; a key at zero leaves the map (it cannot grow with
/// every address ever seen).
fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sockets(total: usize, reserved: usize, per_client: usize) -> Arc<Sockets> {
        Sockets::new(SocketLimits {
            total,
            reserved,
            per_client,
            per_subject: 2,
            anonymous_operations: 1,
        })
    }

    fn ip(n: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, n]))
    }

    fn anonymous() -> Principal {
        Principal::default()
    }

    fn signed(sub: &str) -> Principal {
        Principal {
            sub: Some(sub.into()),
            ..Principal::default()
        }
    }

    #[test]
    fn one_address_holds_at_most_its_share_of_anonymous_sockets() {
        let s = sockets(10, 0, 2);
        let a = [
            s.admit(ip(1), &anonymous()).unwrap(),
            s.admit(ip(1), &anonymous()).unwrap(),
        ];
        let e = s.admit(ip(1), &anonymous()).err().unwrap();
        assert_eq!((e.code(), e.status()), ("TOO_MANY_SOCKETS", 429));
        assert!(
            s.admit(ip(2), &anonymous()).is_ok(),
            "another address is not held up"
        );
        drop(a);
        assert!(
            s.admit(ip(1), &anonymous()).is_ok(),
            "places come back when sockets close"
        );
        assert!(s.counts().by_client.len() <= 2);
    }

    #[test]
    fn a_token_moves_a_socket_from_its_address_to_its_subject() {
        let s = sockets(10, 0, 1);
        let mut first = s.admit(ip(1), &anonymous()).unwrap();
        first.sign_in(&signed("anna")).unwrap();
        let mut second = s.admit(ip(1), &anonymous()).unwrap();
        second.sign_in(&signed("anna")).unwrap();
        let mut third = s.admit(ip(1), &anonymous()).unwrap();
        assert!(
            third
                .sign_in(&signed("anna"))
                .unwrap_err()
                .contains("per-subject")
        );
        assert!(third.sign_in(&signed("bert")).is_ok());
        // A token in the upgrade request counts for its subject at once,
        // whatever the address holds.
        let _many: Vec<_> = (0..3).map(|_| s.admit(ip(2), &signed("carl"))).collect();
        assert_eq!(s.counts().by_subject["carl"], 2);
        assert!(s.admit(ip(2), &anonymous()).is_ok());
    }

    #[test]
    fn the_reserved_places_are_kept_for_callers_with_a_token() {
        let s = sockets(4, 2, 10);
        let _anonymous: Vec<_> = (0..2)
            .map(|i| s.admit(ip(i), &anonymous()).unwrap())
            .collect();
        let mut late = s.admit(ip(9), &anonymous()).unwrap();
        assert!(late.sign_in(&Principal::default()).is_err());
        let mut curator = s.admit(ip(9), &anonymous()).unwrap();
        assert!(curator.sign_in(&signed("anna")).is_ok());
        drop(late);
        let _fourth = s.admit(ip(9), &anonymous()).unwrap();
        let e = s.admit(ip(9), &anonymous()).err().unwrap();
        assert_eq!(e.code(), "SOCKETS_FULL");
    }
}
