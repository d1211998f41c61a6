//! Listing thousands of assignments: every one once, in a stable order, at a
//! cost that does not grow with the page.

use std::collections::BTreeSet;

use kartei::domains::assignments::model::AssignmentStatus;
use kartei::domains::assignments::service::{Assignments, SuggestInput, Suggester};
use kartei::domains::themes::model::KEYWORDS;
use kartei::kernel::bounded;
use kartei::store::DynStore;
use kartei::store::Mutation;
use serde_json::{Value, json};

use super::principal;
use crate::both_engines;
use crate::support::{Engine, TestApp, TestServer, Vocabulary, code, round_trips};

/// 2,000 assignments by three creators in mixed statuses.
async fn many(store: &DynStore, v: &Vocabulary) -> Vec<(String, String, String, String)> {
    let service = Assignments::new(store.clone());
    let creators = [
        ("bot", "machine"),
        ("carla", "contributor"),
        ("archiv", "archive"),
    ];
    let mut planned = Vec::new();
    for i in 0..2000 {
        let (creator, role) = creators[i % 3];
        let keyword = if i % 5 == 0 { &v.k2 } else { &v.k1 };
        planned.push((
            format!("obj-{:05}", (i * 7919) % 100_000),
            keyword.clone(),
            creator,
            role,
        ));
    }
    let written = bounded(planned, 32, |(ddb, keyword, creator, role)| {
        let service = service.clone();
        let p = v.p.clone();
        let c1 = v.c1.clone();
        async move {
            let a = service
                .suggest(
                    &Suggester::of(&principal(creator, role)).unwrap(),
                    SuggestInput {
                        portal_id: p,
                        ddb_id: ddb,
                        keyword_id: keyword,
                        child_category_id: c1,
                        confidence: Some(0.7),
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("{}", e.message()));
            (
                a.key.ddb_id,
                a.key.keyword_id,
                a.key.creator,
                a.status.as_str().to_owned(),
            )
        }
    })
    .await;
    // Every fourth one accepted.
    let editor = principal("erik", "editor");
    let to_accept: Vec<_> = written
        .iter()
        .enumerate()
        .filter(|(i, w)| i % 4 == 0 && w.3 == "SUGGESTED")
        .map(
            |(_, w)| kartei::domains::assignments::model::AssignmentKey {
                portal_id: v.p.clone(),
                ddb_id: w.0.clone(),
                keyword_id: w.1.clone(),
                creator: w.2.clone(),
            },
        )
        .collect();
    for chunk in to_accept.chunks(200) {
        let r = service
            .transition_many(
                &editor,
                chunk.to_vec(),
                AssignmentStatus::Suggested,
                AssignmentStatus::Accepted,
            )
            .await
            .unwrap();
        assert!(r.iter().all(|(_, r)| r.is_ok()));
    }
    let accepted: BTreeSet<_> = to_accept
        .iter()
        .map(|k| (k.ddb_id.clone(), k.keyword_id.clone(), k.creator.clone()))
        .collect();
    written
        .into_iter()
        .map(|(d, k, c, s)| {
            let s = if accepted.contains(&(d.clone(), k.clone(), c.clone())) {
                "ACCEPTED".to_owned()
            } else {
                s
            };
            (d, k, c, s)
        })
        .collect()
}

pub(super) async fn page_all(
    app: &TestServer,
    portal: &str,
    status: Option<&str>,
    creator: Option<&str>,
) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let d = app
            .data(
                "query($p: ID!, $s: AssignmentStatus, $c: String, $a: String) { assignments(portalId: $p, status: $s, creator: $c, first: 37, after: $a) { edges { cursor node { ddbId keywordId creator status } } pageInfo { hasNextPage endCursor } } }",
                json!({"p": portal, "s": status, "c": creator, "a": after}),
                None,
            )
            .await;
        let conn = &d["assignments"];
        let edges = conn["edges"].as_array().unwrap();
        assert!(edges.len() <= 37);
        for e in edges {
            let n = &e["node"];
            out.push((
                n["ddbId"].as_str().unwrap().to_owned(),
                n["keywordId"].as_str().unwrap().to_owned(),
                n["creator"].as_str().unwrap().to_owned(),
            ));
        }
        if conn["pageInfo"]["hasNextPage"] != true {
            return out;
        }
        assert_eq!(edges.len(), 37, "only the last page is short");
        after = conn["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
}

async fn paging_2000_assignments_returns_each_once_in_a_stable_order(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let all = many(&app.store, v).await;
    let filters: Vec<(Option<&str>, Option<&str>)> = vec![
        (None, None),
        (Some("SUGGESTED"), None),
        (Some("ACCEPTED"), None),
        (None, Some("bot")),
        (Some("SUGGESTED"), Some("archiv")),
        (Some("AUTOSUGGESTED"), Some("bot")),
    ];
    for (status, creator) in filters {
        let mut expected: Vec<(String, String, String)> = all
            .iter()
            .filter(|a| status.is_none_or(|s| a.3 == s) && creator.is_none_or(|c| a.2 == c))
            .map(|a| (a.0.clone(), a.1.clone(), a.2.clone()))
            .collect();
        // The order each query table is clustered in.
        if status.is_none() && creator.is_some() || status.is_some() && creator.is_some() {
            expected.sort_by(|a, b| (&a.2, &a.0, &a.1).cmp(&(&b.2, &b.0, &b.1)));
        } else {
            expected.sort();
        }
        assert!(!expected.is_empty());
        let first_pass = page_all(&app, &v.p, status, creator).await;
        assert_eq!(first_pass, expected, "filter {status:?} {creator:?}");
        let second_pass = page_all(&app, &v.p, status, creator).await;
        assert_eq!(second_pass, first_pass, "stable order");
    }
    let creators = app
        .data(
            "query($p: ID!) { s: creators(portalId: $p, status: SUGGESTED) a: creators(portalId: $p, status: AUTOSUGGESTED) d: creators(portalId: $p, status: DELETED) }",
            json!({"p": v.p}),
            None,
        )
        .await;
    assert_eq!(creators["s"], json!(["archiv", "carla"]));
    assert_eq!(creators["a"], json!(["bot"]));
    assert_eq!(creators["d"], json!([]));

    // A keyword's assignments, through the root field and through Keyword.assignments.
    let k2_count = all.iter().filter(|a| a.1 == v.k2).count();
    let mut seen = 0;
    let mut after: Option<String> = None;
    loop {
        let d = app
            .data(
                "query($k: ID!, $p: ID, $a: String) { keyword(id: $k) { assignments(portalId: $p, first: 100, after: $a) { edges { node { keywordId } } pageInfo { hasNextPage endCursor } } } }",
                json!({"k": v.k2, "p": v.p, "a": after}),
                None,
            )
            .await;
        let c = &d["keyword"]["assignments"];
        seen += c["edges"].as_array().unwrap().len();
        if c["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = c["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
    assert_eq!(seen, k2_count);
    let r = app
        .gql(
            "query($k: ID!) { keywordAssignments(keywordId: $k, first: 5, after: \"bogus\") { edges { cursor } } }",
            json!({"k": v.k2}),
            None,
        )
        .await;
    assert_eq!(code(&r), "BAD_CURSOR", "a forged cursor");
}

async fn a_page_of_assignments_costs_a_fixed_number_of_round_trips(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let service = Assignments::new(app.store.clone());
    let who = Suggester::of(&principal("bot", "machine")).unwrap();
    let inputs: Vec<SuggestInput> = (0..60)
        .map(|i| SuggestInput {
            portal_id: v.p.clone(),
            ddb_id: format!("rt-{i:03}"),
            keyword_id: if i % 2 == 0 {
                v.k1.clone()
            } else {
                v.k2.clone()
            },
            child_category_id: if i % 3 == 0 {
                v.c1.clone()
            } else {
                v.c2.clone()
            },
            confidence: None,
        })
        .collect();
    let who = &who;
    let service = &service;
    bounded(inputs, 16, |i| async move {
        service.suggest(who, i).await.unwrap()
    })
    .await;
    let bare = "query($p: ID!, $n: Int) { assignments(portalId: $p, first: $n) { edges { node { ddbId } } } }";
    let full = "query($p: ID!, $n: Int) { assignments(portalId: $p, first: $n) { edges { node { ddbId keyword { label categories { label } } portal { label } childCategory { label } } } } }";
    for n in [5, 50] {
        let vars = json!({"p": v.p, "n": n});
        let (slices, _) = round_trips(&app.store, app.data(bare, vars.clone(), None)).await;
        let (all, d) = round_trips(&app.store, app.data(full, vars, None)).await;
        let edges = d["assignments"]["edges"].as_array().unwrap();
        assert_eq!(edges.len(), n);
        assert!(
            edges
                .iter()
                .all(|e| e["node"]["keyword"]["label"].is_string()
                    && e["node"]["portal"]["label"] == "Portal P"
                    && e["node"]["childCategory"]["label"].is_string())
        );
        // The bucket slices are bounded by the merge (a few refill rounds at most).
        assert!(slices <= 32 * 3, "{slices} slices for a page of {n}");
        // Keywords, then categories of all levels: one batched read per level
        // (3), or a few more when a loaded machine lets a batch window close
        // early; one read per item would be 50 or more.
        assert!(
            all - slices <= 6,
            "relations of {n} assignments cost {} round trips",
            all - slices
        );
    }
}

/// Nothing answers from a cache of answers: a keyword label changed straight
/// in the store (no service, no event) shows in the very next page, asked
/// with the same text (whose parsed document the gate keeps) by the same
/// anonymous caller.
async fn the_next_page_reads_the_store_again(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    app.as_contributor("carla")
        .query(
            super::SUGGEST,
            super::suggestion(&v.p, "o-cache", &v.k1, &v.c1),
        )
        .await;
    let page = "query($p: ID!) { assignments(portalId: $p, first: 50) { edges { node { ddbId keyword { id label } } } } }";
    let anonymous = app.anonymous();
    let label_of = |data: Value| {
        data["assignments"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["node"]["ddbId"] == "o-cache")
            .map(|e| e["node"]["keyword"]["label"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let before = label_of(anonymous.query(page, json!({"p": v.p})).await);
    let row = app
        .store
        .get(&KEYWORDS, &[kartei::store::Value::Text(v.k1.clone())])
        .await
        .unwrap()
        .unwrap();
    let changed = format!("{before} (straight into the store)");
    app.store
        .apply(vec![Mutation::upsert(row.set("label", changed.clone()))])
        .await
        .unwrap();
    let after = label_of(anonymous.query(page, json!({"p": v.p})).await);
    assert_eq!(after, changed);
}

both_engines!(
    the_next_page_reads_the_store_again,
    paging_2000_assignments_returns_each_once_in_a_stable_order,
    a_page_of_assignments_costs_a_fixed_number_of_round_trips,
);
