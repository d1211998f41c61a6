//! The crawl history of a binary: no cookies or credentials stored, shown
//! or sent, and fetched headers only for the crawl's operators.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::origin::{URL_PASSWORD, origin};
use super::{get, register, settled};
use crate::both_engines;
use crate::support::{Engine, TestServer, binary_server as server, uid};

const CRAWLS: &str = "query($r: ID!) { binary(referenceId: $r) {
    url error logs { message } crawls { url status redirectedTo error headers } } }";

/// A binary with its crawl history as `token` sees it, once a fetch of its
/// URL is recorded (the history row follows the binary's status).
async fn crawled(srv: &TestServer, reference: &str, token: Option<&str>) -> Value {
    let d = srv
        .data_until(CRAWLS, json!({"r": reference}), token, |d| {
            d["binary"]["crawls"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|f| !f["status"].is_null() || !f["error"].is_null())
            })
        })
        .await;
    d["binary"].clone()
}

/// A link's history through `crawlLink`, as `token` sees it.
async fn crawl_link(srv: &TestServer, url: &str, token: &str) -> Value {
    srv.data(
        "query($u: String!) { crawlLink(url: $u) { url status redirectedTo error headers } }",
        json!({"u": url}),
        Some(token),
    )
    .await["crawlLink"]
        .clone()
}

/// The stored history rows of a link (the `links` table), read directly.
async fn link_rows(srv: &TestServer, url: &str) -> Vec<kartei::store::Row> {
    use kartei::store::Slice;
    let key = kartei::domains::crawl::model::LinkKey::of(url).unwrap();
    srv.store
        .slice(
            &kartei::domains::crawl::model::LINKS,
            &Slice::partition(vec![key.dom.as_str().into(), key.bucket().into()]).prefix(vec![
                key.subdom.as_str().into(),
                key.path.as_str().into(),
                key.proto.as_str().into(),
            ]),
        )
        .await
        .unwrap()
        .rows
}

/// A site answers with cookies, an authentication challenge and an
/// `Authorization` header: none of them is stored, and the headers that are
/// kept are shown to the crawl's operators (machine, admin) only; everybody
/// else gets an empty list.
async fn fetched_headers_keep_no_cookies_or_credentials_and_only_operators_see_them(
    engine: Engine,
) {
    let srv = server(engine).await;
    let o = origin().await;
    let url = format!("{}/private.jpg", o.base);
    let (status, r) = register(&srv, &url, &format!("ctx-{}", uid())).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&srv, &reference).await["status"], "OK");

    let machine = srv.token(&["machine"]);
    let seen = crawled(&srv, &reference, Some(&machine)).await;
    let fetch = seen["crawls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["status"] == 200)
        .cloned()
        .unwrap_or_else(|| panic!("no fetch recorded: {seen:#}"));
    let headers = fetch["headers"].to_string();
    assert!(headers.contains("x-served-by: kartei-test"), "{headers}");
    assert!(headers.contains("content-type: image/jpeg"), "{headers}");
    assert!(!seen.to_string().contains("s3cr3t"), "{seen:#}");
    for name in [
        "set-cookie",
        "www-authenticate",
        "proxy-authenticate",
        "authorization",
    ] {
        assert!(
            !headers.to_ascii_lowercase().contains(name),
            "{name}: {headers}"
        );
    }
    let as_admin = crawl_link(&srv, &url, &srv.admin()).await;
    assert!(as_admin.to_string().contains("x-served-by"), "{as_admin:#}");
    assert!(!as_admin.to_string().contains("s3cr3t"), "{as_admin:#}");

    // Readers, contributors and editors: the same history, without headers.
    let contributor = srv.token(&["contributor"]);
    let editor = srv.token(&["editor"]);
    for token in [None, Some(contributor.as_str()), Some(editor.as_str())] {
        let b = crawled(&srv, &reference, token).await;
        let crawls = b["crawls"].as_array().unwrap();
        assert!(
            crawls.iter().any(|f| f["status"] == 200),
            "{token:?}: {b:#}"
        );
        assert!(
            crawls.iter().all(|f| f["headers"] == json!([])),
            "{token:?}: {b:#}"
        );
    }
    let as_editor = crawl_link(&srv, &url, &editor).await;
    assert!(
        as_editor
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["headers"] == json!([])),
        "{as_editor:#}"
    );

    // Never stored: the history rows themselves hold none of them.
    let rows = link_rows(&srv, &url).await;
    let stored: Vec<String> = rows.iter().flat_map(|r| r.text_list("headers")).collect();
    assert!(
        stored.iter().any(|h| h.starts_with("x-served-by")),
        "{stored:?}"
    );
    assert!(stored.iter().all(|h| !h.contains("s3cr3t")), "{stored:?}");
}

/// A URL registered with `user:password@`: registered, fetched and shown
/// without them (the same original as the plain URL), never sent to the
/// site; a redirect to a URL with credentials, and a failed fetch whose
/// error names such a URL, keep them out of every answer and every row too.
async fn credentials_in_a_url_are_never_stored_shown_nor_sent(engine: Engine) {
    let srv = server(engine).await;
    let o = origin().await;
    let context = format!("ctx-{}", uid());
    let plain = format!("{}/private.jpg", o.base);
    let with = plain.replacen("http://", &format!("http://someone:{URL_PASSWORD}@"), 1);
    let (status, r) = register(&srv, &with, &context).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    assert!(!r.to_string().contains(URL_PASSWORD), "{r}");
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    let b = settled(&srv, &reference).await;
    assert_eq!(b["status"], "OK", "fetched without them: {b:#}");
    assert_eq!(b["url"], plain.as_str());
    assert!(
        b["logs"].to_string().contains("credentials"),
        "the logs say they were dropped: {b:#}"
    );
    let (_, again) = register(&srv, &plain, &context).await;
    assert_eq!(
        again["originalId"], r["originalId"],
        "one URL, one original"
    );

    let redirect = format!("{}/to-credentials/private.jpg", o.base);
    let (_, redirected) = register(&srv, &redirect, &context).await;
    let redirected = redirected["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&srv, &redirected).await["status"], "OK");
    // On to a private address from there: the refusal's error names the URL
    // it was at, credentials and all.
    let dead = format!("{}/to-credentials/to-private", o.base);
    let (_, failed) = register(&srv, &dead, &context).await;
    let failed = failed["referenceId"].as_str().unwrap().to_owned();
    let f = settled(&srv, &failed).await;
    assert_eq!(f["status"], "ERROR", "{f:#}");

    let admin = srv.admin();
    let mut seen = Vec::new();
    for r in [&reference, &redirected, &failed] {
        seen.push(crawled(&srv, r, None).await);
        seen.push(crawled(&srv, r, Some(&admin)).await);
    }
    let to_credentials = crawl_link(&srv, &redirect, &admin).await;
    assert!(
        to_credentials
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["redirectedTo"]
                .as_str()
                .is_some_and(|u| u.ends_with("/private.jpg"))),
        "the redirect is recorded: {to_credentials:#}"
    );
    seen.push(to_credentials);
    let to_dead = crawl_link(&srv, &dead, &admin).await;
    assert!(
        to_dead.to_string().contains("/to-private"),
        "the error names the URL: {to_dead:#}"
    );
    seen.push(to_dead);
    seen.push(crawl_link(&srv, &plain, &admin).await);
    let logs: Value = get(&srv, &format!("/binary/logs/{context}"), &[])
        .await
        .json()
        .await
        .unwrap();
    seen.push(logs);
    for answer in &seen {
        assert!(!answer.to_string().contains(URL_PASSWORD), "{answer:#}");
    }
    for url in [&plain, &redirect, &dead] {
        let rows = link_rows(&srv, url).await;
        assert!(!rows.is_empty(), "{url}");
        for row in rows {
            assert!(!format!("{row:?}").contains(URL_PASSWORD), "{row:?}");
        }
    }
    // The URL is mapped to its original without them, never with them.
    let mapped = |url: &str| {
        let key = [url.into()];
        let store = srv.store.clone();
        async move {
            let row = store
                .get(&kartei::domains::binaries::model::URLS, &key)
                .await;
            row.unwrap().is_some()
        }
    };
    assert!(!mapped(&with).await);
    assert!(mapped(&plain).await);
    assert!(
        o.authorizations.lock().unwrap().is_empty(),
        "credentials were sent: {:?}",
        o.authorizations.lock().unwrap()
    );
}

both_engines!(
    fetched_headers_keep_no_cookies_or_credentials_and_only_operators_see_them,
    credentials_in_a_url_are_never_stored_shown_nor_sent,
);
