//! Tokens and the secret that signs them, tried as an attacker would: a
//! secret the server must refuse, tokens past their time, tokens of the
//! wrong issuer or audience, and a socket kept open past its token.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::cli::kartei;
use crate::live::{connect, subscribe};
use crate::support::{Engine, SECRET, server};

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// A token over `claims`, signed with the test servers' secret.
fn signed(claims: Value) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

/// The answer of `kartei serve` on a data directory whose `auth-secret`
/// holds `content`: it must refuse to start (exit 2) and say how to make a
/// secret, and leave the file as it was.
#[test]
fn an_empty_or_short_secret_file_refuses_to_start() {
    for content in ["", "  \n\t ", "0123456789abcdef0123456789abcde"] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auth-secret");
        std::fs::write(&file, content).unwrap();
        let out = kartei()
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{content:?}: {stderr}");
        assert!(
            stderr.contains("at least 32") && stderr.contains("/dev/urandom"),
            "{stderr}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), content);
    }
    // The same rule for the secret given by the environment.
    let dir = tempfile::tempdir().unwrap();
    let out = kartei()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("KARTEI_AUTH_SECRET", "short-but-not-empty")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("KARTEI_AUTH_SECRET"), "{stderr}");
}

/// A secret the server cannot read is an error; it never makes a new one
/// in its place (which would end every token issued).
#[test]
fn an_unreadable_secret_file_is_an_error_and_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("auth-secret");
    // A directory in the file's place: reading it fails (the tests run as
    // root, for whom file modes do not stop a read).
    std::fs::create_dir(&file).unwrap();
    let out = kartei()
        .args(["token", "--subject", "x", "--role", "admin", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot read the token secret"), "{stderr}");
    assert!(file.is_dir(), "the unreadable secret stays where it was");
}

/// A secret the server makes is whole (64 hex digits), readable by its
/// owner only, and no temporary file is left beside it; the next command
/// reads the same secret.
#[test]
fn a_new_secret_is_written_whole_and_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mint = || {
        let out = kartei()
            .args([
                "token",
                "--subject",
                "anna",
                "--role",
                "editor",
                "--ttl",
                "1h",
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let token = mint();
    let file = dir.path().join("auth-secret");
    let secret = std::fs::read_to_string(&file).unwrap();
    assert!(
        secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()),
        "{secret:?}"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["auth-secret"]);
    let auth = kartei::edge::auth::Auth::hs256(secret.as_bytes()).unwrap();
    let p = auth.principal(Some(&format!("Bearer {token}"))).unwrap();
    assert_eq!(p.sub.as_deref(), Some("anna"));
    let again = mint();
    assert!(auth.principal(Some(&format!("Bearer {again}"))).is_ok());
}

/// The lines `kartei serve` writes to stderr until it says where it
/// listens; the server is stopped then.
fn start_up_lines(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = kartei()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--crawl",
            "off",
            "--data-dir",
        ])
        .arg(dir.path())
        .args(args)
        .env("KARTEI_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = String::new();
    for line in BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        lines.push_str(&line);
        lines.push('\n');
        if line.starts_with("kartei serves on") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

/// Every start without `--demo` printed a fresh 30-day admin token into
/// the server's log; only the demo prints one now.
#[test]
fn serve_prints_an_admin_token_only_for_the_demo() {
    let plain = start_up_lines(&[]);
    assert!(plain.contains("kartei serves on"), "{plain}");
    assert!(!plain.contains("Bearer"), "{plain}");
    let demo = start_up_lines(&["--demo"]);
    assert!(demo.contains("Bearer ey"), "{demo}");
}

/// The token library's default leeway kept an expired token good for a
/// minute; a token before its `nbf` was not checked at all. The leeway is
/// `--token-leeway` (5 s by default).
async fn an_expired_or_not_yet_valid_token_is_refused(engine: Engine) {
    let srv = server(engine).await;
    let query = "{ viewer { subject } }";
    let status = |token: String| {
        let srv = &srv;
        async move {
            srv.client
                .post(format!("{}/graphql", srv.url))
                .bearer_auth(token)
                .json(&json!({ "query": query }))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let claims = |exp: u64, nbf: Option<u64>| {
        let mut c = json!({"sub": "ed", "roles": ["editor"], "exp": exp});
        if let Some(n) = nbf {
            c["nbf"] = json!(n);
        }
        signed(c)
    };
    assert_eq!(status(claims(now() + 600, None)).await, 200);
    assert_eq!(
        status(claims(now() - 20, None)).await,
        401,
        "expired 20 s ago"
    );
    assert_eq!(
        status(claims(now() + 600, Some(now() + 120))).await,
        401,
        "not before 2 min"
    );
    assert_eq!(status(claims(now() + 600, Some(now() - 1))).await, 200);
}

/// A token was checked only at `connection_init`: a socket kept open ran
/// operations 67 s after it expired. Now the socket is closed with 4403
/// when the token expires (its leeway passed), and its subscriptions end.
async fn an_expired_token_closes_its_socket_with_4403(engine: Engine) {
    let srv = server(engine).await;
    let token = signed(json!({"sub": "ed", "roles": ["editor"], "exp": now() + 1}));
    let (mut ws, acked) = connect(&srv.url, Some(&token)).await;
    assert!(acked);
    subscribe(
        &mut ws,
        "1",
        "subscription { assignmentChanged(portalId: \"p\") { id } }",
        json!({}),
    )
    .await;
    // The token is good for its second and the 5 s leeway; then the close.
    let close = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(m) = ws.next().await {
            match m {
                Ok(Message::Close(frame)) => return frame,
                Ok(_) => continue,
                Err(e) => panic!("the socket failed instead of closing: {e}"),
            }
        }
        panic!("the socket ended without a close frame")
    })
    .await
    .expect("closed within 30 s");
    let frame = close.expect("a close frame with a code");
    assert_eq!(u16::from(frame.code), 4403, "{frame:?}");
    assert!(frame.reason.contains("expired"), "{frame:?}");
}

/// In RS256 mode the server verifies tokens another service signs; with
/// `--auth-issuer` and `--auth-audience` set, a token must name both
/// (before, neither was required nor checked).
#[test]
fn rs256_tokens_must_name_the_configured_issuer_and_audience() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let private = std::fs::read(format!("{dir}/rs256-test-private.pem")).unwrap();
    let key = EncodingKey::from_rsa_pem(&private).unwrap();
    let args = kartei::edge::auth::AuthArgs {
        auth_public_key: Some(format!("{dir}/rs256-test-public.pem").into()),
        auth_issuer: Some("https://login.example.org".into()),
        auth_audience: Some("kartei".into()),
        ..Default::default()
    };
    let auth = kartei::edge::auth::Auth::from_args(&args, None).unwrap();
    let token = |extra: Value| {
        let mut c = json!({"sub": "ed", "roles": ["editor"], "exp": now() + 600});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let t = jsonwebtoken::encode(&Header::new(Algorithm::RS256), &c, &key).unwrap();
        auth.principal(Some(&format!("Bearer {t}")))
    };
    let good = json!({"iss": "https://login.example.org", "aud": "kartei"});
    assert!(token(good).is_ok());
    for bad in [
        json!({}),
        json!({"iss": "https://login.example.org"}),
        json!({"aud": "kartei"}),
        json!({"iss": "https://evil.example.org", "aud": "kartei"}),
        json!({"iss": "https://login.example.org", "aud": "another-service"}),
    ] {
        let r = token(bad.clone());
        assert!(
            matches!(r, Err(kartei::kernel::error::ApiError::InvalidToken(_))),
            "{bad}: {r:?}"
        );
    }
    // A token signed with the HS256 test secret is not one of the issuer's.
    let forged = signed(json!({"sub": "ed", "roles": ["admin"], "exp": now() + 600,
        "iss": "https://login.example.org", "aud": "kartei"}));
    assert!(auth.principal(Some(&format!("Bearer {forged}"))).is_err());
}

crate::both_engines!(
    an_expired_or_not_yet_valid_token_is_refused,
    an_expired_token_closes_its_socket_with_4403,
);

/// Sign-in with an OpenID Connect provider (here a small one serving its
/// discovery document and keys over real HTTP): its ID tokens are verified
/// with its published key, for the configured client, in time, with the
/// roles of the configured claim; anything else is refused, and kartei's own
/// tokens keep working beside them.
#[test]
fn oidc_id_tokens_are_verified_with_the_providers_published_keys() {
    crate::support::run(async {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
        let jwks: Value =
            serde_json::from_slice(&std::fs::read(format!("{dir}/rs256-test-jwks.json")).unwrap())
                .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let discovery = json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/auth"),
            "token_endpoint": format!("{issuer}/token"),
            "jwks_uri": format!("{issuer}/jwks"),
        });
        let provider = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(move || async move { axum::Json(discovery) }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || async move { axum::Json(jwks) }),
            );
        tokio::spawn(async move { axum::serve(listener, provider).await });

        let args = kartei::edge::oidc::OidcArgs {
            oidc_issuer: Some(issuer.clone()),
            oidc_client_id: Some("kartei-ui".into()),
            oidc_roles_claim: "realm_access.roles".into(),
            ..Default::default()
        };
        let oidc = kartei::edge::oidc::Oidc::discover(&args, 5).await.unwrap();
        let auth = kartei::edge::auth::Auth::hs256(SECRET.as_bytes())
            .unwrap()
            .with_oidc(oidc.clone());
        assert_eq!(oidc.ui_config()["tokenEndpoint"], format!("{issuer}/token"));

        let key = EncodingKey::from_rsa_pem(
            &std::fs::read(format!("{dir}/rs256-test-private.pem")).unwrap(),
        )
        .unwrap();
        let header = |kid: &str| {
            let mut h = Header::new(Algorithm::RS256);
            h.kid = Some(kid.into());
            h
        };
        let claims = |extra: Value| {
            let mut c = json!({"sub": "olga", "iss": issuer, "aud": "kartei-ui", "exp": now() + 600,
                               "realm_access": {"roles": ["editor", "someone-elses"]}});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            c
        };
        let check = |t: &str| auth.principal(Some(&format!("Bearer {t}")));

        let good = jsonwebtoken::encode(&header("k1"), &claims(json!({})), &key).unwrap();
        let p = check(&good).unwrap();
        assert_eq!(p.sub.as_deref(), Some("olga"));
        assert_eq!(
            p.roles,
            [kartei::kernel::roles::Role::Editor].into_iter().collect()
        );
        // An audience list that names the client is fine.
        let listed = claims(json!({"aud": ["other", "kartei-ui"]}));
        assert!(check(&jsonwebtoken::encode(&header("k1"), &listed, &key).unwrap()).is_ok());

        for (why, extra, kid) in [
            ("another client", json!({"aud": "another-client"}), "k1"),
            ("expired", json!({"exp": now() - 60}), "k1"),
            ("not yet valid", json!({"nbf": now() + 600}), "k1"),
            ("empty subject", json!({"sub": " "}), "k1"),
            ("a key the provider does not publish", json!({}), "k2"),
        ] {
            let t = jsonwebtoken::encode(&header(kid), &claims(extra), &key).unwrap();
            assert!(
                matches!(
                    check(&t),
                    Err(kartei::kernel::error::ApiError::InvalidToken(_))
                ),
                "{why}"
            );
        }
        // Altered after signing.
        let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut c: Value = serde_json::from_slice(&b64.decode(&parts[1]).unwrap()).unwrap();
        c["realm_access"]["roles"] = json!(["admin"]);
        parts[1] = b64.encode(serde_json::to_vec(&c).unwrap());
        assert!(check(&parts.join(".")).is_err(), "altered claims");
        // HS256 "signed" with the provider's public key (algorithm confusion),
        // and with kartei's own secret, naming the provider as issuer.
        let public = std::fs::read(format!("{dir}/rs256-test-public.pem")).unwrap();
        for secret in [public.as_slice(), SECRET.as_bytes()] {
            let mut h = Header::new(Algorithm::HS256);
            h.kid = Some("k1".into());
            let t = jsonwebtoken::encode(&h, &claims(json!({})), &EncodingKey::from_secret(secret))
                .unwrap();
            assert!(check(&t).is_err(), "HS256 under the provider's name");
        }
        // kartei's own tokens work beside the provider's.
        let own = signed(json!({"sub": "ed", "roles": ["admin"], "exp": now() + 600}));
        assert!(check(&own).is_ok());
    });
}
