//! Sign-in with the institution's OpenID Connect provider. The UI runs the
//! authorization code flow with PKCE in the browser (a public client) and
//! sends the ID token it gets as its bearer token; here such a token is
//! told from kartei's own by its issuer and verified with the provider's
//! published keys (JWKS): signature (an asymmetric algorithm the key is
//! for, never HS* or none), issuer, audience (the client id), `exp` and
//! `nbf` with the configured leeway, a subject. Roles come from a
//! configured claim.
//!
//! The provider's discovery document and keys are read at start (the
//! server does not start without them: a wrong issuer is a mistake to see
//! at once), again every [`REFRESH`], and at once (at most every
//! [`REFETCH_AFTER`]) when a token names a key not known yet: a provider
//! that rotates its keys is followed without a restart.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use clap::Args;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::kernel::error::ApiError;
use crate::kernel::roles::{Principal, Role};

/// How often the keys are read again.
const REFRESH: Duration = Duration::from_secs(600);
/// The shortest time between two reads caused by unknown key ids.
const REFETCH_AFTER: Duration = Duration::from_secs(30);
/// How long a read of the provider may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Sign-in with an OpenID Connect provider (off unless an issuer is given).
#[derive(Args, Debug, Clone)]
pub struct OidcArgs {
    /// The issuer URL of the institution's OpenID Connect provider (https; http
    /// only on a loopback address). The UI then offers sign-in with it, and
    /// its ID tokens for `--oidc-client-id` are accepted beside kartei's own.
    #[arg(long, env = "KARTEI_OIDC_ISSUER", requires = "oidc_client_id")]
    pub oidc_issuer: Option<String>,
    /// The client id the UI is registered with at the provider (a public
    /// client: authorization code with PKCE, redirect URI
    /// `<this server>/ui/callback`); ID tokens must name it as audience.
    #[arg(long, env = "KARTEI_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// The claim that holds a user's roles: a list of strings or one string
    /// of words; a dotted path reaches into objects (Keycloak:
    /// `realm_access.roles`). Roles kartei does not know are ignored.
    #[arg(long, env = "KARTEI_OIDC_ROLES_CLAIM", default_value = "roles")]
    pub oidc_roles_claim: String,
    /// The scopes the UI asks for (they must bring the roles claim into the
    /// ID token).
    #[arg(
        long,
        env = "KARTEI_OIDC_SCOPE",
        default_value = "openid profile roles"
    )]
    pub oidc_scope: String,
}

impl Default for OidcArgs {
    fn default() -> Self {
        OidcArgs {
            oidc_issuer: None,
            oidc_client_id: None,
            oidc_roles_claim: "roles".into(),
            oidc_scope: "openid profile roles".into(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    #[serde(default)]
    end_session_endpoint: Option<String>,
    jwks_uri: String,
}

/// The provider as this server knows it.
pub struct Oidc {
    issuer: String,
    client_id: String,
    roles_claim: Vec<String>,
    scope: String,
    discovery: Discovery,
    keys: RwLock<JwkSet>,
    last_fetch: Mutex<Instant>,
    http: reqwest::Client,
    leeway: u64,
}

impl Oidc {
    /// Reads the provider's discovery document and keys.
    pub async fn discover(args: &OidcArgs, leeway: u64) -> anyhow::Result<Arc<Oidc>> {
        let (Some(issuer), Some(client_id)) = (&args.oidc_issuer, &args.oidc_client_id) else {
            anyhow::bail!("--oidc-issuer needs --oidc-client-id");
        };
        let issuer = issuer.trim_end_matches('/').to_owned();
        check_issuer(&issuer)?;
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let url = format!("{issuer}/.well-known/openid-configuration");
        let discovery: Discovery = fetch_json(&http, &url).await?;
        if discovery.issuer.trim_end_matches('/') != issuer {
            anyhow::bail!(
                "the provider at {url} calls itself {:?}, not {issuer:?}: give --oidc-issuer exactly as it does",
                discovery.issuer
            );
        }
        check_issuer(&discovery.jwks_uri).map_err(|_| {
            anyhow::anyhow!(
                "the provider's jwks_uri {} is not https",
                discovery.jwks_uri
            )
        })?;
        let keys = signing_keys(fetch_json(&http, &discovery.jwks_uri).await?);
        if keys.keys.is_empty() {
            anyhow::bail!(
                "{} publishes no signing key kartei can use",
                discovery.jwks_uri
            );
        }
        Ok(Arc::new(Oidc {
            issuer,
            client_id: client_id.clone(),
            roles_claim: args
                .oidc_roles_claim
                .split('.')
                .map(str::to_owned)
                .collect(),
            scope: args.oidc_scope.clone(),
            discovery,
            keys: RwLock::new(keys),
            last_fetch: Mutex::new(Instant::now()),
            http,
            leeway,
        }))
    }

    /// Reads the keys again every [`REFRESH`], for as long as the process runs.
    pub fn spawn_refresh(self: &Arc<Self>) {
        let oidc = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH).await;
                let Some(o) = oidc.upgrade() else { return };
                o.refetch().await;
            }
        });
    }

    async fn refetch(&self) {
        *self.last_fetch.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        match fetch_json::<serde_json::Value>(&self.http, &self.discovery.jwks_uri).await {
            Ok(keys) => *self.keys.write().unwrap_or_else(|e| e.into_inner()) = signing_keys(keys),
            Err(e) => {
                tracing::warn!(error = %e, "the OpenID provider's keys could not be read again; the known ones stay")
            }
        }
    }

    /// Whether `token` claims to come from this provider (read unverified,
    /// to choose how to verify it).
    pub fn issued(&self, token: &str) -> bool {
        #[derive(Deserialize)]
        struct Iss {
            iss: Option<String>,
        }
        let Some(payload) = token.split('.').nth(1) else {
            return false;
        };
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|b| serde_json::from_slice::<Iss>(&b).ok())
            .and_then(|c| c.iss)
            .is_some_and(|iss| iss.trim_end_matches('/') == self.issuer)
    }

    /// Verifies an ID token of this provider.
    pub fn principal(self: &Arc<Self>, token: &str) -> Result<Principal, ApiError> {
        let invalid = |why: String| ApiError::InvalidToken(format!("invalid token: {why}"));
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(e.to_string()))?;
        let (key, alg) = {
            let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
            let jwk = match &header.kid {
                Some(kid) => keys.find(kid),
                None if keys.keys.len() == 1 => keys.keys.first(),
                None => None,
            };
            match jwk {
                Some(jwk) => (
                    DecodingKey::from_jwk(jwk).map_err(|e| invalid(e.to_string()))?,
                    key_algorithms(jwk),
                ),
                None => {
                    self.refetch_soon();
                    return Err(invalid(
                        "signed with a key the OpenID provider does not publish (yet); sign in again in a minute".into(),
                    ));
                }
            }
        };
        if !alg.contains(&header.alg) {
            return Err(invalid(format!(
                "{:?} is not an algorithm of the provider's key",
                header.alg
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer, &format!("{}/", self.issuer)]);
        validation.set_audience(&[&self.client_id]);
        validation.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &key, &validation)
            .map_err(|e| invalid(e.to_string()))?;
        let claims = data.claims;
        let sub = claims["sub"].as_str().unwrap_or_default().trim().to_owned();
        if sub.is_empty() {
            return Err(ApiError::InvalidToken(
                "the token has an empty subject (sub)".into(),
            ));
        }
        let exp = claims["exp"].as_u64().unwrap_or(0);
        Ok(Principal {
            sub: Some(sub),
            roles: roles_of(&claims, &self.roles_claim),
            valid_until: Some(exp.saturating_add(self.leeway)),
        })
    }

    fn refetch_soon(self: &Arc<Self>) {
        {
            let mut last = self.last_fetch.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() < REFETCH_AFTER {
                return;
            }
            *last = Instant::now();
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let o = self.clone();
            rt.spawn(async move { o.refetch().await });
        }
    }

    /// What the UI needs to run the flow (`GET /auth/config`).
    pub fn ui_config(&self) -> serde_json::Value {
        serde_json::json!({
            "issuer": self.issuer,
            "clientId": self.client_id,
            "scope": self.scope,
            "authorizationEndpoint": self.discovery.authorization_endpoint,
            "tokenEndpoint": self.discovery.token_endpoint,
            "endSessionEndpoint": self.discovery.end_session_endpoint,
        })
    }

    /// The origin of the token endpoint, which the UI's page may call.
    pub fn token_origin(&self) -> Option<String> {
        url::Url::parse(&self.discovery.token_endpoint)
            .ok()
            .map(|u| u.origin().ascii_serialization())
    }
}

/// The keys of a JWKS document that verify signatures: each parsed on its
/// own (a key of a kind this library does not read is left out, not the
/// whole set), keys for encryption left out.
fn signing_keys(doc: serde_json::Value) -> JwkSet {
    let keys = doc["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
        .filter(|k| !matches!(k.common.public_key_use, Some(PublicKeyUse::Encryption)))
        .filter(|k| !key_algorithms(k).is_empty())
        .collect();
    JwkSet { keys }
}

/// The algorithms a key may verify: those of its type, or the one it names.
fn key_algorithms(jwk: &jsonwebtoken::jwk::Jwk) -> Vec<Algorithm> {
    use jsonwebtoken::jwk::KeyAlgorithm as K;
    let of_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => vec![],
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        AlgorithmParameters::OctetKeyPair(_) => vec![],
        // A symmetric key is the client's secret, never a provider's signature.
        AlgorithmParameters::OctetKey(_) => vec![],
    };
    let named = match jwk.common.key_algorithm {
        Some(K::RS256) => Some(Algorithm::RS256),
        Some(K::RS384) => Some(Algorithm::RS384),
        Some(K::RS512) => Some(Algorithm::RS512),
        Some(K::PS256) => Some(Algorithm::PS256),
        Some(K::PS384) => Some(Algorithm::PS384),
        Some(K::PS512) => Some(Algorithm::PS512),
        Some(K::ES256) => Some(Algorithm::ES256),
        Some(K::ES384) => Some(Algorithm::ES384),
        Some(K::EdDSA) => Some(Algorithm::EdDSA),
        _ => None,
    };
    match (named, &jwk.common.key_algorithm) {
        (Some(a), _) => of_type.into_iter().filter(|t| *t == a).collect(),
        // A key for another purpose (RSA-OAEP encryption, HMAC): none.
        (None, Some(_)) => Vec::new(),
        (None, None) => of_type,
    }
}

/// The roles at `path` in `claims`: a list of strings or one string of words.
fn roles_of(claims: &serde_json::Value, path: &[String]) -> BTreeSet<Role> {
    let mut at = claims;
    for part in path {
        at = &at[part.as_str()];
    }
    let names: Vec<&str> = match at {
        serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
        serde_json::Value::String(s) => s.split_whitespace().collect(),
        _ => Vec::new(),
    };
    names.into_iter().filter_map(Role::parse).collect()
}

/// https, or http on a loopback address (a provider on this machine).
fn check_issuer(issuer: &str) -> anyhow::Result<()> {
    let url =
        url::Url::parse(issuer).map_err(|e| anyhow::anyhow!("--oidc-issuer {issuer:?}: {e}"))?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => anyhow::bail!(
            "--oidc-issuer must be an https URL (http only on a loopback address): {issuer}"
        ),
    }
}

async fn fetch_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> anyhow::Result<T> {
    let r = http
        .get(url)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot read {url}: {e}"))?;
    if !r.status().is_success() {
        anyhow::bail!("{url} answered {}", r.status());
    }
    r.json()
        .await
        .map_err(|e| anyhow::anyhow!("{url} did not answer the JSON expected: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roles_come_from_a_list_a_string_or_a_nested_claim() {
        let path = |p: &str| p.split('.').map(str::to_owned).collect::<Vec<_>>();
        let c = json!({"roles": ["editor", "unknown", "admin"], "scope_roles": "contributor machine",
                       "realm_access": {"roles": ["archive"]}});
        assert_eq!(
            roles_of(&c, &path("roles")),
            [Role::Editor, Role::Admin].into_iter().collect()
        );
        assert_eq!(
            roles_of(&c, &path("scope_roles")),
            [Role::Contributor, Role::Machine].into_iter().collect()
        );
        assert_eq!(
            roles_of(&c, &path("realm_access.roles")),
            [Role::Archive].into_iter().collect()
        );
        assert!(roles_of(&c, &path("nothing.here")).is_empty());
        assert!(roles_of(&json!({"roles": 5}), &path("roles")).is_empty());
    }

    #[test]
    fn only_signing_keys_are_kept_and_a_bad_one_leaves_the_others() {
        let n = "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw";
        let set = signing_keys(json!({"keys": [
            {"kty": "RSA", "kid": "sig", "use": "sig", "alg": "RS256", "n": n, "e": "AQAB"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": n, "e": "AQAB"},
            {"kty": "RSA", "kid": "oaep", "alg": "RSA-OAEP", "n": n, "e": "AQAB"},
            {"kty": "OKP", "kid": "x", "crv": "X25519", "x": "AAAA"},
            {"kty": "nonsense"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
        ]}));
        let kids: Vec<_> = set
            .keys
            .iter()
            .filter_map(|k| k.common.key_id.clone())
            .collect();
        assert_eq!(kids, ["sig"]);
    }

    #[test]
    fn an_issuer_is_https_or_loopback_http() {
        assert!(check_issuer("https://login.example.org/realms/ddb").is_ok());
        assert!(check_issuer("http://127.0.0.1:4444").is_ok());
        assert!(check_issuer("http://localhost:4444").is_ok());
        assert!(check_issuer("http://login.example.org").is_err());
        assert!(check_issuer("ftp://127.0.0.1").is_err());
        assert!(check_issuer("not a url").is_err());
    }

    #[test]
    fn a_symmetric_key_verifies_nothing_and_a_named_algorithm_only_itself() {
        let jwk: jsonwebtoken::jwk::Jwk =
            serde_json::from_value(json!({"kty": "oct", "k": "c2VjcmV0", "alg": "HS256"})).unwrap();
        assert!(key_algorithms(&jwk).is_empty());
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(
            json!({"kty": "RSA", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB", "alg": "RS256"}),
        )
        .unwrap();
        assert_eq!(key_algorithms(&jwk), [Algorithm::RS256]);
    }
}
