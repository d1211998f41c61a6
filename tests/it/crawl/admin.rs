//! Administrators exclude, include and prioritise crawl domains.

use std::time::Duration;

use kartei::domains::binaries::model::BinaryStatus;
use serde_json::json;

use super::{all_settled, register, site};
use crate::both_engines;
use crate::support::{Engine, code, serve_crawling, test_binary_args, test_limits};

const DOMAIN: &str = "query($d: String!) { crawlDomain(domain: $d) { domain state priority excluded excludeReason claimed } }";

async fn admins_exclude_include_and_prioritise_domains(engine: Engine) {
    // The crawler is not running yet: the domain waits, PENDING. (Keyspaces
    // of its own: other tests' crawlers would fetch the waiting link.)
    let srv = serve_crawling(
        crate::support::isolated_store(engine).await,
        test_limits(),
        test_binary_args(),
        None,
    )
    .await;
    let s = site(None, Duration::ZERO).await;
    let url = format!("{}/img/excluded.jpg", s.base);
    let r = register(&srv.binaries, &url).await;
    let dom = s.host();
    let admin = srv.token(&["admin"]);
    let editor = srv.token(&["editor"]);
    let d = srv.data(DOMAIN, json!({"d": dom}), Some(&editor)).await;
    assert_eq!(d["crawlDomain"]["state"], "PENDING");
    let exclude = "mutation($d: String!, $r: String!) { excludeDomain(domain: $d, reason: $r) { state excluded excludeReason } }";
    let denied = srv
        .gql(
            exclude,
            json!({"d": dom, "r": "asked us to stop"}),
            Some(&editor),
        )
        .await;
    assert_eq!(code(&denied), "FORBIDDEN");
    let anonymous = srv.gql(DOMAIN, json!({"d": dom}), None).await;
    assert_eq!(code(&anonymous), "UNAUTHENTICATED");
    let d = srv
        .data(
            exclude,
            json!({"d": dom, "r": "asked us to stop"}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        d["excludeDomain"],
        json!({"state": "EXCLUDED", "excluded": true, "excludeReason": "asked us to stop"})
    );
    let listed = srv
        .data(
            "{ crawlDomains(state: EXCLUDED, first: 100) { edges { node { domain } } } }",
            json!({}),
            Some(&admin),
        )
        .await;
    assert!(listed.to_string().contains(&dom), "{listed}");
    let bad = srv
        .gql(
            "mutation($d: String!) { setDomainPriority(domain: $d, priority: 12) { priority } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&bad), "BAD_USER_INPUT");
    let p = srv
        .data(
            "mutation($d: String!) { setDomainPriority(domain: $d, priority: 7) { priority state } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        p["setDomainPriority"],
        json!({"priority": 7, "state": "EXCLUDED"})
    );
    // Now the crawler runs: an excluded domain is left alone.
    srv.crawl.spawn();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(s.requests().is_empty(), "{:?}", s.requests());
    let (_, o) = srv.binaries.resolve(&r).await.unwrap().unwrap();
    assert_eq!(o.status, Some(BinaryStatus::Processing));
    // Included again, its waiting link is fetched.
    let d = srv
        .data(
            "mutation($d: String!) { includeDomain(domain: $d) { state excluded } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        d["includeDomain"],
        json!({"state": "PENDING", "excluded": false})
    );
    let statuses = all_settled(
        &srv.binaries,
        std::slice::from_ref(&r),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(statuses, vec![BinaryStatus::Ok]);
    assert_eq!(s.hits().get("/img/excluded.jpg"), Some(&1));
    let d = srv.data(DOMAIN, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(d["crawlDomain"]["priority"], 7);
    // The binary shows its crawl history (the fetch is recorded just after
    // the binary settles: wait for it).
    let b = srv
        .data_until(
            "query($r: ID!) { binary(referenceId: $r) { crawls { firstSighting status mime } } }",
            json!({"r": r}),
            None,
            |b| {
                b["binary"]["crawls"]
                    .as_array()
                    .is_some_and(|c| c.len() >= 2)
            },
        )
        .await;
    assert_eq!(
        b["binary"]["crawls"],
        json!([
            {"firstSighting": true, "status": null, "mime": null},
            {"firstSighting": false, "status": 200, "mime": "image/jpeg"}
        ])
    );
    let missing = srv
        .gql(
            "mutation { recrawl(url: \"http://127.0.0.9:1/never-registered.jpg\") }",
            json!({}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&missing), "NOT_FOUND");
}

both_engines!(admins_exclude_include_and_prioritise_domains);
