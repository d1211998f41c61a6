//! Each defect a probe found, with a variant, against the real binary: a
//! typed answer at a bounded cost.

use std::io::Cursor;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{
    TIME_BOUND, code, form, jpeg, push_raw, refused, settled, start, trickle_origin, upload,
};
use crate::support::{doubling_fragments, run};

#[test]
fn hostile_inputs_get_bounded_typed_answers() {
    run(async {
        let srv = start(&[]).await;
        let admin = srv.token("probe-admin", &["admin"]);

        // D1: each fragment spreads the previous one twice (2^29 field visits).
        srv.case("D1 fragment fan-out", async {
            let q = format!(
                "{{portals{{...F29}}}} {}",
                doubling_fragments("Category", "id label", 30)
            );
            let (_, r) = srv.gql(&q, None).await;
            assert_eq!(code(&r), "BAD_USER_INPUT", "{r}");
            assert!(
                r["errors"][0]["message"]
                    .as_str()
                    .unwrap()
                    .contains("expanded")
            );
        })
        .await;
        srv.case("D1 variant: three-way fan-out through inline fragments", async {
            let mut q = String::from("{portals{...G19}} fragment G0 on Category{id children{id}}");
            for i in 1..20 {
                let p = i - 1;
                q.push_str(&format!(
                    " fragment G{i} on Category{{...on Category{{...G{p}}} a{i}: children{{...G{p}}} ...G{p}}}"
                ));
            }
            let (_, r) = srv.gql(&q, None).await;
            assert_eq!(code(&r), "BAD_USER_INPUT", "{r}");
        })
        .await;

        // A list value nested 30,000 deep: the parser recursed once per
        // bracket and overflowed the stack (the process aborted). Refused
        // before parsing, over POST and GET alike.
        srv.case("deeply nested list values", async {
            let q = format!(
                "{{ portals(x: {}1{}) {{ id }} }}",
                "[".repeat(30_000),
                "]".repeat(30_000)
            );
            let (_, r) = srv.gql(&q, None).await;
            refused(&r, "nests brackets");
            let q = format!(
                "{{ portals(x: {}1{}) {{ id }} }}",
                "[".repeat(200),
                "]".repeat(200)
            );
            let r = srv
                .client
                .get(format!("{}/graphql", srv.url))
                .query(&[("query", &q)])
                .send()
                .await
                .unwrap();
            assert_eq!(code(&r.json().await.unwrap()), "BAD_USER_INPUT");
        })
        .await;
        // Query text past --max-query-bytes (64 KiB) is refused unparsed: a
        // 1 MiB document of directives or arguments cost hundreds of MB of
        // validation errors, or hours of validation.
        srv.case("query text longer than its limit", async {
            let q = format!("{{ __typename {} }}", "@a ".repeat(100_000));
            let (_, r) = srv.gql(&q, None).await;
            refused(&r, "the limit is 65536");
        })
        .await;
        // Arguments and directives count toward the expanded size: a fragment
        // of 6,000 arguments spread four times is 24,000 steps of validation.
        srv.case("arguments multiplied by fragment spreads", async {
            let args: Vec<_> = (0..3000).map(|i| format!("b{i}:0")).collect();
            let field = format!("a: __typename({})", args.join(","));
            let q = format!("{{ ...F ...F ...F ...F }} fragment F on Query {{ {field} {field} }}");
            assert!(q.len() < 64 << 10);
            let (_, r) = srv.gql(&q, None).await;
            refused(&r, "expanded");
        })
        .await;

        // D2: a 200 MB `operations` field, and files nobody may send.
        srv.case("D2 oversized operations field", async {
            let boundary = "hostile-d2";
            let head = format!(
                "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: 200000100\r\n\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n{{\"query\":\"{{portals{{id}}}}\",\"variables\":{{\"p\":\""
            );
            let (answer, sent) = push_raw(srv.addr, &head, 200_000_000, b'p').await;
            assert!(
                answer.starts_with("HTTP/1.1 413") || sent < 200_000_000,
                "refused: {answer:.200} after {sent} bytes"
            );
            assert!(srv.spool_is_empty());
        })
        .await;
        srv.case("D2 variant: an anonymous file part", async {
            let ops = br#"{"query":"mutation($f: Upload!) { uploadBinary(file: $f, context: \"c\") { referenceId } }","variables":{"f":null}}"#;
            let (ct, body) = form(&[
                ("operations", None, ops),
                ("map", None, br#"{"0":["variables.f"]}"#),
                ("0", Some("x.jpg"), &vec![0xAB; 4 << 20]),
            ]);
            let r = srv.client.post(format!("{}/graphql", srv.url)).header("content-type", ct).body(body).send().await;
            if let Ok(r) = r {
                assert_eq!(r.status().as_u16(), 401);
                assert_eq!(code(&r.json().await.unwrap()), "UNAUTHENTICATED");
            }
            assert!(srv.spool_is_empty(), "nothing was spooled");
        })
        .await;
        srv.case("D2 variant: a file for an operation without an Upload variable", async {
            let (ct, body) = form(&[
                ("operations", None, br#"{"query":"query($f: String) { portals { id } }","variables":{"f":null}}"#),
                ("map", None, br#"{"0":["variables.f"]}"#),
                ("0", Some("x.jpg"), &vec![0xAB; 4 << 20]),
            ]);
            let r = srv.client.post(format!("{}/graphql", srv.url)).bearer_auth(&admin).header("content-type", ct).body(body).send().await;
            if let Ok(r) = r {
                assert_eq!(r.status().as_u16(), 400);
                assert_eq!(code(&r.json().await.unwrap()), "BAD_USER_INPUT");
            }
            assert!(srv.spool_is_empty(), "nothing was spooled");
        })
        .await;

        // D7: a 200 MB context field (here 20 MB: the bound is 4 KiB).
        srv.case("D7 oversized upload context", async {
            let (status, r) = upload(&srv, &admin, &vec![b'c'; 20 << 20], &jpeg(8, 8)).await;
            assert!(status == 413 || status == 0, "{status} {r}");
            if status == 413 {
                assert_eq!(code(&r), "PAYLOAD_TOO_LARGE");
            }
        })
        .await;

        // Not an image: refused from its first bytes, not after storing 8 MB.
        srv.case("an upload that is not an image", async {
            let (status, r) = upload(&srv, &admin, b"ctx", &vec![b'<'; 8 << 20]).await;
            assert!(status == 400 || status == 0, "{status} {r}");
        })
        .await;

        // A token with an empty subject would record writes as nobody's.
        srv.case("a signed token with an empty sub", async {
            let (status, r) = srv
                .gql("{ portals { id } }", Some(&srv.token("", &["admin"])))
                .await;
            assert_eq!((status, code(&r)), (401, "UNAUTHENTICATED"), "{r}");
            let (status, _) = srv
                .gql("{ portals { id } }", Some(&srv.token("  ", &["admin"])))
                .await;
            assert_eq!(status, 401);
        })
        .await;

        // D3: arbitrary rotation must not push the output past the caps.
        let (status, r) = upload(&srv, &admin, b"d3", &jpeg(320, 240)).await;
        assert_eq!(status, 201, "{r}");
        let reference = r["referenceId"].as_str().unwrap().to_owned();
        assert_eq!(settled(&srv, &reference, TIME_BOUND).await["status"], "OK");
        srv.case("D3 rotation past the size caps", async {
            for rotation in ["30", "45", "!100"] {
                let r = srv
                    .client
                    .get(format!(
                        "{}/iiif/3/{reference}/full/^10000,4000/{rotation}/default.png",
                        srv.url
                    ))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 400, "rotation {rotation}");
            }
            // 90 degrees only swaps the sides: still within the caps (and small to compute).
            let r = srv
                .client
                .get(format!(
                    "{}/iiif/3/{reference}/full/^640,/90/default.jpg",
                    srv.url
                ))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
        })
        .await;

        // D4: a download that trickles must not hold up an upload, and must end.
        let slow = trickle_origin().await;
        let r = srv
            .client
            .put(format!("{}/binaries", srv.url))
            .bearer_auth(&admin)
            .json(&json!({"url": slow, "context": "d4"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 202);
        let slow_ref = r.json::<Value>().await.unwrap()["referenceId"]
            .as_str()
            .unwrap()
            .to_owned();
        srv.case("D4 an upload beside a trickling download", async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (status, r) = upload(&srv, &admin, b"d4", &jpeg(300, 200)).await;
            assert_eq!(status, 201, "{r}");
            let fresh = r["referenceId"].as_str().unwrap();
            assert_eq!(settled(&srv, fresh, TIME_BOUND).await["status"], "OK");
        })
        .await;
        srv.case("D4 the trickling download ends at its deadline", async {
            let b = settled(&srv, &slow_ref, TIME_BOUND).await;
            assert_eq!(b["status"], "ERROR", "{b}");
            assert!(
                b["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("longer than 4 s"),
                "{b}"
            );
        })
        .await;

        // D6: half-sent heads are closed at the header timeout (2 s here).
        srv.case("D6 half-sent request heads", async {
            let mut open = Vec::new();
            for _ in 0..50 {
                let mut s = TcpStream::connect(srv.addr).await.unwrap();
                s.write_all(b"POST /graphql HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    .await
                    .unwrap();
                open.push(s);
            }
            for mut s in open {
                let mut buf = [0u8; 256];
                let n = tokio::time::timeout(Duration::from_secs(6), s.read(&mut buf)).await;
                assert!(
                    matches!(n, Ok(Ok(_)) | Ok(Err(_))),
                    "closed by the server, not left open"
                );
            }
        })
        .await;
        srv.case("D6 variant: a body announced as 100 GB", async {
            let head = "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n";
            let (answer, _) = push_raw(srv.addr, head, 0, b' ').await;
            assert!(answer.starts_with("HTTP/1.1 413"), "{answer:.200}");
        })
        .await;
        srv.case("D6 variant: a body that stops arriving", async {
            let head = "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"query\":";
            let (answer, _) = push_raw(srv.addr, head, 0, b' ').await;
            assert!(answer.starts_with("HTTP/1.1 408"), "{answer:.200}");
        })
        .await;
        drop(srv);

        // D6: a connection bound, and the decode budget, on a server of their own.
        let srv = start(&["--max-connections", "8", "--max-decode-bytes", "33554432"]).await;
        let admin = srv.token("probe-admin", &["admin"]);
        srv.case(
            "D6 variant: more idle connections than --max-connections",
            async {
                let mut idle = Vec::new();
                for _ in 0..8 {
                    idle.push(TcpStream::connect(srv.addr).await.unwrap());
                }
                // The ninth waits in the backlog until the header timeout frees a slot.
                let started = Instant::now();
                let (status, _) = srv.gql("{ portals { id } }", None).await;
                assert_eq!(status, 200);
                // (No pooled connection held a slot before: the client keeps none.)
                assert!(
                    started.elapsed() >= Duration::from_millis(1500),
                    "waited for a slot"
                );
                drop(idle);
            },
        )
        .await;
        srv.case("a decode larger than --max-decode-bytes", async {
            // 3000 x 3000 RGBA: 36 MB of pixels, about 100 MB to decode and convert.
            let img = image::RgbaImage::from_pixel(3000, 3000, image::Rgba([1, 2, 3, 4]));
            let mut png = Vec::new();
            image::DynamicImage::ImageRgba8(img)
                .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
                .unwrap();
            let (status, r) = upload(&srv, &admin, b"budget", &png).await;
            assert_eq!(status, 201, "{r}");
            let b = settled(&srv, r["referenceId"].as_str().unwrap(), TIME_BOUND).await;
            assert_eq!(b["status"], "ERROR", "{b}");
            assert!(
                b["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("--max-decode-bytes"),
                "{b}"
            );
        })
        .await;
    });
}
