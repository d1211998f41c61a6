//! Unit and property tests of `multipart`: the body of a GraphQL multipart
//! request is what any client sends, read here without a socket.

use std::io::Read;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::kernel::roles::Role;

const BOUNDARY: &str = "kartei-test-boundary";
const LIMITS: MultipartLimits = MultipartLimits {
    max_text_bytes: 2048,
    max_file_bytes: 1024,
    max_query_bytes: 2048,
};
const UPLOAD: &str = "mutation Up($file: Upload!, $n: Int) { upload(file: $file, n: $n) }";

/// One part: its name, its file name (a file part) and its bytes.
type Part = (String, Option<String>, Vec<u8>);

fn form(parts: &[Part]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, filename, data) in parts {
        let disposition = match filename {
            Some(f) => format!("form-data; name=\"{name}\"; filename=\"{f}\""),
            None => format!("form-data; name=\"{name}\""),
        };
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

fn content_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

fn caller() -> Principal {
    Principal::local("machine-1", &[Role::Machine])
}

/// Reads `body` as it arrives in `pieces` (cut at those offsets).
fn read_in_pieces(
    content_type: &str,
    body: Vec<u8>,
    cuts: &[usize],
    principal: &Principal,
) -> Result<Request, ApiError> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    at.sort_unstable();
    at.push(body.len());
    let mut pieces = Vec::new();
    let mut from = 0;
    for to in at {
        pieces.push(Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(
            &body[from..to],
        )));
        from = to;
    }
    let body = Body::from_stream(futures::stream::iter(pieces));
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(read(content_type, body, principal, &LIMITS))
}

fn read_whole(parts: &[Part], principal: &Principal) -> Result<Request, ApiError> {
    read_in_pieces(&content_type(), form(parts), &[], principal)
}

fn operations(query: &str, variables: serde_json::Value) -> Part {
    let doc = json!({"query": query, "variables": variables}).to_string();
    ("operations".into(), None, doc.into_bytes())
}

fn map(m: serde_json::Value) -> Part {
    ("map".into(), None, m.to_string().into_bytes())
}

fn file(name: &str, data: &[u8]) -> Part {
    (name.into(), Some("a.jpg".into()), data.to_vec())
}

/// A client error, never the server's: 400, 401 or 413.
fn client_error(e: &ApiError) -> bool {
    matches!(
        e,
        ApiError::BadUserInput(_) | ApiError::PayloadTooLarge(_) | ApiError::Unauthenticated
    )
}

#[test]
fn an_upload_is_read_into_its_variable() {
    let r = read_whole(
        &[
            operations(UPLOAD, json!({"file": null})),
            map(json!({"0": ["variables.file"]})),
            file("0", b"JPEG bytes"),
        ],
        &caller(),
    )
    .unwrap();
    assert_eq!(r.uploads.len(), 1);
    let mut content = String::new();
    r.uploads[0]
        .try_clone()
        .unwrap()
        .content
        .read_to_string(&mut content)
        .unwrap();
    assert_eq!(content, "JPEG bytes");
}

/// One file named by a hundred paths of its variable held a hundred
/// duplicated file descriptors (and uploads) for one request.
#[test]
fn a_file_named_by_more_paths_than_files_allowed_is_refused() {
    let paths = vec!["variables.file"; 100];
    let r = read_whole(
        &[
            operations(UPLOAD, json!({"file": null})),
            map(json!({"0": paths})),
            file("0", b"x"),
        ],
        &caller(),
    );
    assert!(matches!(r, Err(ApiError::PayloadTooLarge(_))), "{r:?}");
}

/// Parts as a client may send them: the fields in and out of order, names
/// and JSON right, wrong or missing.
fn part() -> impl Strategy<Value = Part> {
    let name = prop::sample::select(vec!["operations", "map", "0", "1", "file", ""]);
    let filename = prop::option::of(prop::sample::select(vec!["a.jpg", "", "../x"]));
    let data = prop_oneof![
        Just(json!({"query": UPLOAD, "variables": {"file": null}}).to_string().into_bytes()),
        Just(json!({"query": UPLOAD, "operationName": "Up", "variables": {"file": [null]}}).to_string().into_bytes()),
        Just(json!({"query": "{ portals { id } }"}).to_string().into_bytes()),
        Just(json!({"query": "mutation A($f: Upload) { a } mutation B { b }", "variables": {"f": null}}).to_string().into_bytes()),
        Just(json!({"0": ["variables.file"]}).to_string().into_bytes()),
        Just(json!({"0": ["variables.file.0"], "1": ["variables.n"]}).to_string().into_bytes()),
        Just(json!({"0": ["variables.file.99999999999999999999", "variables", "variables.", "file"]}).to_string().into_bytes()),
        Just(json!({"0": "variables.file"}).to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(any::<u8>(), 1000..1100),
        "[{}\\[\\]\":, a-z0-9.]{0,40}".prop_map(String::into_bytes),
    ];
    (name, filename, data).prop_map(|(n, f, d)| (n.to_owned(), f.map(str::to_owned), d))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..crate::kernel::proptest_config() })]

    /// Any sequence of parts, from any caller, cut into any pieces: a
    /// request, or a 400, 401 or 413, never a panic or a server error.
    #[test]
    fn any_form_is_a_request_or_a_client_error(
        parts in prop::collection::vec(part(), 0..6),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        signed_in in any::<bool>(),
    ) {
        let who = if signed_in { caller() } else { Principal::default() };
        match read_in_pieces(&content_type(), form(&parts), &cuts, &who) {
            Ok(r) => {
                prop_assert!(r.uploads.len() <= MAX_FILES);
                prop_assert!(signed_in || r.uploads.is_empty());
            }
            Err(e) => prop_assert!(client_error(&e), "{e:?}"),
        }
    }

    /// Any bytes under any content type: never a panic or a server error.
    #[test]
    fn any_bytes_are_a_request_or_a_client_error(
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            prop::collection::vec(part(), 0..4).prop_map(|p| {
                // A form cut short.
                let f = form(&p);
                f[..f.len() / 2].to_vec()
            }),
        ],
        ct in prop_oneof![
            Just(content_type()),
            "multipart/form-data; boundary=[ -~]{0,20}",
            "[ -~]{0,40}",
        ],
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        if let Err(e) = read_in_pieces(&ct, body, &cuts, &caller()) {
            prop_assert!(client_error(&e), "{e:?}");
        }
    }

    /// However the body arrives, an upload reads back byte for byte.
    #[test]
    fn an_upload_reads_back_as_sent(
        data in prop::collection::vec(any::<u8>(), 0..=1024),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let parts = [
            operations(UPLOAD, json!({"file": null})),
            map(json!({"0": ["variables.file"]})),
            file("0", &data),
        ];
        let r = read_in_pieces(&content_type(), form(&parts), &cuts, &caller()).unwrap();
        prop_assert_eq!(r.uploads.len(), 1);
        let mut back = Vec::new();
        r.uploads[0].try_clone().unwrap().content.read_to_end(&mut back).unwrap();
        prop_assert_eq!(back, data);
    }

    /// Files only from a caller with a token (else 401), only for Upload
    /// variables of the operation and only where `map` says (else 400),
    /// within the bounds (else 413).
    #[test]
    fn a_file_that_cannot_be_used_is_refused(defect in 0usize..6, extra in 1usize..1000) {
        let mut who = caller();
        let mut parts = vec![
            operations(UPLOAD, json!({"file": null, "n": 1})),
            map(json!({"0": ["variables.file"]})),
            file("0", b"x"),
        ];
        match defect {
            0 => who = Principal::default(),
            1 => parts[1] = map(json!({"0": ["variables.n"]})),
            2 => parts[2] = file("1", b"x"),
            3 => {
                let m: serde_json::Map<String, serde_json::Value> = (0..=MAX_FILES)
                    .map(|i| (i.to_string(), json!(["variables.file"])))
                    .collect();
                parts[1] = map(serde_json::Value::Object(m));
            }
            4 => parts[2] = file("0", &vec![0; 1024 + extra]),
            _ => parts[0] = operations(&format!("{UPLOAD} #{}", "x".repeat(2048 + extra)), json!({})),
        }
        let r = read_whole(&parts, &who);
        let fits = match defect {
            0 => matches!(r, Err(ApiError::Unauthenticated)),
            1 | 2 => matches!(r, Err(ApiError::BadUserInput(_))),
            _ => matches!(r, Err(ApiError::PayloadTooLarge(_))),
        };
        prop_assert!(fits, "defect {}: {:?}", defect, r);
    }
}

/// A token without an uploader's role sends no file: refused before any
/// part is spooled (it is 403, as the mutation would be).
#[test]
fn a_caller_who_may_not_upload_sends_no_file() {
    let parts = [
        operations(UPLOAD, json!({"file": null})),
        map(json!({"0": ["variables.file"]})),
        file("0", b"x"),
    ];
    for roles in [&[][..], &[Role::Editor][..]] {
        let r = read_whole(&parts, &Principal::local("reader", roles));
        assert!(matches!(r, Err(ApiError::Forbidden(_))), "{roles:?}: {r:?}");
    }
}
