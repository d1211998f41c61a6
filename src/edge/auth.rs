//! Bearer JWTs: HS256 with a shared secret, or RS256 verified with a public key.
//! `sub` is the creator recorded on writes; `roles` grants what ARCHITECTURE.md's
//! "Who may do what" lists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::kernel::error::ApiError;
use crate::kernel::roles::{Principal, Role};

/// The fewest bytes a token secret may have: an HMAC key shorter than its
/// hash (SHA-256) weakens it, and an empty one lets anybody sign.
pub const MIN_SECRET_BYTES: usize = 32;

/// The most clock skew a token's `exp` and `nbf` are given, in seconds.
pub const MAX_LEEWAY_SECS: u64 = 30;

/// How to make a secret, for the messages that refuse one.
const MAKE_A_SECRET: &str = "make one with `head -c 48 /dev/urandom | base64`";

#[derive(clap::Args, Debug, Clone)]
pub struct AuthArgs {
    /// HS256 secret for bearer tokens, at least 32 bytes. In embedded mode a
    /// secret is generated into the data directory (`auth-secret`, 0600) when
    /// none is given.
    #[arg(long, env = "KARTEI_AUTH_SECRET", hide_env_values = true)]
    pub auth_secret: Option<String>,
    /// PEM file with an RS256 public key: tokens are then verified with it (and the secret is not used).
    #[arg(long, env = "KARTEI_AUTH_PUBLIC_KEY", conflicts_with = "auth_secret")]
    pub auth_public_key: Option<PathBuf>,
    /// Seconds of clock skew a token's `exp` and `nbf` are given (0 to 30).
    #[arg(long, env = "KARTEI_TOKEN_LEEWAY", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(0..=MAX_LEEWAY_SECS))]
    pub token_leeway: u64,
    /// The issuer (`iss`) every token must name, when set (minted tokens carry it).
    #[arg(long, env = "KARTEI_AUTH_ISSUER")]
    pub auth_issuer: Option<String>,
    /// The audience (`aud`) every token must name, when set (minted tokens carry it).
    #[arg(long, env = "KARTEI_AUTH_AUDIENCE")]
    pub auth_audience: Option<String>,
    #[command(flatten)]
    pub oidc: crate::edge::oidc::OidcArgs,
}

impl Default for AuthArgs {
    fn default() -> Self {
        AuthArgs {
            auth_secret: None,
            auth_public_key: None,
            token_leeway: 5,
            auth_issuer: None,
            auth_audience: None,
            oidc: Default::default(),
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aud: Option<serde_json::Value>,
}

pub struct Auth {
    decoding: DecodingKey,
    validation: Validation,
    encoding: Option<EncodingKey>,
    leeway: u64,
    issuer: Option<String>,
    audience: Option<String>,
    /// The institution's OpenID provider, whose ID tokens are accepted too.
    oidc: Option<std::sync::Arc<crate::edge::oidc::Oidc>>,
}

impl Auth {
    /// Accepts the ID tokens of `oidc` beside the tokens of the flags.
    pub fn with_oidc(mut self, oidc: std::sync::Arc<crate::edge::oidc::Oidc>) -> Self {
        self.oidc = Some(oidc);
        self
    }

    /// The OpenID provider, when sign-in with one is configured.
    pub fn oidc(&self) -> Option<&crate::edge::oidc::Oidc> {
        self.oidc.as_deref()
    }

    /// HS256 with `secret` (at least [`MIN_SECRET_BYTES`]), default checks.
    pub fn hs256(secret: &[u8]) -> anyhow::Result<Self> {
        Self::hs256_with(secret, &AuthArgs::default())
    }

    fn hs256_with(secret: &[u8], args: &AuthArgs) -> anyhow::Result<Self> {
        if secret.len() < MIN_SECRET_BYTES {
            anyhow::bail!(
                "the token secret has {} bytes; it needs at least {MIN_SECRET_BYTES}: {MAKE_A_SECRET}",
                secret.len()
            );
        }
        Ok(Self::new(
            Algorithm::HS256,
            DecodingKey::from_secret(secret),
            Some(EncodingKey::from_secret(secret)),
            args,
        ))
    }

    pub fn rs256(public_pem: &[u8], args: &AuthArgs) -> anyhow::Result<Self> {
        let key = DecodingKey::from_rsa_pem(public_pem)?;
        Ok(Self::new(Algorithm::RS256, key, None, args))
    }

    fn new(
        alg: Algorithm,
        decoding: DecodingKey,
        encoding: Option<EncodingKey>,
        args: &AuthArgs,
    ) -> Self {
        let leeway = args.token_leeway.min(MAX_LEEWAY_SECS);
        let mut validation = Validation::new(alg);
        let mut required = vec!["exp", "sub"];
        // The library's default is a minute, which kept a token alive for
        // that long past its `exp`.
        validation.leeway = leeway;
        validation.validate_nbf = true;
        if let Some(iss) = &args.auth_issuer {
            validation.set_issuer(&[iss]);
            required.push("iss");
        }
        if let Some(aud) = &args.auth_audience {
            validation.set_audience(&[aud]);
            required.push("aud");
        }
        validation.set_required_spec_claims(&required);
        Auth {
            decoding,
            validation,
            encoding,
            leeway,
            issuer: args.auth_issuer.clone(),
            audience: args.auth_audience.clone(),
            oidc: None,
        }
    }

    /// From the flags; in embedded mode without a secret, one is generated and
    /// kept in `data_dir/auth-secret` so tokens survive restarts.
    pub fn from_args(args: &AuthArgs, data_dir: Option<&Path>) -> anyhow::Result<Self> {
        if let Some(path) = &args.auth_public_key {
            let pem = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            return Self::rs256(&pem, args);
        }
        if let Some(secret) = &args.auth_secret {
            let secret = secret.trim();
            if secret.len() < MIN_SECRET_BYTES {
                anyhow::bail!(
                    "--auth-secret (KARTEI_AUTH_SECRET) has {} bytes; it needs at least {MIN_SECRET_BYTES}: {MAKE_A_SECRET}",
                    secret.len()
                );
            }
            return Self::hs256_with(secret.as_bytes(), args);
        }
        let Some(dir) = data_dir else {
            anyhow::bail!("no --auth-secret (KARTEI_AUTH_SECRET) or --auth-public-key given");
        };
        Self::hs256_with(&secret_file(dir)?, args)
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
        if let Some(oidc) = &self.oidc
            && oidc.issued(token.trim())
        {
            return oidc.principal(token.trim());
        }
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
            valid_until: Some(data.claims.exp.saturating_add(self.leeway)),
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
            iss: self.issuer.clone(),
            aud: self.audience.clone().map(serde_json::Value::from),
        };
        Ok(jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            key,
        )?)
    }
}

/// The secret kept in `dir/auth-secret`, made there when the file does not
/// exist. A file that exists but cannot be read, or holds too short a
/// secret (a disk that filled up at the first start leaves an empty one), is
/// an error: replacing it would silently end every token issued, and an
/// empty key would let anybody sign.
fn secret_file(dir: &Path) -> anyhow::Result<Vec<u8>> {
    let path = dir.join("auth-secret");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return new_secret_file(dir, &path),
        Err(e) => anyhow::bail!(
            "cannot read the token secret {}: {e}; fix its permissions, or give --auth-secret",
            path.display()
        ),
    };
    let secret = bytes.trim_ascii();
    if secret.len() < MIN_SECRET_BYTES {
        anyhow::bail!(
            "the token secret {} has {} bytes; it needs at least {MIN_SECRET_BYTES}. Delete the file to have a new one made (tokens issued so far stop working), or write one: {MAKE_A_SECRET} > {}",
            path.display(),
            secret.len(),
            path.display()
        );
    }
    keep_private(&path);
    Ok(secret.to_vec())
}

/// A new random secret, written so that it is whole or absent: into a
/// temporary file (0600) beside it, synced, then renamed into place without
/// replacing a file another process put there first.
fn new_secret_file(dir: &Path, path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    // tempfile creates its files readable by the owner only.
    let mut tmp = tempfile::Builder::new()
        .prefix(".auth-secret.")
        .tempfile_in(dir)?;
    tmp.write_all(secret.as_bytes())?;
    tmp.as_file().sync_all()?;
    match tmp.persist_noclobber(path) {
        Ok(_) => {}
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => return secret_file(dir),
        Err(e) => return Err(e.error.into()),
    }
    // The rename is durable once the directory is.
    std::fs::File::open(dir)?.sync_all()?;
    Ok(secret.into_bytes())
}

/// Narrows a secret file that others may read to its owner (earlier
/// versions wrote it 0644).
#[cfg(unix)]
fn keep_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if meta.permissions().mode() & 0o077 != 0 {
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
            Ok(()) => {
                tracing::warn!(path = %path.display(), "the token secret was readable by others; it is 0600 now")
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "the token secret is readable by others and could not be narrowed")
            }
        }
    }
}

#[cfg(not(unix))]
fn keep_private(_: &Path) {}

#[cfg(test)]
mod tests;
