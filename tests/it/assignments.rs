//! The assignments domain through GraphQL over real HTTP (and its service and
//! maintenance jobs directly), on both engines.

use std::collections::BTreeSet;

use kartei::domains::assignments::model::{AssignmentStatus, OBJECTS_KEYWORDS_STATUS, VIEWS};
use kartei::domains::assignments::repair::repair_views;
use kartei::domains::assignments::service::{Assignments, SuggestInput, Suggester};
use kartei::domains::themes::service::{CategoryInput, KeywordInput, Themes};
use kartei::kernel::bounded;
use kartei::store::DynStore;
use serde_json::{Value, json};

use crate::both_engines;
use crate::support::{Engine, Faulty, TestServer, code, round_trips, server, uid};

pub(crate) const SUGGEST: &str = "mutation($i: SuggestAssignmentInput!) { suggestAssignment(input: $i) { portalId ddbId keywordId creator assignmentType status confidence childCategory { id } } }";
pub(crate) const TRANSITION: &str = "mutation($k: AssignmentKeyInput!, $e: AssignmentStatus!, $t: AssignmentStatus!) { transitionAssignment(key: $k, expected: $e, to: $t) { status modifiedAt } }";

/// Portal P with children C1 (> G1) and C2; portal Q with child QC.
/// Keywords: K1 in C1, K2 in G1, KQ in QC.
pub(crate) struct Vocabulary {
    pub p: String,
    pub c1: String,
    pub c2: String,
    pub g1: String,
    pub q: String,
    pub qc: String,
    pub k1: String,
    pub k2: String,
    pub kq: String,
}

pub(crate) async fn vocabulary(store: &DynStore) -> Vocabulary {
    let admin =
        kartei::kernel::roles::Principal::local("tester", &[kartei::kernel::roles::Role::Admin]);
    let u = uid();
    let v = Vocabulary {
        p: format!("p-{u}"),
        c1: format!("c1-{u}"),
        c2: format!("c2-{u}"),
        g1: format!("g1-{u}"),
        q: format!("q-{u}"),
        qc: format!("qc-{u}"),
        k1: format!("k1-{u}"),
        k2: format!("k2-{u}"),
        kq: format!("kq-{u}"),
    };
    let themes = Themes::new(store.clone());
    for (id, parent, label) in [
        (&v.p, None, "Portal P"),
        (&v.q, None, "Portal Q"),
        (&v.c1, Some(&v.p), "Orte"),
        (&v.c2, Some(&v.p), "Personen"),
        (&v.g1, Some(&v.c1), "Städte"),
        (&v.qc, Some(&v.q), "Anderes"),
    ] {
        themes
            .upsert_category(
                &admin,
                CategoryInput {
                    id: id.clone(),
                    parent_id: parent.cloned(),
                    label: label.into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{}", e.message()));
    }
    for (id, cat, label) in [
        (&v.k1, &v.c1, "Bayern"),
        (&v.k2, &v.g1, "München"),
        (&v.kq, &v.qc, "Elsewhere"),
    ] {
        themes
            .upsert_keyword(
                &admin,
                KeywordInput {
                    id: id.clone(),
                    label: label.into(),
                    category_ids: vec![cat.clone()],
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{}", e.message()));
    }
    v
}

pub(crate) fn suggestion(portal: &str, ddb: &str, keyword: &str, child: &str) -> Value {
    json!({"i": {"portalId": portal, "ddbId": ddb, "keywordId": keyword, "childCategoryId": child, "confidence": 0.5}})
}

pub(crate) fn key(portal: &str, ddb: &str, keyword: &str, creator: &str) -> Value {
    json!({"portalId": portal, "ddbId": ddb, "keywordId": keyword, "creator": creator})
}

async fn transition(srv: &TestServer, token: &str, k: &Value, expected: &str, to: &str) -> Value {
    srv.gql(
        TRANSITION,
        json!({"k": k, "e": expected, "t": to}),
        Some(token),
    )
    .await
}

async fn check_views(store: &DynStore, portal: &str) {
    let report = repair_views(store, false, Some(portal)).await.unwrap();
    assert_eq!(report.differences(), 0, "{}", report.summary());
}

async fn suggestion_type_and_status_come_from_the_role(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    for (role, ty, status) in [
        ("machine", "MACHINE", "AUTOSUGGESTED"),
        ("archive", "ARCHIVE", "SUGGESTED"),
        ("contributor", "ANYBODY", "SUGGESTED"),
    ] {
        let t = srv.token_as(&format!("{role}-1"), &[role]);
        let d = srv
            .data(SUGGEST, suggestion(&v.p, "ddb-1", &v.k2, &v.c1), Some(&t))
            .await;
        let a = &d["suggestAssignment"];
        assert_eq!(a["assignmentType"], ty);
        assert_eq!(a["status"], status);
        assert_eq!(
            a["creator"],
            format!("{role}-1"),
            "creator is the token's subject"
        );
        assert_eq!(a["childCategory"]["id"], json!(v.c1));
        assert_eq!(a["confidence"], json!(0.5));
    }
    let d = srv
        .data(
            "query($d: ID!) { objectAssignments(ddbId: $d) { creator status keyword { label } portal { id } } }",
            json!({"d": "ddb-1"}),
            None,
        )
        .await;
    let mine: Vec<&Value> = d["objectAssignments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["portal"]["id"] == json!(v.p))
        .collect();
    assert_eq!(mine.len(), 3);
    assert!(mine.iter().all(|a| a["keyword"]["label"] == "München"));
    check_views(&srv.store, &v.p).await;
}

async fn bad_suggestions_are_refused_and_change_nothing(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let t = srv.token_as("c", &["contributor"]);
    let cases = [
        (
            suggestion(&v.p, "d", &v.kq, &v.c1),
            "keyword outside the portal",
        ),
        (
            suggestion(&v.p, "d", &v.k1, &v.g1),
            "child not directly under the portal",
        ),
        (
            suggestion(&v.p, "d", &v.k1, &v.qc),
            "child under another portal",
        ),
        (
            suggestion(&v.c1, "d", &v.k1, &v.g1),
            "a portal that is not top-level",
        ),
        (suggestion("nope", "d", &v.k1, &v.c1), "unknown portal"),
        (suggestion(&v.p, "d", "nope", &v.c1), "unknown keyword"),
        (suggestion(&v.p, " ", &v.k1, &v.c1), "blank ddb id"),
    ];
    for (input, why) in cases {
        let r = srv.gql(SUGGEST, input, Some(&t)).await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "{why}: {r}");
    }
    for c in [1.5, -0.1] {
        let mut input = suggestion(&v.p, "d", &v.k1, &v.c1);
        input["i"]["confidence"] = json!(c);
        let r = srv.gql(SUGGEST, input, Some(&t)).await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "confidence {c}");
    }
    let d = srv
        .data(
            "query($p: ID!) { assignments(portalId: $p) { edges { node { ddbId } } } }",
            json!({"p": v.p}),
            None,
        )
        .await;
    assert_eq!(d["assignments"]["edges"], json!([]), "nothing was written");

    srv.data(SUGGEST, suggestion(&v.p, "d", &v.k1, &v.c1), Some(&t))
        .await;
    let r = srv
        .gql(SUGGEST, suggestion(&v.p, "d", &v.k1, &v.c1), Some(&t))
        .await;
    assert_eq!(code(&r), "CONFLICT", "the same key twice");
    assert_eq!(r["errors"][0]["extensions"]["currentStatus"], "SUGGESTED");
}

async fn the_workflow_follows_the_transition_table(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let contributor = srv.token_as("carla", &["contributor"]);
    let editor = srv.token_as("erik", &["editor"]);
    let machine = srv.token_as("bot", &["machine"]);
    srv.data(
        SUGGEST,
        suggestion(&v.p, "o1", &v.k1, &v.c1),
        Some(&contributor),
    )
    .await;
    let k = key(&v.p, "o1", &v.k1, "carla");

    // Not in the table at all.
    for (from, to) in [
        ("SUGGESTED", "PUBLISHED"),
        ("SUGGESTED", "DELETED"),
        ("ACCEPTED", "PUBLISHED"),
        ("REJECTED", "ACCEPTED"),
        ("SUGGESTED", "SUGGESTED"),
    ] {
        let r = transition(&srv, &editor, &k, from, to).await;
        assert_eq!(code(&r), "INVALID_TRANSITION", "{from} -> {to}");
    }
    // In the table, but not for this role.
    let r = transition(&srv, &contributor, &k, "SUGGESTED", "ACCEPTED").await;
    assert_eq!(code(&r), "FORBIDDEN");
    let r = transition(&srv, &machine, &k, "SUGGESTED", "ACCEPTED").await;
    assert_eq!(code(&r), "FORBIDDEN");

    // A stale `expected` names the current status.
    let r = transition(&srv, &editor, &k, "AUTOSUGGESTED", "ACCEPTED").await;
    assert_eq!(code(&r), "CONFLICT");
    assert_eq!(r["errors"][0]["extensions"]["currentStatus"], "SUGGESTED");
    // An unknown key.
    let r = transition(
        &srv,
        &editor,
        &key(&v.p, "o1", &v.k1, "nobody"),
        "SUGGESTED",
        "ACCEPTED",
    )
    .await;
    assert_eq!(code(&r), "NOT_FOUND");

    let d = transition(&srv, &editor, &k, "SUGGESTED", "ACCEPTED").await;
    assert_eq!(
        d["data"]["transitionAssignment"]["status"], "ACCEPTED",
        "{d}"
    );

    // The release run publishes it and queues the object.
    let run = srv
        .data(
            "mutation($p: ID!) { runRelease(portalId: $p) { portalId successful published time } }",
            json!({"p": v.p}),
            Some(&editor),
        )
        .await;
    assert_eq!(run["runRelease"]["successful"], true);
    assert_eq!(run["runRelease"]["published"], 1);
    let queue = release_queue(&srv).await;
    assert!(queue.contains("o1"), "{queue:?}");

    // A contributor proposes deletion, the editor restores, then deletes.
    let d = transition(&srv, &contributor, &k, "PUBLISHED", "DELETESUGGESTED").await;
    assert_eq!(
        d["data"]["transitionAssignment"]["status"],
        "DELETESUGGESTED"
    );
    let d = transition(&srv, &editor, &k, "DELETESUGGESTED", "PUBLISHED").await;
    assert_eq!(d["data"]["transitionAssignment"]["status"], "PUBLISHED");
    transition(&srv, &contributor, &k, "PUBLISHED", "DELETESUGGESTED").await;

    let acked = srv
        .data(
            "mutation($ids: [ID!]!) { acknowledgeRelease(ddbIds: $ids) }",
            json!({"ids": ["o1", "never-queued"]}),
            Some(&machine),
        )
        .await;
    assert_eq!(acked["acknowledgeRelease"], 1);
    assert!(!release_queue(&srv).await.contains("o1"));

    // DELETED queues the object at once (the index must drop the keyword).
    let d = transition(&srv, &editor, &k, "DELETESUGGESTED", "DELETED").await;
    assert_eq!(d["data"]["transitionAssignment"]["status"], "DELETED");
    assert!(release_queue(&srv).await.contains("o1"));

    let runs = srv
        .data(
            "query($p: ID!) { releaseRuns(portalId: $p) { successful published } }",
            json!({"p": v.p}),
            None,
        )
        .await;
    assert_eq!(
        runs["releaseRuns"],
        json!([{"successful": true, "published": 1}])
    );
    check_views(&srv.store, &v.p).await;
}

/// Issue 30: the ids of transitions that failed (CONFLICT, NOT_FOUND,
/// INVALID_TRANSITION) went into the reindexer's queue with the applied ones.
async fn a_bulk_transition_queues_only_the_objects_whose_transition_applied(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let contributor = srv.token_as("carla", &["contributor"]);
    let editor = srv.token_as("erik", &["editor"]);
    let machine = srv.token_as("bot", &["machine"]);
    let u = uid();
    let ddbs: Vec<String> = (0..6).map(|i| format!("bulk-{u}-{i}")).collect();
    let keys: Vec<Value> = ddbs.iter().map(|d| key(&v.p, d, &v.k1, "carla")).collect();
    for d in &ddbs {
        srv.data(
            SUGGEST,
            suggestion(&v.p, d, &v.k1, &v.c1),
            Some(&contributor),
        )
        .await;
    }
    let bulk = "mutation($k: [AssignmentKeyInput!]!, $e: AssignmentStatus!, $t: AssignmentStatus!) { transitionAssignments(keys: $k, expected: $e, to: $t) { applied key { ddbId } error { code } } }";
    // Each key's ddb id, whether it applied, and its error code.
    let bulk_move = |keys: Vec<Value>, expected: &'static str, to: &'static str| {
        let srv = &srv;
        let editor = editor.clone();
        async move {
            let d = srv
                .data(
                    bulk,
                    json!({"k": keys, "e": expected, "t": to}),
                    Some(&editor),
                )
                .await;
            d["transitionAssignments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["key"]["ddbId"].as_str().unwrap().to_owned(),
                        r["applied"] == true,
                        r["error"]["code"].clone(),
                    )
                })
                .collect::<Vec<(String, bool, Value)>>()
        }
    };
    // All published by a release run, then taken off the queue.
    let accepted = bulk_move(keys.clone(), "SUGGESTED", "ACCEPTED").await;
    assert!(accepted.iter().all(|(_, applied, _)| *applied));
    srv.data(
        "mutation($p: ID!) { runRelease(portalId: $p) { successful } }",
        json!({"p": v.p}),
        Some(&editor),
    )
    .await;
    let acked = srv
        .data(
            "mutation($ids: [ID!]!) { acknowledgeRelease(ddbIds: $ids) }",
            json!({ "ids": ddbs }),
            Some(&machine),
        )
        .await;
    assert_eq!(acked["acknowledgeRelease"], 6);
    let mine = |queue: BTreeSet<String>| -> BTreeSet<String> {
        queue.into_iter().filter(|d| ddbs.contains(d)).collect()
    };
    assert!(mine(release_queue(&srv).await).is_empty());

    // Deletion proposed for the first three only.
    for k in &keys[..3] {
        let d = transition(&srv, &contributor, k, "PUBLISHED", "DELETESUGGESTED").await;
        assert_eq!(
            d["data"]["transitionAssignment"]["status"],
            "DELETESUGGESTED"
        );
    }
    // A single transition that conflicts, one not in the workflow, one of an unknown key.
    let r = transition(&srv, &editor, &keys[4], "DELETESUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "CONFLICT");
    let r = transition(&srv, &editor, &keys[5], "SUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "INVALID_TRANSITION");
    let unknown = key(&v.p, &format!("bulk-{u}-unknown"), &v.k1, "carla");
    let r = transition(&srv, &editor, &unknown, "DELETESUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "NOT_FOUND");
    assert!(mine(release_queue(&srv).await).is_empty());

    // The bulk deletion: three apply, three conflict (still PUBLISHED), one is unknown.
    let mut all = keys.clone();
    all.push(unknown);
    let results = bulk_move(all, "DELETESUGGESTED", "DELETED").await;
    let applied: BTreeSet<String> = results
        .iter()
        .filter(|(_, a, _)| *a)
        .map(|(d, _, _)| d.clone())
        .collect();
    assert_eq!(applied, ddbs[..3].iter().cloned().collect());
    let codes: Vec<&Value> = results.iter().skip(3).map(|(_, _, c)| c).collect();
    assert_eq!(
        codes,
        [
            &json!("CONFLICT"),
            &json!("CONFLICT"),
            &json!("CONFLICT"),
            &json!("NOT_FOUND")
        ],
        "{results:?}"
    );
    let queue = release_queue(&srv).await;
    assert!(!queue.contains(&format!("bulk-{u}-unknown")));
    assert_eq!(
        mine(queue),
        applied,
        "only the applied transitions are queued"
    );

    // Two deletions whose writes after the compare-and-set are lost (a crash
    // on Cassandra; the query rows and the queue row are one batch): a retry
    // of the same change queues one, repair-views the other.
    for k in &keys[3..5] {
        transition(&srv, &contributor, k, "PUBLISHED", "DELETESUGGESTED").await;
    }
    let faulty = Faulty::new(srv.store.clone());
    *faulty.fail_apply_on.lock().unwrap() = vec!["release_ddbids"];
    let crashing = Assignments::new(faulty);
    for d in &ddbs[3..5] {
        let k = kartei::domains::assignments::model::AssignmentKey {
            portal_id: v.p.clone(),
            ddb_id: d.clone(),
            keyword_id: v.k1.clone(),
            creator: "carla".into(),
        };
        crashing
            .transition(
                &principal("erik", "editor"),
                &k,
                AssignmentStatus::Deletesuggested,
                AssignmentStatus::Deleted,
            )
            .await
            .expect("the compare-and-set applied");
    }
    assert_eq!(mine(release_queue(&srv).await), applied);
    let r = transition(&srv, &editor, &keys[3], "DELETESUGGESTED", "DELETED").await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(release_queue(&srv).await.contains(&ddbs[3]));
    repair_views(&srv.store, true, Some(&v.p)).await.unwrap();
    let all_five: BTreeSet<String> = ddbs[..5].iter().cloned().collect();
    assert_eq!(mine(release_queue(&srv).await), all_five);
    check_views(&srv.store, &v.p).await;
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

async fn two_editors_accepting_at_once_one_wins(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let contributor = srv.token_as("carla", &["contributor"]);
    srv.data(
        SUGGEST,
        suggestion(&v.p, "o2", &v.k1, &v.c1),
        Some(&contributor),
    )
    .await;
    let k = key(&v.p, "o2", &v.k1, "carla");
    let (anna, bert) = (
        srv.token_as("anna", &["editor"]),
        srv.token_as("bert", &["editor"]),
    );
    let (a, b) = tokio::join!(
        transition(&srv, &anna, &k, "SUGGESTED", "ACCEPTED"),
        transition(&srv, &bert, &k, "SUGGESTED", "REJECTED"),
    );
    let outcomes = [&a, &b];
    let won: Vec<_> = outcomes
        .iter()
        .filter(|r| r.get("errors").is_none())
        .collect();
    assert_eq!(won.len(), 1, "{a} {b}");
    let lost = outcomes.iter().find(|r| r.get("errors").is_some()).unwrap();
    assert_eq!(code(lost), "CONFLICT");
    let winner_status = won[0]["data"]["transitionAssignment"]["status"].clone();
    assert_eq!(
        lost["errors"][0]["extensions"]["currentStatus"],
        winner_status
    );
    check_views(&srv.store, &v.p).await;
}

async fn fifty_concurrent_attempts_apply_exactly_once(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let contributor = srv.token_as("carla", &["contributor"]);
    let suggests = (0..50).map(|_| {
        srv.gql(
            SUGGEST,
            suggestion(&v.p, "o50", &v.k2, &v.c1),
            Some(&contributor),
        )
    });
    let results = futures::future::join_all(suggests).await;
    let created = results.iter().filter(|r| r.get("errors").is_none()).count();
    assert_eq!(created, 1, "one suggestion is created");
    assert!(
        results
            .iter()
            .filter(|r| r.get("errors").is_some())
            .all(|r| code(r) == "CONFLICT")
    );

    let k = key(&v.p, "o50", &v.k2, "carla");
    let editor = srv.token_as("erik", &["editor"]);
    let accepts = (0..50).map(|i| {
        let to = if i % 2 == 0 { "ACCEPTED" } else { "REJECTED" };
        transition(&srv, &editor, &k, "SUGGESTED", to)
    });
    let results = futures::future::join_all(accepts).await;
    let applied: Vec<&Value> = results
        .iter()
        .filter(|r| r.get("errors").is_none())
        .collect();
    assert_eq!(applied.len(), 1, "exactly one transition applies");
    let status = applied[0]["data"]["transitionAssignment"]["status"].clone();
    for r in results.iter().filter(|r| r.get("errors").is_some()) {
        assert_eq!(code(r), "CONFLICT");
        assert_eq!(r["errors"][0]["extensions"]["currentStatus"], status);
    }
    check_views(&srv.store, &v.p).await;
}

async fn a_crash_between_base_row_and_query_tables_is_healed(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let faulty = Faulty::new(srv.store.clone());
    *faulty.fail_apply_on.lock().unwrap() = VIEWS.iter().map(|t| t.name).collect();
    let crashing = Assignments::new(faulty.clone());
    let input = SuggestInput {
        portal_id: v.p.clone(),
        ddb_id: "crash-1".into(),
        keyword_id: v.k1.clone(),
        child_category_id: v.c1.clone(),
        confidence: Some(0.9),
    };
    // The compare-and-set applied, so the suggestion is acknowledged; its
    // query-row writes failed twice and are left to healing.
    crashing
        .suggest(&Suggester::machine("bot"), input.clone())
        .await
        .expect("the row stands, so the suggestion is acknowledged");
    // The base row is there (the LWT ran); the query tables never heard of it.
    let listed = |status: Option<&str>| {
        let srv = &srv;
        let p = v.p.clone();
        let status = status.map(str::to_owned);
        async move {
            let d = srv
                .data(
                    "query($p: ID!, $s: AssignmentStatus) { assignments(portalId: $p, status: $s) { edges { node { ddbId status } } } }",
                    json!({"p": p, "s": status}),
                    None,
                )
                .await;
            d["assignments"]["edges"].as_array().unwrap().len()
        }
    };
    assert_eq!(listed(None).await, 1, "base table");
    assert_eq!(listed(Some("AUTOSUGGESTED")).await, 0, "query table");

    // A transition whose query-table write crashes too.
    let editor = kartei::kernel::roles::Principal {
        sub: Some("erik".into()),
        roles: [kartei::kernel::roles::Role::Editor].into(),
        valid_until: None,
    };
    let k = kartei::domains::assignments::model::AssignmentKey {
        portal_id: v.p.clone(),
        ddb_id: "crash-1".into(),
        keyword_id: v.k1.clone(),
        creator: "bot".into(),
    };
    crashing
        .transition(
            &editor,
            &k,
            AssignmentStatus::Autosuggested,
            AssignmentStatus::Accepted,
        )
        .await
        .expect("the transition applied");

    let check = repair_views(&srv.store, false, Some(&v.p)).await.unwrap();
    assert_eq!(
        check.tables[OBJECTS_KEYWORDS_STATUS.name].missing,
        1,
        "{}",
        check.summary()
    );
    assert!(check.differences() >= 5, "{}", check.summary());
    let fixed = repair_views(&srv.store, true, Some(&v.p)).await.unwrap();
    assert_eq!(fixed.differences(), check.differences());
    check_views(&srv.store, &v.p).await;
    assert_eq!(listed(Some("ACCEPTED")).await, 1);
    assert_eq!(listed(Some("AUTOSUGGESTED")).await, 0);
}

async fn a_crashed_release_run_can_run_again(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let service = Assignments::new(srv.store.clone());
    let n = 30;
    let ddbs: Vec<String> = (0..n).map(|i| format!("rel-{i:03}")).collect();
    for d in &ddbs {
        service
            .suggest(
                &Suggester::of(&principal("carla", "contributor")).unwrap(),
                SuggestInput {
                    portal_id: v.p.clone(),
                    ddb_id: d.clone(),
                    keyword_id: v.k1.clone(),
                    child_category_id: v.c1.clone(),
                    confidence: None,
                },
            )
            .await
            .unwrap();
    }
    let editor = principal("erik", "editor");
    let keys: Vec<_> = ddbs
        .iter()
        .map(|d| kartei::domains::assignments::model::AssignmentKey {
            portal_id: v.p.clone(),
            ddb_id: d.clone(),
            keyword_id: v.k1.clone(),
            creator: "carla".into(),
        })
        .collect();
    let accepted = service
        .transition_many(
            &editor,
            keys,
            AssignmentStatus::Suggested,
            AssignmentStatus::Accepted,
        )
        .await
        .unwrap();
    assert!(accepted.iter().all(|(_, r)| r.is_ok()));

    // The run dies after 12 publications.
    let faulty = Faulty::new(srv.store.clone());
    *faulty.cas_budget.lock().unwrap() = Some(12);
    let e = Assignments::new(faulty)
        .run_release(&editor, &v.p)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "UNAVAILABLE");
    let runs = service.release_runs(&v.p).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].successful);

    let run = service.run_release(&editor, &v.p).await.unwrap();
    assert!(run.successful);
    assert_eq!(run.published, (n - 12) as i64, "nothing is published twice");
    let published = service
        .list(&v.p, Some(AssignmentStatus::Published), None, 100, None)
        .await
        .unwrap();
    assert_eq!(published.items.len(), n, "nothing is lost");
    let queue = release_queue(&srv).await;
    assert!(ddbs.iter().all(|d| queue.contains(d)));
    let again = service.run_release(&editor, &v.p).await.unwrap();
    assert_eq!(again.published, 0);
    let runs = service.release_runs(&v.p).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.successful).collect::<Vec<_>>(),
        [true, false],
        "the last success and the last failure"
    );
    check_views(&srv.store, &v.p).await;
}

fn principal(sub: &str, role: &str) -> kartei::kernel::roles::Principal {
    kartei::kernel::roles::Principal {
        sub: Some(sub.into()),
        roles: [kartei::kernel::roles::Role::parse(role).unwrap()].into(),
        valid_until: None,
    }
}

async fn every_role_against_every_mutation(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let mutations = [
        "suggest",
        "accept",
        "proposeDeletion",
        "bulk",
        "release",
        "acknowledge",
    ];
    // Which roles may do what (admin may do everything).
    let allowed = |m: &str, role: &str| match m {
        "suggest" => ["contributor", "archive", "machine", "editor", "admin"].contains(&role),
        "accept" | "bulk" | "release" => ["editor", "admin"].contains(&role),
        "proposeDeletion" => ["contributor", "archive", "editor", "admin"].contains(&role),
        "acknowledge" => ["machine", "admin"].contains(&role),
        _ => unreachable!(),
    };
    let roles = [
        None,
        Some("contributor"),
        Some("archive"),
        Some("machine"),
        Some("editor"),
        Some("admin"),
    ];
    let editor = srv.token_as("erik", &["editor"]);
    for (i, role) in roles.iter().enumerate() {
        let sub = format!("who-{i}");
        let token = role.map(|r| srv.token_as(&sub, &[r]));
        // Fresh objects for each role, suggested and published by others.
        let c = srv.token_as("carla", &["contributor"]);
        let ddb = format!("auth-{i}");
        srv.data(SUGGEST, suggestion(&v.p, &ddb, &v.k1, &v.c1), Some(&c))
            .await;
        let k = key(&v.p, &ddb, &v.k1, "carla");
        let pub_ddb = format!("auth-pub-{i}");
        srv.data(SUGGEST, suggestion(&v.p, &pub_ddb, &v.k1, &v.c1), Some(&c))
            .await;
        let pk = key(&v.p, &pub_ddb, &v.k1, "carla");
        transition(&srv, &editor, &pk, "SUGGESTED", "ACCEPTED").await;
        srv.data(
            "mutation($p: ID!) { runRelease(portalId: $p) { successful } }",
            json!({"p": v.p}),
            Some(&editor),
        )
        .await;
        for m in mutations {
            let r = match m {
                "suggest" => {
                    srv.gql(
                        SUGGEST,
                        suggestion(&v.p, &format!("auth-s-{i}"), &v.k2, &v.c1),
                        token.as_deref(),
                    )
                    .await
                }
                "accept" => {
                    srv.gql(
                        TRANSITION,
                        json!({"k": k, "e": "SUGGESTED", "t": "ACCEPTED"}),
                        token.as_deref(),
                    )
                    .await
                }
                "proposeDeletion" => {
                    srv.gql(
                        TRANSITION,
                        json!({"k": pk, "e": "PUBLISHED", "t": "DELETESUGGESTED"}),
                        token.as_deref(),
                    )
                    .await
                }
                "bulk" => {
                    srv.gql(
                        "mutation($k: [AssignmentKeyInput!]!) { transitionAssignments(keys: $k, expected: ACCEPTED, to: REJECTED) { applied } }",
                        json!({"k": [k]}),
                        token.as_deref(),
                    )
                    .await
                }
                "release" => {
                    srv.gql(
                        "mutation($p: ID!) { runRelease(portalId: $p) { successful } }",
                        json!({"p": v.p}),
                        token.as_deref(),
                    )
                    .await
                }
                "acknowledge" => {
                    srv.gql(
                        "mutation { acknowledgeRelease(ddbIds: [\"x\"]) }",
                        json!({}),
                        token.as_deref(),
                    )
                    .await
                }
                _ => unreachable!(),
            };
            match role {
                None => assert_eq!(code(&r), "UNAUTHENTICATED", "{m} anonymous"),
                Some(role) if allowed(m, role) => {
                    assert!(r.get("errors").is_none(), "{m} as {role}: {r}")
                }
                Some(role) => assert_eq!(code(&r), "FORBIDDEN", "{m} as {role}"),
            }
        }
    }
    // A wrongly signed token is refused for every mutation.
    let forged = {
        let other =
            kartei::edge::auth::Auth::hs256(b"another-secret-0123456789abcdef-0123").unwrap();
        other.mint("mallory", &["admin".into()], 60).unwrap()
    };
    let r = srv
        .gql(
            SUGGEST,
            suggestion(&v.p, "forged", &v.k1, &v.c1),
            Some(&forged),
        )
        .await;
    assert_eq!(code(&r), "UNAUTHENTICATED");
}

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

async fn paging_2000_assignments_returns_each_once_in_a_stable_order(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let all = many(&srv.store, &v).await;
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
        let first_pass = page_all(&srv, &v.p, status, creator).await;
        assert_eq!(first_pass, expected, "filter {status:?} {creator:?}");
        let second_pass = page_all(&srv, &v.p, status, creator).await;
        assert_eq!(second_pass, first_pass, "stable order");
    }
    let creators = srv
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
        let d = srv
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
    let r = srv
        .gql(
            "query($k: ID!) { keywordAssignments(keywordId: $k, first: 5, after: \"bogus\") { edges { cursor } } }",
            json!({"k": v.k2}),
            None,
        )
        .await;
    assert_eq!(code(&r), "BAD_CURSOR", "a forged cursor");
}

async fn page_all(
    srv: &TestServer,
    portal: &str,
    status: Option<&str>,
    creator: Option<&str>,
) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let d = srv
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

async fn a_page_of_assignments_costs_a_fixed_number_of_round_trips(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let service = Assignments::new(srv.store.clone());
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
        let (slices, _) = round_trips(&srv.store, srv.data(bare, vars.clone(), None)).await;
        let (all, d) = round_trips(&srv.store, srv.data(full, vars, None)).await;
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

async fn importing_machine_suggestions_is_idempotent(engine: Engine) {
    let srv = server(engine).await;
    let v = vocabulary(&srv.store).await;
    let mut lines = Vec::new();
    for i in 0..40 {
        lines.push(
            json!({"portalId": v.p, "ddbId": format!("imp-{i}"), "keywordId": v.k1, "childCategoryId": v.c1, "confidence": 0.8})
                .to_string(),
        );
    }
    lines.insert(5, "{not json".into());
    lines.insert(
        10,
        json!({"portalId": v.p, "ddbId": "imp-x", "keywordId": v.kq, "childCategoryId": v.c1})
            .to_string(),
    );
    lines.insert(12, String::new());
    lines.insert(
        20,
        json!({"portalId": v.p, "ddbId": "imp-y", "keywordId": v.k1, "childCategoryId": v.c1, "confidence": 7}).to_string(),
    );
    let text = lines.join("\n");
    let service = Assignments::new(srv.store.clone());
    let first = kartei::domains::assignments::import::import(
        &service,
        "ingest-bot",
        text.as_bytes(),
        text.len(),
        8,
    )
    .await
    .unwrap();
    assert_eq!(first.created, 40, "{}", first.summary());
    assert_eq!(
        first.errors.iter().map(|e| e.0).collect::<Vec<_>>(),
        [6, 11, 21],
        "{:?}",
        first.errors
    );
    let again = kartei::domains::assignments::import::import(
        &service,
        "ingest-bot",
        text.as_bytes(),
        text.len(),
        8,
    )
    .await
    .unwrap();
    assert_eq!((again.created, again.existing), (0, 40));

    // A curator's status survives a re-import, and rows whose query rows are
    // missing (an import killed between its writes) are healed by running it again.
    let key = |d: &str| kartei::domains::assignments::model::AssignmentKey {
        portal_id: v.p.clone(),
        ddb_id: d.into(),
        keyword_id: v.k1.clone(),
        creator: "ingest-bot".into(),
    };
    service
        .transition(
            &principal("erik", "editor"),
            &key("imp-3"),
            AssignmentStatus::Autosuggested,
            AssignmentStatus::Accepted,
        )
        .await
        .unwrap();
    let mut lost = Vec::new();
    for i in 30..40 {
        for a in service
            .of_object(&format!("imp-{i}"), Some(&v.p))
            .await
            .unwrap()
        {
            for t in VIEWS {
                lost.push(kartei::store::Mutation::delete(t, a.row(t).key().unwrap()));
            }
        }
    }
    assert_eq!(lost.len(), 50);
    srv.store.apply(lost).await.unwrap();
    let third = kartei::domains::assignments::import::import(
        &service,
        "ingest-bot",
        text.as_bytes(),
        text.len(),
        1,
    )
    .await
    .unwrap();
    assert_eq!((third.created, third.existing), (0, 40));
    let a3 = service.of_object("imp-3", Some(&v.p)).await.unwrap();
    assert_eq!(a3[0].status, AssignmentStatus::Accepted);
    check_views(&srv.store, &v.p).await;
    // Back to AUTOSUGGESTED for the listing below.
    service
        .transition(
            &principal("erik", "editor"),
            &key("imp-3"),
            AssignmentStatus::Accepted,
            AssignmentStatus::Rejected,
        )
        .await
        .unwrap();

    // One key twice in a file: created once, then "already present".
    let twice = [lines[0].clone(), lines[0].clone()].join("\n");
    let dup = kartei::domains::assignments::import::import(
        &service,
        "dup-bot",
        twice.as_bytes(),
        twice.len(),
        2,
    )
    .await
    .unwrap();
    assert_eq!((dup.created, dup.existing), (1, 1), "{}", dup.summary());
    let page = service
        .list(
            &v.p,
            Some(AssignmentStatus::Autosuggested),
            Some("ingest-bot"),
            100,
            None,
        )
        .await
        .unwrap();
    assert_eq!(page.items.len(), 39);
    assert!(page.items.iter().all(|(_, a)| a.confidence == Some(0.8)
        && a.assignment_type == kartei::domains::assignments::model::AssignmentType::Machine));
    check_views(&srv.store, &v.p).await;
}

both_engines!(
    suggestion_type_and_status_come_from_the_role,
    bad_suggestions_are_refused_and_change_nothing,
    the_workflow_follows_the_transition_table,
    a_bulk_transition_queues_only_the_objects_whose_transition_applied,
    two_editors_accepting_at_once_one_wins,
    fifty_concurrent_attempts_apply_exactly_once,
    a_crash_between_base_row_and_query_tables_is_healed,
    a_crashed_release_run_can_run_again,
    every_role_against_every_mutation,
    paging_2000_assignments_returns_each_once_in_a_stable_order,
    a_page_of_assignments_costs_a_fixed_number_of_round_trips,
    importing_machine_suggestions_is_idempotent,
);
