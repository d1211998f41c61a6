//! The seed's abbreviations (`dom`, `totLinks`, `time`, `fingerprint`,
//! `pageRev`, `Viewer.sub`) answer for one more release beside their new names.

use std::time::Duration;

use kartei::domains::binaries::model::BinaryStatus;
use serde_json::{Value, json};

use super::{all_settled, crawl_args, crawling_server, register, site};
use crate::both_engines;
use crate::support::{Engine, code, uid};

/// Renamed for issue 31: each old name and the field or argument that
/// replaces it. The old ones answer for one more release.
const RENAMED_FIELDS: [(&str, &str, &str); 6] = [
    ("CrawlDomain", "dom", "domain"),
    ("CrawlDomain", "totLinks", "totalLinks"),
    ("CrawlLinkFetch", "time", "fetchedAt"),
    ("CrawlLinkFetch", "fingerprint", "contentHash"),
    ("ImageSuggestion", "pageRev", "pageRevision"),
    ("Viewer", "sub", "subject"),
];
const RENAMED_ARGUMENTS: [(&str, &str); 4] = [
    ("Query", "crawlDomain"),
    ("Mutation", "setDomainPriority"),
    ("Mutation", "excludeDomain"),
    ("Mutation", "includeDomain"),
];

/// A client written against the seed's abbreviations keeps working for one
/// release: every old field and argument answers what its new name answers,
/// both names at once are refused (and change nothing), and introspection
/// marks each old name deprecated, pointing at its new one.
async fn old_names_answer_like_the_new_ones_and_are_marked_deprecated(engine: Engine) {
    let srv = crawling_server(engine, Some(crawl_args(50))).await;
    let s = site(None, Duration::ZERO).await;
    let url = format!("{}/img/renamed.jpg", s.base);
    let r = register(&srv.binaries, &url).await;
    let settled = all_settled(&srv.binaries, &[r], Duration::from_secs(60)).await;
    assert_eq!(settled, vec![BinaryStatus::Ok]);
    let admin = srv.admin();

    let history = srv
        .data_until(
            "query($u: String!) { crawlLink(url: $u) { fetchedAt time contentHash fingerprint } }",
            json!({"u": url}),
            Some(&admin),
            |h| h["crawlLink"].as_array().is_some_and(|a| a.len() >= 2),
        )
        .await;
    let rows = history["crawlLink"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{history}");
    assert!(rows[1]["contentHash"].is_string(), "{history}");
    for row in rows {
        assert_eq!(row["time"], row["fetchedAt"], "{history}");
        assert_eq!(row["fingerprint"], row["contentHash"], "{history}");
    }

    let dom = s.host();
    let by_new = "query($d: String!) { crawlDomain(domain: $d) { domain totalLinks priority } }";
    let by_old = "query($d: String!) { crawlDomain(dom: $d) { dom totLinks priority } }";
    let set_old = "mutation($d: String!) { setDomainPriority(dom: $d, priority: 3) { priority } }";
    let set = srv.data(set_old, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(set["setDomainPriority"]["priority"], 3);
    let new = srv.data(by_new, json!({"d": dom}), Some(&admin)).await;
    let old = srv.data(by_old, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(new["crawlDomain"]["domain"], json!(dom));
    assert_eq!(old["crawlDomain"]["dom"], json!(dom));
    assert_eq!(
        old["crawlDomain"]["totLinks"],
        new["crawlDomain"]["totalLinks"]
    );
    assert_eq!(new["crawlDomain"]["priority"], 3);
    let levers = srv
        .data(
            "mutation($d: String!) { excludeDomain(dom: $d, reason: \"old client\") { excluded }
               includeDomain(dom: $d) { excluded } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(
        levers,
        json!({"excludeDomain": {"excluded": true}, "includeDomain": {"excluded": false}})
    );
    let both = srv
        .gql(
            "mutation($d: String!) { setDomainPriority(domain: $d, dom: $d, priority: 9) { priority } }",
            json!({"d": dom}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&both), "BAD_USER_INPUT");
    let neither = srv
        .gql("{ crawlDomain { priority } }", json!({}), Some(&admin))
        .await;
    assert_eq!(code(&neither), "BAD_USER_INPUT");
    let after = srv.data(by_new, json!({"d": dom}), Some(&admin)).await;
    assert_eq!(
        after["crawlDomain"]["priority"], 3,
        "a refused call changed it"
    );

    let viewer = srv
        .data("{ viewer { subject sub } }", json!({}), Some(&admin))
        .await;
    assert_eq!(
        viewer["viewer"],
        json!({"subject": "tester", "sub": "tester"})
    );

    let suggestions = kartei::domains::suggestions::service::Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let imported = crate::suggestions::run_import(
        &suggestions,
        &wiki,
        vec![crate::suggestions::line(7, "Renamed.jpg", 0.9)],
        0,
        1,
    )
    .await;
    assert!(imported.published, "{}", imported.summary());
    let page = srv
        .data(
            "query($w: String!) { imageSuggestions(wiki: $w, pageId: 7) { pageRevision pageRev } }",
            json!({"w": wiki}),
            None,
        )
        .await;
    assert_eq!(
        page["imageSuggestions"],
        json!([{"pageRevision": 107, "pageRev": 107}])
    );

    let introspection = srv
        .data(
            "{ __schema { types { name
                 fields(includeDeprecated: true) { name isDeprecated deprecationReason
                   args(includeDeprecated: true) { name isDeprecated deprecationReason } } } } }",
            json!({}),
            None,
        )
        .await;
    let mut deprecated = Vec::new();
    let mut current = Vec::new();
    for ty in introspection["__schema"]["types"].as_array().unwrap() {
        let tn = ty["name"].as_str().unwrap();
        for f in ty["fields"].as_array().into_iter().flatten() {
            let fname = f["name"].as_str().unwrap();
            let mut note = |path: String, v: &Value| {
                if v["isDeprecated"] == true {
                    deprecated.push((path, v["deprecationReason"].as_str().unwrap().to_owned()));
                } else {
                    current.push(path);
                }
            };
            note(format!("{tn}.{fname}"), f);
            for a in f["args"].as_array().unwrap() {
                note(format!("{tn}.{fname}({})", a["name"].as_str().unwrap()), a);
            }
        }
    }
    let mut expected: Vec<(String, String)> = RENAMED_FIELDS
        .iter()
        .map(|(ty, old, new)| (format!("{ty}.{old}"), format!("use `{new}`")))
        .chain(
            RENAMED_ARGUMENTS
                .iter()
                .map(|(ty, field)| (format!("{ty}.{field}(dom)"), "use `domain`".to_owned())),
        )
        .collect();
    expected.sort();
    deprecated.sort();
    assert_eq!(
        deprecated, expected,
        "the deprecated names and their reasons"
    );
    for (ty, _, new) in RENAMED_FIELDS {
        assert!(current.contains(&format!("{ty}.{new}")), "{ty}.{new}");
    }
    for (ty, field) in RENAMED_ARGUMENTS {
        assert!(
            current.contains(&format!("{ty}.{field}(domain)")),
            "{ty}.{field}"
        );
    }
}

both_engines!(old_names_answer_like_the_new_ones_and_are_marked_deprecated);
