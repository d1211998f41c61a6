//! Who is calling and what they may do: the roles a token grants and the
//! Principal every service checks ("Who may do what" in ARCHITECTURE.md).
//! Reading a token is the edge's work (`edge::auth`); the rules use this.

use std::collections::BTreeSet;

use crate::kernel::error::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Contributor,
    Archive,
    Machine,
    Editor,
    Admin,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "contributor" => Role::Contributor,
            "archive" => Role::Archive,
            "machine" => Role::Machine,
            "editor" => Role::Editor,
            "admin" => Role::Admin,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Contributor => "contributor",
            Role::Archive => "archive",
            Role::Machine => "machine",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }
}

/// Who is calling. Anonymous callers are readers.
#[derive(Clone, Debug, Default)]
pub struct Principal {
    pub sub: Option<String>,
    pub roles: BTreeSet<Role>,
    /// The last second (Unix time, the leeway included) the token that
    /// named this caller is good for; `None` for anonymous and local callers.
    /// A WebSocket checks it before each operation and closes at it.
    pub valid_until: Option<u64>,
}

impl Principal {
    /// A command run on this machine with direct access to the store (an
    /// importer): it acts as `name` with `roles`.
    pub fn local(name: &str, roles: &[Role]) -> Principal {
        Principal {
            sub: Some(name.to_owned()),
            roles: roles.iter().copied().collect(),
            valid_until: None,
        }
    }

    /// Whether the token that named this caller has expired by `now` (Unix seconds).
    pub fn expired(&self, now: u64) -> bool {
        self.valid_until.is_some_and(|t| now > t)
    }

    /// Admin may do everything.
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role) || self.roles.contains(&Role::Admin)
    }

    /// Requires a token with `role`: UNAUTHENTICATED without a token, FORBIDDEN without the role.
    pub fn require(&self, role: Role) -> Result<&str, ApiError> {
        self.require_any(&[role])
    }

    /// Requires a token with one of `roles` (FORBIDDEN names the first).
    pub fn require_any(&self, roles: &[Role]) -> Result<&str, ApiError> {
        let Some(sub) = &self.sub else {
            return Err(ApiError::Unauthenticated);
        };
        if roles.iter().any(|r| self.has(*r)) {
            Ok(sub)
        } else {
            Err(ApiError::Forbidden(
                roles.first().map_or("admin", |r| r.name()),
            ))
        }
    }

    /// A caller with a token (any role): who may see other users' names
    /// (reviewers, the actors of events); anonymous readers may not.
    pub fn signed_in(&self) -> bool {
        self.sub.is_some()
    }
}
