//! Unit and property tests of `auth`: the `Authorization` header and the
//! claims of a bearer token are what any client sends.

use jsonwebtoken::{EncodingKey, Header};
use proptest::prelude::*;
use serde_json::json;

use super::*;

const SECRET: &[u8] = b"a secret of the test, 32 bytes..";

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// A token signed with `secret` (HS256 unless `alg` says otherwise) over any claims.
fn signed(claims: &serde_json::Value, alg: Algorithm, secret: &[u8]) -> String {
    jsonwebtoken::encode(&Header::new(alg), claims, &EncodingKey::from_secret(secret)).unwrap()
}

fn refused(r: Result<Principal, ApiError>) -> bool {
    matches!(r, Err(ApiError::InvalidToken(_)))
}

const ROLE_NAMES: [&str; 5] = ["contributor", "archive", "machine", "editor", "admin"];

fn role_names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(ROLE_NAMES.to_vec()).prop_map(String::from),
            1 => "[a-zA-Z:_-]{0,10}",
        ],
        0..6,
    )
}

/// What a client may put into the `Authorization` header.
fn header_text() -> impl Strategy<Value = String> {
    let segment = "[A-Za-z0-9_-]{0,40}";
    prop_oneof![
        any::<String>(),
        "(Bearer|bearer|Basic|BEARER) ?.{0,40}",
        (segment, segment, segment).prop_map(|(a, b, c)| format!("Bearer {a}.{b}.{c}")),
        ".{0,30}".prop_map(|doc| {
            let b64 = |s: &str| {
                base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, s)
            };
            format!(
                "Bearer {}.{}.",
                b64(r#"{"alg":"HS256","typ":"JWT"}"#),
                b64(&doc)
            )
        }),
    ]
}

#[test]
fn no_header_is_an_anonymous_reader() {
    let p = Auth::hs256(SECRET).unwrap().principal(None).unwrap();
    assert!(p.sub.is_none() && p.roles.is_empty());
}

/// Found by `minting_never_overflows`: `now + valid_secs` overflowed (a
/// panic in a debug build, a token expired long ago in a release build).
#[test]
fn a_token_valid_for_ever_expires_at_the_end_of_time() {
    let auth = Auth::hs256(SECRET).unwrap();
    let token = auth.mint("ed", &["editor".into()], u64::MAX).unwrap();
    let p = auth.principal(Some(&format!("Bearer {token}"))).unwrap();
    assert!(p.has(Role::Editor));
}

#[test]
fn tokens_of_another_algorithm_or_none_are_refused() {
    let auth = Auth::hs256(SECRET).unwrap();
    let claims = json!({"sub": "ed", "roles": ["admin"], "exp": now() + 600});
    for alg in [Algorithm::HS384, Algorithm::HS512] {
        assert!(refused(auth.principal(Some(&format!(
            "Bearer {}",
            signed(&claims, alg, SECRET)
        )))));
    }
    // `alg: none` with an empty signature.
    let b64 =
        |s: &str| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, s);
    let none = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(&claims.to_string())
    );
    assert!(refused(auth.principal(Some(&format!("Bearer {none}")))));
}

proptest! {
    #![proptest_config(crate::kernel::proptest_config())]

    /// Any header: a principal only from a token this server signed, else
    /// INVALID_TOKEN (401), never a panic.
    #[test]
    fn any_authorization_header_is_refused_unless_signed(h in header_text()) {
        let r = Auth::hs256(SECRET).unwrap().principal(Some(&h));
        prop_assert!(refused(r), "{h}");
    }

    #[test]
    fn a_minted_token_reads_back_as_its_subject_and_known_roles(
        sub in "\\PC{1,30}",
        roles in prop::collection::vec(prop::sample::select(ROLE_NAMES.to_vec()), 0..5),
        valid in 60u64..10_000_000,
        bearer in prop::sample::select(vec!["Bearer ", "bearer "]),
        pad in "[ \t]{0,2}",
    ) {
        prop_assume!(!sub.trim().is_empty());
        let auth = Auth::hs256(SECRET).unwrap();
        let roles: Vec<String> = roles.into_iter().map(String::from).collect();
        let token = auth.mint(&sub, &roles, valid).unwrap();
        let p = auth.principal(Some(&format!("{bearer}{pad}{token}{pad}"))).unwrap();
        prop_assert_eq!(p.sub.as_deref(), Some(sub.as_str()));
        let want: BTreeSet<Role> = roles.iter().filter_map(|r| Role::parse(r)).collect();
        prop_assert_eq!(p.roles, want);
    }

    /// Roles of other services ride along in a token and are ignored.
    #[test]
    fn unknown_roles_are_ignored(sub in "[a-z]{1,8}", roles in role_names()) {
        let claims = json!({"sub": sub, "roles": roles, "exp": now() + 600});
        let token = signed(&claims, Algorithm::HS256, SECRET);
        let p = Auth::hs256(SECRET).unwrap().principal(Some(&format!("Bearer {token}"))).unwrap();
        let want: BTreeSet<Role> = roles.iter().filter_map(|r| Role::parse(r)).collect();
        prop_assert_eq!(p.roles, want);
    }

    /// A token with any one character changed, cut short, or signed with
    /// another secret is refused.
    #[test]
    fn a_tampered_token_is_refused(
        sub in "[a-z]{1,8}",
        roles in role_names(),
        at in any::<prop::sample::Index>(),
        with in prop::sample::select(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/".to_vec()
        ),
        cut in any::<prop::sample::Index>(),
        other in prop::collection::vec(any::<u8>(), 16..40),
    ) {
        let auth = Auth::hs256(SECRET).unwrap();
        let claims = json!({"sub": sub, "roles": roles, "exp": now() + 600});
        let token = signed(&claims, Algorithm::HS256, SECRET);
        let mut bytes = token.clone().into_bytes();
        let i = at.index(bytes.len());
        prop_assume!(bytes[i] != with);
        bytes[i] = with;
        let forged = String::from_utf8(bytes).unwrap();
        prop_assert!(refused(auth.principal(Some(&format!("Bearer {forged}")))), "{token} -> {forged}");
        let short = &token[..cut.index(token.len())];
        prop_assert!(refused(auth.principal(Some(&format!("Bearer {short}")))), "{short}");
        prop_assume!(other.as_slice() != SECRET);
        let foreign = signed(&claims, Algorithm::HS256, &other);
        let foreign = format!("Bearer {foreign}");
        prop_assert!(refused(auth.principal(Some(&foreign))), "{foreign}");
    }

    /// Claims are what the client signs with a key it holds (or a leaked
    /// one): whatever their shape, the answer is a principal with a named
    /// subject, or INVALID_TOKEN.
    #[test]
    fn any_signed_claims_are_a_named_principal_or_refused(
        sub in prop_oneof![
            Just(json!(null)), Just(json!("")), Just(json!("  ")), Just(json!(7)),
            "\\PC{0,12}".prop_map(|s| json!(s)),
        ],
        roles in prop_oneof![
            Just(json!(null)), Just(json!("admin")), Just(json!([1, 2])),
            role_names().prop_map(|r| json!(r)),
        ],
        exp in prop_oneof![
            Just(None),
            Just(Some(json!(-1))),
            Just(Some(json!("tomorrow"))),
            Just(Some(json!(1.5))),
            (0u64..now()).prop_map(|e| Some(json!(e))),
            (now() + 120..=u64::MAX).prop_map(|e| Some(json!(e))),
        ],
        huge in any::<bool>(),
    ) {
        let mut doc = serde_json::Map::new();
        if !sub.is_null() {
            doc.insert("sub".into(), sub.clone());
        }
        if !roles.is_null() {
            doc.insert("roles".into(), roles.clone());
        }
        if let Some(e) = &exp {
            doc.insert("exp".into(), e.clone());
        }
        let mut token = signed(&serde_json::Value::Object(doc), Algorithm::HS256, SECRET);
        if huge {
            // An expiry past u64, signed: the JSON is built by hand.
            let body = format!(r#"{{"sub":"ed","exp":99999999999999999999{}}}"#, "9".repeat(5));
            let b64 = |s: &str| base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD, s
            );
            let unsigned = format!("{}.{}", b64(r#"{"alg":"HS256","typ":"JWT"}"#), b64(&body));
            let key = EncodingKey::from_secret(SECRET);
            let signature = jsonwebtoken::crypto::sign(unsigned.as_bytes(), &key, Algorithm::HS256).unwrap();
            token = format!("{unsigned}.{signature}");
        }
        let r = Auth::hs256(SECRET).unwrap().principal(Some(&format!("Bearer {token}")));
        match r {
            Ok(p) => {
                prop_assert!(!huge);
                let named = sub.as_str().is_some_and(|s| !s.trim().is_empty());
                prop_assert!(named && p.sub.as_deref() == sub.as_str());
                let valid_exp = exp.as_ref().and_then(|e| e.as_u64()).is_some_and(|e| e > now());
                prop_assert!(valid_exp, "{exp:?}");
                prop_assert!(roles.is_null() || roles.is_array());
            }
            Err(e) => prop_assert!(matches!(e, ApiError::InvalidToken(_)), "{e:?}"),
        }
    }

    #[test]
    fn minting_never_overflows(valid in prop_oneof![any::<u64>(), u64::MAX - 1_000..=u64::MAX]) {
        let auth = Auth::hs256(SECRET).unwrap();
        let token = auth.mint("ed", &[], valid).unwrap();
        let p = auth.principal(Some(&format!("Bearer {token}")));
        // Valid for at least a minute (the leeway) or longer: always accepted.
        prop_assert!(p.is_ok(), "{valid}: {p:?}");
    }
}
