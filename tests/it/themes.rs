//! The themes domain through GraphQL over real HTTP, on both engines.

use serde_json::{Value, json};

use crate::both_engines;
use crate::support::{Engine, TestServer, code, round_trips, server, uid};

const UPSERT_CATEGORY: &str = "mutation($i: UpsertCategoryInput!) { upsertCategory(input: $i) { id label parentId ancestors { id } portal { id } } }";
const UPSERT_KEYWORD: &str = "mutation($i: UpsertKeywordInput!) { upsertKeyword(input: $i) { id label synonyms createdAt categories { id } hierarchicalCategories { id } } }";

async fn category(srv: &TestServer, id: &str, parent: Option<&str>, label: &str) -> Value {
    let admin = srv.admin();
    srv.data(
        UPSERT_CATEGORY,
        json!({"i": {"id": id, "parentId": parent, "label": label}}),
        Some(&admin),
    )
    .await["upsertCategory"]
        .clone()
}

async fn keyword(
    srv: &TestServer,
    id: &str,
    label: &str,
    synonyms: &[&str],
    cats: &[&str],
) -> Value {
    let admin = srv.admin();
    srv.data(
        UPSERT_KEYWORD,
        json!({"i": {"id": id, "label": label, "synonyms": synonyms, "categoryIds": cats}}),
        Some(&admin),
    )
    .await["upsertKeyword"]
        .clone()
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A small tree with unique ids: portal P > A > A1, portal Q.
struct Tree {
    p: String,
    a: String,
    a1: String,
    q: String,
}

async fn tree(srv: &TestServer) -> Tree {
    let u = uid();
    let t = Tree {
        p: format!("p-{u}"),
        a: format!("a-{u}"),
        a1: format!("a1-{u}"),
        q: format!("q-{u}"),
    };
    category(srv, &t.p, None, "vocnet:hasAsLabel\"Bayern\"").await;
    category(srv, &t.a, Some(&t.p), "Orte").await;
    category(srv, &t.a1, Some(&t.a), "Städte").await;
    category(srv, &t.q, None, "Andere").await;
    t
}

async fn categories_derive_their_hierarchy(engine: Engine) {
    let srv = server(engine).await;
    let t = tree(&srv).await;
    let q = "query($id: ID!) { category(id: $id) { id label parentId parent { id } ancestors { id } portal { id label } children { id label } } portals { id label } }";
    let d = srv.data(q, json!({"id": t.a1}), None).await;
    let c = &d["category"];
    assert_eq!(c["parentId"], json!(t.a));
    assert_eq!(c["parent"]["id"], json!(t.a));
    assert_eq!(ids(&c["ancestors"]), [t.p.clone(), t.a.clone()]);
    assert_eq!(c["portal"]["id"], json!(t.p));
    assert_eq!(
        c["portal"]["label"],
        json!("Bayern"),
        "the label prefix is stripped"
    );
    let portals = ids(&d["portals"]);
    assert!(portals.contains(&t.p) && portals.contains(&t.q) && !portals.contains(&t.a));
    let p = srv.data(q, json!({"id": t.p}), None).await;
    assert_eq!(ids(&p["category"]["children"]), vec![t.a.clone()]);
    assert_eq!(
        p["category"]["portal"]["id"],
        json!(t.p),
        "a portal is its own portal"
    );
    assert_eq!(p["category"]["ancestors"], json!([]));
    assert_eq!(
        srv.data(q, json!({"id": "nope"}), None).await["category"],
        Value::Null
    );
}

async fn keywords_get_hierarchical_ids_from_the_server(engine: Engine) {
    let srv = server(engine).await;
    let t = tree(&srv).await;
    let k = format!("k-{}", uid());
    let created = keyword(
        &srv,
        &k,
        "München",
        &["vocnet:hasAsLabel\"Minga\"", "Muenchen"],
        &[&t.a1],
    )
    .await;
    assert_eq!(
        ids(&created["hierarchicalCategories"]),
        [t.p.clone(), t.a.clone(), t.a1.clone()]
    );
    assert_eq!(created["synonyms"], json!(["Minga", "Muenchen"]));
    // Re-upserting keeps createdAt; moving the keyword moves its index rows.
    let moved = keyword(&srv, &k, "München", &[], &[&t.q]).await;
    assert_eq!(moved["createdAt"], created["createdAt"]);
    assert_eq!(ids(&moved["hierarchicalCategories"]), vec![t.q.clone()]);
    let q = "query($c: ID!, $d: Boolean) { category(id: $c) { keywords(includeDescendants: $d) { edges { node { id } } } } }";
    let kw = |d: &Value| -> Vec<String> {
        d["category"]["keywords"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(kw(&srv.data(q, json!({"c": t.p, "d": true}), None).await).is_empty());
    assert_eq!(
        kw(&srv.data(q, json!({"c": t.q, "d": false}), None).await),
        vec![k.clone()]
    );
    let s = "query($p: ID!, $t: String!) { searchKeywords(portalId: $p, text: $t) { id } }";
    assert!(
        ids(&srv.data(s, json!({"p": t.p, "t": "münchen"}), None).await["searchKeywords"])
            .is_empty()
    );
    assert_eq!(
        ids(&srv.data(s, json!({"p": t.q, "t": "münchen"}), None).await["searchKeywords"]),
        vec![k.clone()]
    );
    // Unknown categories and GND entities are refused.
    let admin = srv.admin();
    let r = srv
        .gql(
            UPSERT_KEYWORD,
            json!({"i": {"id": "x", "label": "x", "categoryIds": ["missing"]}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let r = srv
        .gql(
            UPSERT_KEYWORD,
            json!({"i": {"id": "x", "label": "x", "categoryIds": [t.q], "gndEntityId": "none"}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let r = srv
        .gql(
            UPSERT_KEYWORD,
            json!({"i": {"id": " ", "label": "x", "categoryIds": [t.q]}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
}

async fn deleting_refuses_categories_that_are_not_empty(engine: Engine) {
    let srv = server(engine).await;
    let t = tree(&srv).await;
    let admin = srv.admin();
    let k = format!("k-{}", uid());
    keyword(&srv, &k, "Augsburg", &[], &[&t.q]).await;
    let del = "mutation($id: ID!) { deleteCategory(id: $id) }";
    assert_eq!(
        code(&srv.gql(del, json!({"id": t.a}), Some(&admin)).await),
        "BAD_USER_INPUT"
    ); // has a child
    assert_eq!(
        code(&srv.gql(del, json!({"id": t.q}), Some(&admin)).await),
        "BAD_USER_INPUT"
    ); // has a keyword
    assert_eq!(
        code(&srv.gql(del, json!({"id": "nope"}), Some(&admin)).await),
        "NOT_FOUND"
    );
    // Moving a category with children is refused too.
    let r = srv
        .gql(
            UPSERT_CATEGORY,
            json!({"i": {"id": t.a, "parentId": t.q, "label": "Orte"}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let r = srv
        .gql(
            UPSERT_CATEGORY,
            json!({"i": {"id": t.a, "parentId": t.a, "label": "Orte"}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    // Emptied, they go.
    let delk = "mutation($id: ID!) { deleteKeyword(id: $id) }";
    assert_eq!(
        srv.data(delk, json!({"id": k}), Some(&admin)).await["deleteKeyword"],
        json!(k)
    );
    assert_eq!(
        srv.data(del, json!({"id": t.q}), Some(&admin)).await["deleteCategory"],
        json!(t.q)
    );
    assert_eq!(
        srv.data(del, json!({"id": t.a1}), Some(&admin)).await["deleteCategory"],
        json!(t.a1)
    );
    let d = srv.data("query($id: ID!, $k: ID!) { category(id: $id) { children { id } } keyword(id: $k) { id } portals { id } }", json!({"id": t.a, "k": k}), None).await;
    assert_eq!(d["category"]["children"], json!([]));
    assert_eq!(d["keyword"], Value::Null);
    assert!(!ids(&d["portals"]).contains(&t.q));
}

async fn search_folds_case_and_diacritics_and_ranks(engine: Engine) {
    let srv = server(engine).await;
    let t = tree(&srv).await;
    let u = uid();
    let (exact, prefix, word, infix, other) = (
        format!("e-{u}"),
        format!("p-{u}"),
        format!("w-{u}"),
        format!("i-{u}"),
        format!("o-{u}"),
    );
    keyword(&srv, &infix, "Vormünchenhausen", &[], &[&t.a1]).await;
    keyword(&srv, &word, "Hofbräuhaus München", &[], &[&t.a]).await;
    keyword(&srv, &prefix, "Münchner Räterepublik", &[], &[&t.a1]).await;
    keyword(&srv, &exact, "München", &["Minga"], &[&t.a1]).await;
    keyword(&srv, &other, "München", &[], &[&t.q]).await; // another portal
    let s = "query($p: ID!, $t: String!, $f: Int) { searchKeywords(portalId: $p, text: $t, first: $f) { id label } }";
    for text in ["munchen", "MÜNCHEN", "München", "Mu\u{308}nchen"] {
        let found = ids(&srv.data(s, json!({"p": t.p, "t": text}), None).await["searchKeywords"]);
        assert_eq!(
            found,
            [exact.clone(), word.clone(), infix.clone()],
            "{text}"
        );
    }
    let found = ids(&srv.data(s, json!({"p": t.p, "t": "MÜNCH"}), None).await["searchKeywords"]);
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(
        found[..2].iter().collect::<std::collections::BTreeSet<_>>(),
        [&exact, &prefix].into_iter().collect()
    );
    assert_eq!(found[2..], [word.clone(), infix.clone()]);
    let syn = ids(&srv.data(s, json!({"p": t.p, "t": "minga"}), None).await["searchKeywords"]);
    assert_eq!(syn, vec![exact.clone()]);
    let first = ids(&srv
        .data(s, json!({"p": t.p, "t": "münchen", "f": 1}), None)
        .await["searchKeywords"]);
    assert_eq!(first, vec![exact.clone()]);
    let q = ids(&srv.data(s, json!({"p": t.q, "t": "münchen"}), None).await["searchKeywords"]);
    assert_eq!(q, vec![other.clone()]);
    for short in ["m", " ", "ü"] {
        assert_eq!(
            code(&srv.gql(s, json!({"p": t.p, "t": short}), None).await),
            "BAD_USER_INPUT"
        );
    }
    assert_eq!(
        code(
            &srv.gql(s, json!({"p": t.p, "t": "mü", "f": 101}), None)
                .await
        ),
        "BAD_USER_INPUT"
    );
}

async fn keyword_pages_cost_a_fixed_number_of_round_trips(engine: Engine) {
    // A 50 ms window on both engines: this test counts exact round trips,
    // and at the default (batches that close when the request yields) a
    // level was seen to split into two waves now and then, on Cassandra (2
    // of about 20 runs) and on the embedded store under the full suite's load
    // (1 of about 8); issue 11 has the open question. The default's batching
    // is measured by the curator-page benchmark's store-call figures.
    let srv = crate::support::server_with(
        engine,
        kartei::kernel::limits::Limits {
            batch_window_ms: 50,
            ..Default::default()
        },
    )
    .await;
    let t = tree(&srv).await;
    let u = uid();
    let admin = srv.admin();
    srv.data(
        "mutation($i: UpsertGndEntityInput!) { upsertGndEntity(input: $i) { id } }",
        json!({"i": {"id": format!("g-{u}"), "name": "gndo:PlaceOrGeographicName", "description": "Geografikum"}}),
        Some(&admin),
    )
    .await;
    let mut all = Vec::new();
    for i in 0..60 {
        let id = format!("k{i:03}-{u}");
        let cats: Vec<&str> = if i % 2 == 0 {
            vec![&t.a1]
        } else {
            vec![&t.a1, &t.q]
        };
        srv.data(
            UPSERT_KEYWORD,
            json!({"i": {"id": id, "label": format!("Ort {i}"), "categoryIds": cats, "gndEntityId": format!("g-{u}")}}),
            Some(&admin),
        )
        .await;
        all.push(id);
    }
    let q = "query($c: ID!, $n: Int, $a: String) { category(id: $c) { keywords(first: $n, after: $a, includeDescendants: true) {
        pageInfo { hasNextPage endCursor } edges { cursor node { id label gndEntity { name } categories { id label portal { id } } } } } } }";
    let (five, d5) = round_trips(&srv.store, srv.data(q, json!({"c": t.p, "n": 5}), None)).await;
    let (fifty, d50) = round_trips(&srv.store, srv.data(q, json!({"c": t.p, "n": 50}), None)).await;
    assert_eq!(
        d5["category"]["keywords"]["edges"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(
        d50["category"]["keywords"]["edges"]
            .as_array()
            .unwrap()
            .len(),
        50
    );
    assert_eq!(five, fifty, "a page of 50 costs what a page of 5 costs");
    assert!(fifty <= 6, "{fifty} round trips");
    // Paging with `first: 7` returns every keyword once, in id order.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let d = srv
            .data(q, json!({"c": t.p, "n": 7, "a": after}), None)
            .await;
        let conn = &d["category"]["keywords"];
        for e in conn["edges"].as_array().unwrap() {
            seen.push(e["node"]["id"].as_str().unwrap().to_owned());
        }
        if !conn["pageInfo"]["hasNextPage"].as_bool().unwrap() {
            break;
        }
        after = conn["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
    assert_eq!(seen, all);
    let r = srv
        .gql(q, json!({"c": t.p, "n": 5, "a": "forged"}), None)
        .await;
    assert_eq!(code(&r), "BAD_CURSOR");
}

async fn every_mutation_needs_the_admin_role(engine: Engine) {
    let srv = server(engine).await;
    let mutations = [
        (
            "mutation { upsertCategory(input: {id: \"c\", label: \"C\"}) { id } }",
            "upsertCategory",
        ),
        ("mutation { deleteCategory(id: \"c\") }", "deleteCategory"),
        (
            "mutation { upsertKeyword(input: {id: \"k\", label: \"K\", categoryIds: [\"c\"]}) { id } }",
            "upsertKeyword",
        ),
        ("mutation { deleteKeyword(id: \"k\") }", "deleteKeyword"),
        (
            "mutation { upsertGndEntity(input: {id: \"g\", name: \"G\"}) { id } }",
            "upsertGndEntity",
        ),
    ];
    let wrong_secret = kartei::edge::auth::Auth::hs256(b"another-secret-0123456789-0123456789")
        .unwrap()
        .mint("x", &["admin".into()], 60)
        .unwrap();
    for (m, name) in mutations {
        assert_eq!(
            code(&srv.gql(m, json!({}), None).await),
            "UNAUTHENTICATED",
            "{name}"
        );
        assert_eq!(
            code(&srv.gql(m, json!({}), Some(&wrong_secret)).await),
            "UNAUTHENTICATED",
            "{name}"
        );
        for role in ["contributor", "archive", "machine", "editor"] {
            let t = srv.token(&[role]);
            assert_eq!(
                code(&srv.gql(m, json!({}), Some(&t)).await),
                "FORBIDDEN",
                "{name} as {role}"
            );
        }
        let r = srv.gql(m, json!({}), Some(&srv.admin())).await;
        let errs = r.get("errors").map(|_| code(&r).to_owned());
        assert!(
            !matches!(errs.as_deref(), Some("UNAUTHENTICATED" | "FORBIDDEN")),
            "{name} as admin: {r}"
        );
    }
    // Readers need no token.
    srv.data("{ portals { id } gndEntities { id } }", json!({}), None)
        .await;
}

/// The ids of the keywords in one partition of a keyword query table.
async fn listed_in(
    store: &kartei::store::DynStore,
    table: &'static kartei::store::Table,
    category: &str,
) -> Vec<String> {
    use kartei::store::{Slice, Store};
    let page = store
        .slice(table, &Slice::partition(vec![category.into()]).limit(1_000))
        .await
        .unwrap();
    page.rows.iter().map(|r| r.string("keyword_id")).collect()
}

/// Issue 30: two concurrent `upsertKeyword` calls moving one keyword to
/// different categories left it in both (40 of 40 tries).
async fn two_concurrent_moves_leave_a_keyword_in_one_category(engine: Engine) {
    use kartei::domains::themes::model::{
        KEYWORDS, KEYWORDS_CATEGORIES, KEYWORDS_HIERARCHIES, KEYWORDS_SEARCH,
    };
    use kartei::domains::themes::service::{KeywordInput, Themes};
    use kartei::store::{Bound, Slice, Store};
    let srv = server(engine).await;
    let t = tree(&srv).await;
    let k = format!("k-{}", uid());
    // Two sides that differ in every derived row: category and portal, and
    // label (so search rows).
    let a = KeywordInput {
        id: k.clone(),
        label: "Alpenort".into(),
        category_ids: vec![t.a1.clone()],
        ..Default::default()
    };
    let b = KeywordInput {
        id: k.clone(),
        label: "Bergdorf".into(),
        synonyms: vec!["Dorf am See".into()],
        category_ids: vec![t.q.clone()],
        ..Default::default()
    };
    // Reads that take a while, so that both moves of a round read the
    // keyword before either writes it (over HTTP one often came first).
    let slow = crate::support::Faulty::new(srv.store.clone());
    *slow.read_delay.lock().unwrap() = Some(std::time::Duration::from_millis(20));
    let themes = Themes::new(slow);
    let admin =
        kartei::kernel::roles::Principal::local("tester", &[kartei::kernel::roles::Role::Admin]);
    themes.upsert_keyword(&admin, a.clone()).await.unwrap();
    let in_table = |table, category: &str| {
        let (store, category, k) = (srv.store.clone(), category.to_owned(), k.clone());
        async move { listed_in(&store, table, &category).await.contains(&k) }
    };
    let searchable = |portal: &str, text: &str| {
        let (store, portal, k) = (srv.store.clone(), portal.to_owned(), k.clone());
        let text = text.to_owned();
        async move {
            let bucket: String = text.chars().take(2).collect();
            let slice = Slice::partition(vec![portal.as_str().into(), bucket.as_str().into()])
                .prefix(vec![kartei::store::Value::Int(0)])
                .lower(Bound::Inclusive(text.as_str().into()))
                .limit(1_000);
            let page = store.slice(&KEYWORDS_SEARCH, &slice).await.unwrap();
            page.rows
                .iter()
                .any(|r| r.string("keyword_id") == k && r.string("search") == text)
        }
    };
    let mut winners = [0; 2];
    for round in 0..40 {
        // Each side differs from the last round's winner too (a field that
        // names the round), and clears the field the other side sets.
        let note = format!("am Berg, Runde {round}");
        let uri = format!("https://xtree.example/{round}");
        let a = KeywordInput {
            note: Some(note.clone()),
            ..a.clone()
        };
        let b = KeywordInput {
            xtree_uri: Some(uri.clone()),
            ..b.clone()
        };
        let (first, second) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (r1, r2) = futures::join!(
            themes.upsert_keyword(&admin, first.clone()),
            themes.upsert_keyword(&admin, second.clone()),
        );
        for r in [r1, r2] {
            // The loser writes again over the winner: both succeed.
            if let Err(e) = r {
                panic!("round {round}: {}", e.message());
            }
        }
        let row = srv
            .store
            .get(&KEYWORDS, &[k.as_str().into()])
            .await
            .unwrap()
            .unwrap();
        let in_a = row.text_list("category_ids") == [t.a1.clone()];
        assert!(
            in_a || row.text_list("category_ids") == [t.q.clone()],
            "round {round}: {row:?}"
        );
        winners[usize::from(!in_a)] += 1;
        let (label, note, uri) = if in_a {
            ("Alpenort", Some(note.as_str()), None)
        } else {
            ("Bergdorf", None, Some(uri.as_str()))
        };
        assert_eq!(row.text("label"), Some(label), "round {round}");
        assert_eq!(
            (row.text("note"), row.text("xtree_uri")),
            (note, uri),
            "round {round}: the fields go with their side"
        );
        assert_eq!(
            row.text_list("hierarchical_category_ids"),
            if in_a {
                vec![t.p.clone(), t.a.clone(), t.a1.clone()]
            } else {
                vec![t.q.clone()]
            },
        );
        assert_eq!(
            (
                in_table(&KEYWORDS_CATEGORIES, &t.a1).await,
                in_table(&KEYWORDS_CATEGORIES, &t.q).await
            ),
            (in_a, !in_a),
            "round {round}: keywords_categories"
        );
        for (c, here) in [(&t.p, in_a), (&t.a, in_a), (&t.a1, in_a), (&t.q, !in_a)] {
            assert_eq!(
                in_table(&KEYWORDS_HIERARCHIES, c).await,
                here,
                "round {round}: keywords_hierarchies {c}"
            );
        }
        for (portal, text, here) in [
            (&t.p, "alpenort", in_a),
            (&t.q, "alpenort", false),
            (&t.p, "bergdorf", false),
            (&t.q, "bergdorf", !in_a),
            (&t.q, "dorf am see", !in_a),
            (&t.p, "dorf am see", false),
        ] {
            assert_eq!(
                searchable(portal, text).await,
                here,
                "round {round}: keywords_search {portal} {text}"
            );
        }
    }
    eprintln!(
        "{engine:?}: side A won {} rounds, side B {}",
        winners[0], winners[1]
    );
}

/// Issue 30: a 3,000-level category chain took 19 s and 1.38 GB to answer,
/// and such chains grow the store with the square of their depth.
async fn categories_deeper_than_the_maximum_category_depth_are_refused(engine: Engine) {
    use kartei::domains::themes::import::import;
    use kartei::domains::themes::model::KEYWORDS_HIERARCHIES;
    use kartei::domains::themes::service::Themes;
    // The setting reaches the server: 4 levels here.
    let srv = crate::support::server_with(
        engine,
        kartei::kernel::limits::Limits {
            vocabulary: kartei::kernel::limits::VocabularyLimits {
                max_category_depth: 4,
            },
            ..crate::support::test_limits()
        },
    )
    .await;
    let u = uid();
    let level = |i: usize| format!("d{i}-{u}");
    category(&srv, &level(1), None, "Portal").await;
    for i in 2..=4 {
        category(&srv, &level(i), Some(&level(i - 1)), &format!("Ebene {i}")).await;
    }
    let r = srv
        .gql(
            UPSERT_CATEGORY,
            json!({"i": {"id": level(5), "parentId": level(4), "label": "Ebene 5"}}),
            Some(&srv.admin()),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let message = r["errors"][0]["message"].as_str().unwrap();
    for part in [
        "level 5",
        "maximum category depth is 4",
        "--max-category-depth",
        "KARTEI_MAX_CATEGORY_DEPTH",
    ] {
        assert!(message.contains(part), "{part} in {message}");
    }
    let q = "query($id: ID!) { category(id: $id) { id children { id } } }";
    let d = srv.data(q, json!({"id": level(5)}), None).await;
    assert_eq!(
        d["category"],
        Value::Null,
        "the refused category is not stored"
    );
    let d = srv.data(q, json!({"id": level(4)}), None).await;
    assert_eq!(d["category"]["children"], json!([]));

    // The importer, at the default of 16: a chain of 3,000 (one line per
    // level, deepest last) keeps 16 levels; every deeper line is refused
    // with its number, the first naming the limit.
    let themes = Themes::new(srv.store.clone());
    let chain = |i: usize| format!("chain{i}-{u}");
    let mut file = String::new();
    for i in 1..=3_000 {
        let parent = (i > 1).then(|| chain(i - 1));
        file.push_str(&json!({"type": "category", "id": chain(i), "parentId": parent, "label": format!("Ebene {i}")}).to_string());
        file.push('\n');
    }
    for (id, at) in [("kw16", 16), ("kw17", 17)] {
        file.push_str(&json!({"type": "keyword", "id": format!("{id}-{u}"), "label": id, "categoryIds": [chain(at)]}).to_string());
        file.push('\n');
    }
    let report = import(&themes, file.as_bytes(), 8).await.unwrap();
    assert_eq!(
        (report.categories, report.keywords),
        (16, 1),
        "{}",
        report.summary()
    );
    assert_eq!(report.errors.len(), 3_000 - 16 + 1);
    let kept: Vec<&(usize, String)> = report.errors.iter().collect();
    assert_eq!(kept[0].0, 17);
    for part in [
        "level 17",
        "maximum category depth is 16",
        "--max-category-depth",
    ] {
        assert!(kept[0].1.contains(part), "{part} in {:?}", kept[0]);
    }
    assert_eq!(
        kept[1],
        &(
            18,
            format!("parent category {} could not be imported", chain(17))
        )
    );
    let d = srv.data(q, json!({"id": chain(16)}), None).await;
    assert_eq!(d["category"]["children"], json!([]));
    assert_eq!(
        srv.data(q, json!({"id": chain(17)}), None).await["category"],
        Value::Null
    );
    // The keyword at the deepest level has a row under each of its 16 levels.
    for i in [1, 8, 16] {
        assert!(
            listed_in(&srv.store, &KEYWORDS_HIERARCHIES, &chain(i))
                .await
                .contains(&format!("kw16-{u}"))
        );
    }
}

/// `children` read the store once per parent, without a loader: a tree of
/// 8 branches of 3 cost 10 reads. Now each level of the tree is one wave of
/// reads, however many parents it has, and the children keep their ancestors.
async fn a_category_tree_is_read_one_wave_per_level(engine: Engine) {
    let srv = crate::support::server_with(
        engine,
        kartei::kernel::limits::Limits {
            batch_window_ms: 50,
            ..Default::default()
        },
    )
    .await;
    let u = uid();
    let root = format!("r-{u}");
    category(&srv, &root, None, "Wurzel").await;
    for b in 0..8 {
        let branch = format!("b{b}-{u}");
        category(&srv, &branch, Some(&root), "Ast").await;
        for l in 0..3 {
            category(&srv, &format!("l{b}{l}-{u}"), Some(&branch), "Blatt").await;
        }
    }
    let q = "query($id: ID!) { category(id: $id) { children { id children { id parentId portal { id } } } } }";
    let (trips, d) = round_trips(&srv.store, srv.data(q, json!({"id": root}), None)).await;
    let branches = d["category"]["children"].as_array().unwrap();
    assert_eq!(branches.len(), 8);
    for b in branches {
        for leaf in b["children"].as_array().unwrap() {
            assert_eq!(leaf["parentId"], b["id"]);
            assert_eq!(leaf["portal"]["id"], json!(root));
        }
    }
    // The category, its children, their children (the portal is cached).
    assert!(trips <= 3, "{trips} round trips");
}

both_engines!(
    a_category_tree_is_read_one_wave_per_level,
    two_concurrent_moves_leave_a_keyword_in_one_category,
    categories_deeper_than_the_maximum_category_depth_are_refused,
    categories_derive_their_hierarchy,
    keywords_get_hierarchical_ids_from_the_server,
    deleting_refuses_categories_that_are_not_empty,
    search_folds_case_and_diacritics_and_ranks,
    keyword_pages_cost_a_fixed_number_of_round_trips,
    every_mutation_needs_the_admin_role,
);

mod import {
    use std::io::BufReader;

    use kartei::domains::themes::import::import;
    use kartei::domains::themes::service::Themes;
    use serde_json::{Value, json};

    use crate::both_engines;
    use crate::support::{Engine, server};

    const DUMP: &str = "{ portals { id label children { id label children { id } } } gndEntities { id name description } }";
    const KW: &str = "query($id: ID!) { keyword(id: $id) { id label synonyms note createdAt primaryGndUri relatedGndUris gndEntity { id } xtreeUri categories { id ancestors { id } } hierarchicalCategories { id } } }";

    async fn a_third_party_file_imports_with_line_numbered_errors(engine: Engine) {
        let srv = server(engine).await;
        let themes = Themes::new(srv.store.clone());
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/vocabulary-sample.ndjson"
        );
        let expect: Value =
            serde_json::from_str(include_str!("../data/vocabulary-sample.expect.json")).unwrap();
        let open = || BufReader::new(std::fs::File::open(path).unwrap());
        let report = import(&themes, open(), 8).await.unwrap();
        let bad: Vec<usize> = report.errors.iter().map(|(n, _)| *n).collect();
        assert_eq!(json!(bad), expect["badLines"], "{:?}", report.errors);
        assert_eq!(json!(report.categories), expect["counts"]["categories"]);
        assert_eq!(json!(report.keywords), expect["counts"]["keywords"]);
        assert_eq!(json!(report.gnd_entities), expect["counts"]["gndEntities"]);
        assert!(
            report
                .errors
                .iter()
                .any(|(n, m)| *n == 18 && m.contains("bb.kali")),
            "{:?}",
            report.errors
        );

        let dump = own(srv.data(DUMP, json!({}), None).await);
        assert_eq!(dump["gndEntities"].as_array().unwrap().len(), 7);
        let portals: Vec<&str> = dump["portals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap())
            .collect();
        for top in expect["topLevelCategoryIds"].as_array().unwrap() {
            assert!(
                portals.contains(&top.as_str().unwrap()),
                "{top} in {portals:?}"
            );
        }
        let mut keywords_before = Vec::new();
        for k in expect["keywords"].as_array().unwrap() {
            let d = srv.data(KW, json!({"id": k["id"]}), None).await;
            let kw = &d["keyword"];
            assert_eq!(kw["label"], k["label"]);
            let chains: Vec<Value> = kw["categories"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let mut chain: Vec<Value> = c["ancestors"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|a| a["id"].clone())
                        .collect();
                    chain.push(c["id"].clone());
                    Value::Array(chain)
                })
                .collect();
            assert_eq!(Value::Array(chains), k["ancestorChains"]);
            keywords_before.push(d);
        }
        let s = "query($p: ID!, $t: String!) { searchKeywords(portalId: $p, text: $t) { id } }";
        let found = srv.data(s, json!({"p": "ik", "t": "MÜNCHEN"}), None).await;
        assert_eq!(found["searchKeywords"][0]["id"], json!("sw-1108"));

        // The same file again changes nothing.
        let again = import(&themes, open(), 8).await.unwrap();
        assert_eq!(again.errors, report.errors);
        assert_eq!(own(srv.data(DUMP, json!({}), None).await), dump);
        for (k, before) in expect["keywords"]
            .as_array()
            .unwrap()
            .iter()
            .zip(keywords_before)
        {
            assert_eq!(srv.data(KW, json!({"id": k["id"]}), None).await, before);
        }
    }

    /// The part of the lookups this file owns (other tests share a cluster keyspace).
    fn own(mut dump: Value) -> Value {
        for (list, keep) in [
            ("portals", ["bb", "ik"].as_slice()),
            ("gndEntities", ["ent-"].as_slice()),
        ] {
            let items = dump[list].as_array().unwrap().iter().filter(|x| {
                let id = x["id"].as_str().unwrap();
                keep.iter().any(|k| {
                    if k.ends_with('-') {
                        id.starts_with(k)
                    } else {
                        id == *k
                    }
                })
            });
            dump[list] = Value::Array(items.cloned().collect());
        }
        dump
    }

    async fn the_demo_vocabulary_imports_cleanly(engine: Engine) {
        let srv = server(engine).await;
        let themes = Themes::new(srv.store.clone());
        let report = import(&themes, kartei::DEMO_VOCABULARY.as_bytes(), 16)
            .await
            .unwrap();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(
            report.keywords >= 300 && report.categories >= 10,
            "{}",
            report.summary()
        );
        let s = "query($t: String!) { searchKeywords(portalId: \"c-wr\", text: $t, first: 3) { label } }";
        for t in ["munchen", "MÜNCH", "München"] {
            let d = srv.data(s, json!({"t": t}), None).await;
            assert_eq!(d["searchKeywords"][0]["label"], json!("München"), "{t}");
        }
    }

    /// The importer writes a chunk's index rows before its keyword rows: an
    /// import that dies in between is finished by running it again.
    async fn an_import_killed_before_its_keyword_rows_is_healed_by_a_rerun(engine: Engine) {
        let srv = server(engine).await;
        let u = crate::support::uid();
        let (p, c, k) = (format!("p-{u}"), format!("c-{u}"), format!("k-{u}"));
        let file = |label: &str| {
            [
                json!({"type": "category", "id": p, "parentId": null, "label": "Portal"}),
                json!({"type": "category", "id": c, "parentId": p, "label": "Orte"}),
                json!({"type": "keyword", "id": k, "label": label, "categoryIds": [c]}),
            ]
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
        };
        let themes = Themes::new(srv.store.clone());
        let first = import(&themes, file("Wasserburg").as_bytes(), 4)
            .await
            .unwrap();
        assert!(first.errors.is_empty(), "{:?}", first.errors);
        // The keyword rows cannot be written (each is a compare-and-set): the
        // index rows change, the keyword row does not.
        let faulty = crate::support::Faulty::new(srv.store.clone());
        *faulty.cas_budget.lock().unwrap() = Some(0);
        let crashing = Themes::new(faulty.clone());
        let killed = import(&crashing, file("Feldkirche").as_bytes(), 4)
            .await
            .unwrap();
        assert_eq!(killed.errors.len(), 1, "{:?}", killed.errors);
        assert!(
            killed.errors[0].1.contains("unavailable"),
            "{:?}",
            killed.errors
        );
        let label = |found: Vec<kartei::domains::themes::model::Keyword>| {
            found.into_iter().map(|k| k.label).collect::<Vec<_>>()
        };
        assert!(label(themes.search(&p, "wasserburg", 5).await.unwrap()).is_empty());
        let again = import(&themes, file("Feldkirche").as_bytes(), 4)
            .await
            .unwrap();
        assert!(again.errors.is_empty(), "{:?}", again.errors);
        assert_eq!(
            label(themes.search(&p, "feldkirche", 5).await.unwrap()),
            ["Feldkirche"]
        );
        assert!(label(themes.search(&p, "wasserburg", 5).await.unwrap()).is_empty());
        assert_eq!(
            label(themes.search(&p, "kirche", 5).await.unwrap()),
            ["Feldkirche"]
        );
    }

    both_engines!(
        a_third_party_file_imports_with_line_numbered_errors,
        the_demo_vocabulary_imports_cleanly,
        an_import_killed_before_its_keyword_rows_is_healed_by_a_rerun
    );
}
