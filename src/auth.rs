//! Bearer JWTs: HS256 with a shared secret, or RS256 verified with a public key.
//! `sub` is the creator recorded on writes; `roles` grants what ARCHITECTURE.md's
//! "Who may do what" lists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct AuthArgs {
    /// HS256 secret for bearer tokens. In embedded mode a secret is generated
    /// into the data directory when none is given.
    #[arg(long, env = "KARTEI_AUTH_SECRET", hide_env_values = true)]
    pub auth_secret: Option<String>,
    /// PEM file with an RS256 public key: tokens are then verified with it (and the secret is not used).
    #[arg(long, env = "KARTEI_AUTH_PUBLIC_KEY", conflicts_with = "auth_secret")]
    pub auth_public_key: Option<PathBuf>,
}

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

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    roles: Vec<String>,
    exp: u64,
    #[serde(default)]
    iat: u64,
}

/// Who is calling. Anonymous callers are readers.
#[derive(Clone, Debug, Default)]
pub struct Principal {
    pub sub: Option<String>,
    pub roles: BTreeSet<Role>,
}

impl Principal {
    /// A command run on this machine with direct access to the store (an
    /// importer): it acts as `name` with `roles`.
    pub fn local(name: &str, roles: &[Role]) -> Principal {
        Principal {
            sub: Some(name.to_owned()),
            roles: roles.iter().copied().collect(),
        }
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

/// What reading a request's bearer token gave: put into the request's
/// extensions once by the HTTP layer (`Err` is why the token is refused).
#[derive(Clone, Debug)]
pub struct Authenticated(pub Result<Principal, String>);

/// The caller of a REST route, from [`Authenticated`]: a refused token is a 401.
pub struct Caller(pub Principal);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Authenticated>() {
            Some(Authenticated(Ok(p))) => Ok(Caller(p.clone())),
            Some(Authenticated(Err(m))) => Err(ApiError::InvalidToken(m.clone())),
            None => {
                tracing::error!("a route that needs its caller is served without authentication");
                Err(ApiError::Internal)
            }
        }
    }
}

pub struct Auth {
    decoding: DecodingKey,
    validation: Validation,
    encoding: Option<EncodingKey>,
}

impl Auth {
    pub fn hs256(secret: &[u8]) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        Auth {
            decoding: DecodingKey::from_secret(secret),
            validation,
            encoding: Some(EncodingKey::from_secret(secret)),
        }
    }

    pub fn rs256(public_pem: &[u8]) -> anyhow::Result<Self> {
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        Ok(Auth {
            decoding: DecodingKey::from_rsa_pem(public_pem)?,
            validation,
            encoding: None,
        })
    }

    /// From the flags; in embedded mode without a secret, one is generated and
    /// kept in `data_dir/auth-secret` so tokens survive restarts.
    pub fn from_args(args: &AuthArgs, data_dir: Option<&Path>) -> anyhow::Result<Self> {
        if let Some(path) = &args.auth_public_key {
            return Self::rs256(&std::fs::read(path)?);
        }
        if let Some(secret) = &args.auth_secret {
            if secret.len() < 16 {
                anyhow::bail!("--auth-secret must be at least 16 characters long");
            }
            return Ok(Self::hs256(secret.as_bytes()));
        }
        let Some(dir) = data_dir else {
            anyhow::bail!("no --auth-secret (KARTEI_AUTH_SECRET) or --auth-public-key given");
        };
        let path = dir.join("auth-secret");
        let secret = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().to_owned(),
            Err(_) => {
                std::fs::create_dir_all(dir)?;
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
                let s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                std::fs::write(&path, &s)?;
                s
            }
        };
        Ok(Self::hs256(secret.as_bytes()))
    }

    /// Reads an `Authorization` header value. No header: anonymous reader.
    pub fn principal(&self, header: Option<&str>) -> Result<Principal, ApiError> {
        let Some(h) = header else {
            return Ok(Principal::default());
        };
        let token = h
            .strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
            .ok_or_else(|| {
                ApiError::InvalidToken("the Authorization header must be `Bearer <token>`".into())
            })?;
        let data = jsonwebtoken::decode::<Claims>(token.trim(), &self.decoding, &self.validation)
            .map_err(|e| ApiError::InvalidToken(format!("invalid token: {e}")))?;
        // The subject is recorded as the creator of writes: it must name someone.
        if data.claims.sub.trim().is_empty() {
            return Err(ApiError::InvalidToken(
                "the token has an empty subject (sub)".into(),
            ));
        }
        let mut roles = BTreeSet::new();
        for r in &data.claims.roles {
            // Unknown roles are ignored, so tokens can carry roles of other services.
            if let Some(role) = Role::parse(r) {
                roles.insert(role);
            }
        }
        Ok(Principal {
            sub: Some(data.claims.sub),
            roles,
        })
    }

    /// Mints a token (HS256 only).
    pub fn mint(&self, sub: &str, roles: &[String], valid_secs: u64) -> anyhow::Result<String> {
        let Some(key) = &self.encoding else {
            anyhow::bail!("tokens can only be minted with an HS256 secret");
        };
        if sub.trim().is_empty() {
            anyhow::bail!("the subject (--sub) must not be empty");
        }
        for r in roles {
            if Role::parse(r).is_none() {
                anyhow::bail!("unknown role {r:?} (contributor, archive, machine, editor, admin)");
            }
        }
        let now = jsonwebtoken::get_current_timestamp();
        let claims = Claims {
            sub: sub.to_owned(),
            roles: roles.to_vec(),
            // "Valid for ever" ends at the last second a u64 holds, not in 1970.
            exp: now.saturating_add(valid_secs),
            iat: now,
        };
        Ok(jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            key,
        )?)
    }
}

#[cfg(test)]
mod tests;
