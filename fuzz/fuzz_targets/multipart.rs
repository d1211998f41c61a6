//! GraphQL multipart requests: any body (under a fixed boundary, from a
//! caller with or without a token, arriving in pieces) is a request or a
//! 400/401/413, never a panic or a server error.
#![no_main]

use std::sync::OnceLock;

use axum::body::Body;
use kartei::kernel::roles::{Principal, Role};
use kartei::kernel::error::ApiError;
use kartei::edge::multipart::{MAX_FILES, MultipartLimits, read};
use libfuzzer_sys::fuzz_target;

const LIMITS: MultipartLimits = MultipartLimits {
    max_text_bytes: 4096,
    max_file_bytes: 4096,
    max_query_bytes: 4096,
};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let who = if flags & 1 == 1 {
        Principal::local("fuzzer", &[Role::Machine])
    } else {
        Principal::default()
    };
    // Pieces of `step` bytes (0: the whole body at once).
    let step = usize::from(flags >> 1);
    let pieces: Vec<Result<bytes::Bytes, std::io::Error>> = if step == 0 {
        vec![Ok(bytes::Bytes::copy_from_slice(body))]
    } else {
        body.chunks(step)
            .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
            .collect()
    };
    let body = Body::from_stream(futures::stream::iter(pieces));
    let ct = "multipart/form-data; boundary=X";
    match runtime().block_on(read(ct, body, &who, &LIMITS)) {
        Ok(r) => {
            assert!(r.uploads.len() <= MAX_FILES);
            assert!(who.sub.is_some() || r.uploads.is_empty());
        }
        // A file part from a caller without a token is a 401 (before a
        // byte of it is spooled).
        Err(ApiError::Unauthenticated) => assert!(who.sub.is_none()),
        Err(e) => assert!(
            matches!(e, ApiError::BadUserInput(_) | ApiError::PayloadTooLarge(_)),
            "{e:?}"
        ),
    }
});
