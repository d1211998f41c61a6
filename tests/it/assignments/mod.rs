//! The assignments domain through GraphQL over real HTTP (and its service and
//! maintenance jobs directly), on both engines: suggesting, the curation
//! workflow and its release queue, concurrent curators, crashes healed,
//! roles, paging and the importer.

mod approval;
mod concurrency;
mod counts;
mod crashes;
mod export;
mod import;
mod matching;
mod paging;
mod roles;
mod sorting;
mod suggesting;
mod undo;
mod workflow;

use std::collections::BTreeSet;

use kartei::domains::assignments::repair::repair_views;
use kartei::store::DynStore;
use serde_json::{Value, json};

use crate::support::{Caller, TestServer};

pub(crate) const SUGGEST: &str = "mutation($i: SuggestAssignmentInput!) { suggestAssignment(input: $i) { portalId ddbId keywordId creator assignmentType status confidence childCategory { id } } }";
pub(crate) const TRANSITION: &str = "mutation($k: AssignmentKeyInput!, $e: AssignmentStatus!, $t: AssignmentStatus!) { transitionAssignment(key: $k, expected: $e, to: $t) { status modifiedAt } }";

pub(crate) fn suggestion(portal: &str, ddb: &str, keyword: &str, child: &str) -> Value {
    json!({"i": {"portalId": portal, "ddbId": ddb, "keywordId": keyword, "childCategoryId": child, "confidence": 0.5}})
}

pub(crate) fn key(portal: &str, ddb: &str, keyword: &str, creator: &str) -> Value {
    json!({"portalId": portal, "ddbId": ddb, "keywordId": keyword, "creator": creator})
}

/// `who` moves the assignment `k` from `expected` to `to`: the whole response.
async fn transition(who: &Caller<'_>, k: &Value, expected: &str, to: &str) -> Value {
    let vars = json!({"k": k, "e": expected, "t": to});
    who.response(TRANSITION, vars).await
}

/// Imports the NDJSON `text` as `creator` (the importer's own path).
pub(crate) async fn import_text(
    store: &DynStore,
    creator: &str,
    text: &str,
) -> kartei::domains::assignments::import::ImportReport {
    let service = kartei::domains::assignments::service::Assignments::new(store.clone());
    let input = kartei::kernel::chunked::Input::new(text.as_bytes(), text.len(), 8);
    kartei::domains::assignments::import::import(&service, creator, input)
        .await
        .unwrap()
}

async fn check_views(store: &DynStore, portal: &str) {
    let report = repair_views(store, false, Some(portal)).await.unwrap();
    assert_eq!(report.differences(), 0, "{}", report.summary());
}

async fn release_queue(srv: &TestServer) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut after: Option<String> = None;
    loop {
        let d = srv
            .data(
                "query($a: String) { releaseQueue(first: 100, after: $a) { edges { cursor node } pageInfo { hasNextPage endCursor } } }",
                json!({"a": after}),
                None,
            )
            .await;
        let q = &d["releaseQueue"];
        for e in q["edges"].as_array().unwrap() {
            assert!(
                out.insert(e["node"].as_str().unwrap().to_owned()),
                "listed twice"
            );
        }
        if q["pageInfo"]["hasNextPage"] != true {
            return out;
        }
        after = q["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
}

fn principal(sub: &str, role: &str) -> kartei::kernel::roles::Principal {
    kartei::kernel::roles::Principal {
        sub: Some(sub.into()),
        roles: [kartei::kernel::roles::Role::parse(role).unwrap()].into(),
        valid_until: None,
    }
}
