//! Bearer tokens. First byte even: the rest is the `Authorization` header,
//! which is never accepted (the fuzzer holds no key). Odd: the rest is a
//! claims document signed with the server's secret (a client with a
//! token-minting key), which gives a principal with a named subject or
//! INVALID_TOKEN.
#![no_main]

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey};
use kartei::edge::auth::Auth;
use kartei::kernel::error::ApiError;
use libfuzzer_sys::fuzz_target;

const SECRET: &[u8] = b"the fuzzer's secret, 32 bytes...";

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let auth = Auth::hs256(SECRET).expect("a 32-byte secret");
    if mode % 2 == 0 {
        let r = auth.principal(Some(text));
        assert!(
            matches!(r, Err(ApiError::InvalidToken(_))),
            "{text:?}: {r:?}"
        );
        return;
    }
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let unsigned = format!("{}.{}", b64(br#"{"alg":"HS256","typ":"JWT"}"#), b64(rest));
    let key = EncodingKey::from_secret(SECRET);
    let signature = jsonwebtoken::crypto::sign(unsigned.as_bytes(), &key, Algorithm::HS256)
        .expect("HS256 signs");
    match auth.principal(Some(&format!("Bearer {unsigned}.{signature}"))) {
        Ok(p) => assert!(p.sub.is_some_and(|s| !s.trim().is_empty())),
        Err(e) => assert!(matches!(e, ApiError::InvalidToken(_)), "{e:?}"),
    }
});
