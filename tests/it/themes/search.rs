//! Finding keywords: search that folds case and diacritics and ranks exact
//! matches first, and keyword pages whose cost does not grow with their size.

use serde_json::json;

use super::{UPSERT_KEYWORD, ids, keyword, tree};
use crate::both_engines;
use crate::support::{Engine, TestApp, code, round_trips, uid};

async fn search_folds_case_and_diacritics_and_ranks(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let t = tree(&app).await;
    let u = uid();
    let (exact, prefix, word, infix, other) = (
        format!("e-{u}"),
        format!("p-{u}"),
        format!("w-{u}"),
        format!("i-{u}"),
        format!("o-{u}"),
    );
    keyword(&app, &infix, "Vormünchenhausen", &[], &[&t.a1]).await;
    keyword(&app, &word, "Hofbräuhaus München", &[], &[&t.a]).await;
    keyword(&app, &prefix, "Münchner Räterepublik", &[], &[&t.a1]).await;
    keyword(&app, &exact, "München", &["Minga"], &[&t.a1]).await;
    keyword(&app, &other, "München", &[], &[&t.q]).await; // another portal
    let s = "query($p: ID!, $t: String!, $f: Int) { searchKeywords(portalId: $p, text: $t, first: $f) { id label } }";
    for text in ["munchen", "MÜNCHEN", "München", "Mu\u{308}nchen"] {
        let found = ids(&app.data(s, json!({"p": t.p, "t": text}), None).await["searchKeywords"]);
        assert_eq!(
            found,
            [exact.clone(), word.clone(), infix.clone()],
            "{text}"
        );
    }
    let found = ids(&app.data(s, json!({"p": t.p, "t": "MÜNCH"}), None).await["searchKeywords"]);
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(
        found[..2].iter().collect::<std::collections::BTreeSet<_>>(),
        [&exact, &prefix].into_iter().collect()
    );
    assert_eq!(found[2..], [word.clone(), infix.clone()]);
    let syn = ids(&app.data(s, json!({"p": t.p, "t": "minga"}), None).await["searchKeywords"]);
    assert_eq!(syn, vec![exact.clone()]);
    let first = ids(&app
        .data(s, json!({"p": t.p, "t": "münchen", "f": 1}), None)
        .await["searchKeywords"]);
    assert_eq!(first, vec![exact.clone()]);
    let q = ids(&app.data(s, json!({"p": t.q, "t": "münchen"}), None).await["searchKeywords"]);
    assert_eq!(q, vec![other.clone()]);
    for short in ["m", " ", "ü"] {
        assert_eq!(
            code(&app.gql(s, json!({"p": t.p, "t": short}), None).await),
            "BAD_USER_INPUT"
        );
    }
    assert_eq!(
        code(
            &app.gql(s, json!({"p": t.p, "t": "mü", "f": 101}), None)
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
    let app = TestApp::on(engine)
        .with_limits(kartei::kernel::limits::Limits {
            batch_window_ms: 50,
            ..Default::default()
        })
        .build()
        .await;
    let t = tree(&app).await;
    let u = uid();
    let admin = app.admin();
    app.data(
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
        app.data(
            UPSERT_KEYWORD,
            json!({"i": {"id": id, "label": format!("Ort {i}"), "categoryIds": cats, "gndEntityId": format!("g-{u}")}}),
            Some(&admin),
        )
        .await;
        all.push(id);
    }
    let q = "query($c: ID!, $n: Int, $a: String) { category(id: $c) { keywords(first: $n, after: $a, includeDescendants: true) {
        pageInfo { hasNextPage endCursor } edges { cursor node { id label gndEntity { name } categories { id label portal { id } } } } } } }";
    let (five, d5) = round_trips(&app.store, app.data(q, json!({"c": t.p, "n": 5}), None)).await;
    let (fifty, d50) = round_trips(&app.store, app.data(q, json!({"c": t.p, "n": 50}), None)).await;
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
        let d = app
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
    let r = app
        .gql(q, json!({"c": t.p, "n": 5, "a": "forged"}), None)
        .await;
    assert_eq!(code(&r), "BAD_CURSOR");
}

both_engines!(
    search_folds_case_and_diacritics_and_ranks,
    keyword_pages_cost_a_fixed_number_of_round_trips,
);
