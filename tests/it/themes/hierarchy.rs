//! The category tree: ancestors and portals derived by the server, keywords
//! placed in it, what may be deleted or moved, and a tree read one wave of
//! reads per level.

use serde_json::{Value, json};

use super::{UPSERT_CATEGORY, UPSERT_KEYWORD, category, ids, keyword, tree};
use crate::both_engines;
use crate::support::{Engine, TestApp, code, round_trips, uid};

async fn categories_derive_their_hierarchy(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let t = tree(&app).await;
    let reader = app.anonymous();
    let q = "query($id: ID!) { category(id: $id) { id label parentId parent { id } ancestors { id } portal { id label } children { id label } } portals { id label } }";
    let d = reader.query(q, json!({"id": t.a1})).await;
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
    let p = reader.query(q, json!({"id": t.p})).await;
    assert_eq!(ids(&p["category"]["children"]), vec![t.a.clone()]);
    assert_eq!(
        p["category"]["portal"]["id"],
        json!(t.p),
        "a portal is its own portal"
    );
    assert_eq!(p["category"]["ancestors"], json!([]));
    assert_eq!(
        reader.query(q, json!({"id": "nope"})).await["category"],
        Value::Null
    );
}

async fn keywords_get_hierarchical_ids_from_the_server(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let t = tree(&app).await;
    let k = format!("k-{}", uid());
    let created = keyword(
        &app,
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
    let moved = keyword(&app, &k, "München", &[], &[&t.q]).await;
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
    assert!(kw(&app.data(q, json!({"c": t.p, "d": true}), None).await).is_empty());
    assert_eq!(
        kw(&app.data(q, json!({"c": t.q, "d": false}), None).await),
        vec![k.clone()]
    );
    let s = "query($p: ID!, $t: String!) { searchKeywords(portalId: $p, text: $t) { id } }";
    assert!(
        ids(&app.data(s, json!({"p": t.p, "t": "münchen"}), None).await["searchKeywords"])
            .is_empty()
    );
    assert_eq!(
        ids(&app.data(s, json!({"p": t.q, "t": "münchen"}), None).await["searchKeywords"]),
        vec![k.clone()]
    );
    // Unknown categories and GND entities are refused.
    let admin = app.admin();
    let r = app
        .gql(
            UPSERT_KEYWORD,
            json!({"i": {"id": "x", "label": "x", "categoryIds": ["missing"]}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let r = app
        .gql(
            UPSERT_KEYWORD,
            json!({"i": {"id": "x", "label": "x", "categoryIds": [t.q], "gndEntityId": "none"}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let r = app
        .gql(
            UPSERT_KEYWORD,
            json!({"i": {"id": " ", "label": "x", "categoryIds": [t.q]}}),
            Some(&admin),
        )
        .await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
}

async fn deleting_refuses_categories_that_are_not_empty(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let t = tree(&app).await;
    let admin = app.as_admin();
    let k = format!("k-{}", uid());
    keyword(&app, &k, "Augsburg", &[], &[&t.q]).await;
    let del = "mutation($id: ID!) { deleteCategory(id: $id) }";
    // One with a child, one with a keyword, one that does not exist.
    assert_eq!(
        admin.query_err(del, json!({"id": t.a})).await,
        "BAD_USER_INPUT"
    );
    assert_eq!(
        admin.query_err(del, json!({"id": t.q})).await,
        "BAD_USER_INPUT"
    );
    assert_eq!(
        admin.query_err(del, json!({"id": "nope"})).await,
        "NOT_FOUND"
    );
    // Moving a category with children is refused too.
    let moved = json!({"i": {"id": t.a, "parentId": t.q, "label": "Orte"}});
    assert_eq!(
        admin.query_err(UPSERT_CATEGORY, moved).await,
        "BAD_USER_INPUT"
    );
    let own_parent = json!({"i": {"id": t.a, "parentId": t.a, "label": "Orte"}});
    assert_eq!(
        admin.query_err(UPSERT_CATEGORY, own_parent).await,
        "BAD_USER_INPUT"
    );
    // Emptied, they go.
    let delk = "mutation($id: ID!) { deleteKeyword(id: $id) }";
    assert_eq!(
        admin.query(delk, json!({"id": k})).await["deleteKeyword"],
        json!(k)
    );
    assert_eq!(
        admin.query(del, json!({"id": t.q})).await["deleteCategory"],
        json!(t.q)
    );
    assert_eq!(
        admin.query(del, json!({"id": t.a1})).await["deleteCategory"],
        json!(t.a1)
    );
    let d = app.anonymous().query("query($id: ID!, $k: ID!) { category(id: $id) { children { id } } keyword(id: $k) { id } portals { id } }", json!({"id": t.a, "k": k})).await;
    assert_eq!(d["category"]["children"], json!([]));
    assert_eq!(d["keyword"], Value::Null);
    assert!(!ids(&d["portals"]).contains(&t.q));
}

/// `children` read the store once per parent, without a loader: a tree of
/// 8 branches of 3 cost 10 reads. Now each level of the tree is one wave of
/// reads, however many parents it has, and the children keep their ancestors.
async fn a_category_tree_is_read_one_wave_per_level(engine: Engine) {
    let app = TestApp::on(engine)
        .with_limits(kartei::kernel::limits::Limits {
            batch_window_ms: 50,
            ..Default::default()
        })
        .build()
        .await;
    let u = uid();
    let root = format!("r-{u}");
    category(&app, &root, None, "Wurzel").await;
    for b in 0..8 {
        let branch = format!("b{b}-{u}");
        category(&app, &branch, Some(&root), "Ast").await;
        for l in 0..3 {
            category(&app, &format!("l{b}{l}-{u}"), Some(&branch), "Blatt").await;
        }
    }
    let q = "query($id: ID!) { category(id: $id) { children { id children { id parentId portal { id } } } } }";
    let (trips, d) = round_trips(&app.store, app.data(q, json!({"id": root}), None)).await;
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
    categories_derive_their_hierarchy,
    keywords_get_hierarchical_ids_from_the_server,
    deleting_refuses_categories_that_are_not_empty,
    a_category_tree_is_read_one_wave_per_level,
);
