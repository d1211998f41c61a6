//! Reading suggestions: by title, many pages at once, random pages, and page
//! ids asked for twice.

use kartei::domains::suggestions::service::{ReadOptions, Suggestions};
use serde_json::{Value as Json, json};

use super::{line, run_import, serving};
use crate::both_engines;
use crate::support::{Engine, code, round_trips, server, uid};

async fn titles_and_many_pages(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let mut lines: Vec<String> = (0..100)
        .map(|p| line(p, &format!("P{p}.jpg"), 0.5))
        .collect();
    lines
        .push(json!({"row": "title", "title": "Berlin", "page_id": 42, "page_rev": 9}).to_string());
    lines.push(
        json!({"row": "instanceof", "page_id": 42, "page_rev": 9, "instance_of": ["Q515", "Q5119"]})
            .to_string(),
    );
    assert!(run_import(&s, &wiki, lines, 0, 1).await.published);
    let d = srv
        .data(
            "query($w: String!) { imageSuggestions(wiki: $w, title: \"Berlin\") { pageId image } }",
            json!({"w": wiki}),
            None,
        )
        .await;
    assert_eq!(d["imageSuggestions"][0]["image"], "P42.jpg");
    let none = srv
        .data(
            "query($w: String!) { imageSuggestions(wiki: $w, title: \"Nowhere\") { image } }",
            json!({"w": wiki}),
            None,
        )
        .await;
    assert_eq!(none["imageSuggestions"], json!([]));

    // 100 pages: the pointer and the feedback in one wave, the suggestions in
    // a second (three store calls, each of concurrent single-partition reads).
    let ids: Vec<i32> = (0..100).collect();
    let (calls, pages) =
        round_trips(&srv.store, s.pages(&wiki, &ids, ReadOptions::default())).await;
    let pages = pages.unwrap();
    assert_eq!(calls, 3);
    assert_eq!(pages.len(), 100);
    assert!(
        pages
            .iter()
            .enumerate()
            .all(|(i, p)| p[0].suggestion.image == format!("P{i}.jpg"))
    );
    let too_many: Vec<i32> = (0..101).collect();
    assert_eq!(
        s.pages(&wiki, &too_many, ReadOptions::default())
            .await
            .unwrap_err()
            .code(),
        "BAD_USER_INPUT"
    );
    let gql = srv
        .data(
            "query($w: String!, $p: [Int!]!) { imageSuggestionsForPages(wiki: $w, pageIds: $p) { pageId suggestions { image } } }",
            json!({"w": wiki, "p": [3, 5, 1000]}),
            None,
        )
        .await;
    assert_eq!(
        gql["imageSuggestionsForPages"][1]["suggestions"][0]["image"],
        "P5.jpg"
    );
    assert_eq!(gql["imageSuggestionsForPages"][2]["suggestions"], json!([]));
    // Every page a request names, through its DataLoader: one batched read.
    let (calls, d) = round_trips(
        &srv.store,
        srv.data(
            "query($w: String!) { a: imageSuggestions(wiki: $w, pageId: 1) { image }
               b: imageSuggestions(wiki: $w, pageId: 2, minConfidence: 0.9) { image }
               c: imageSuggestionsForPages(wiki: $w, pageIds: [3, 4]) { pageId suggestions { image } } }",
            json!({"w": wiki}),
            None,
        ),
    )
    .await;
    assert_eq!(calls, 3, "{d}");
    assert_eq!(d["a"][0]["image"], "P1.jpg");
    assert_eq!(d["b"], json!([]), "below minConfidence");
    assert_eq!(d["c"][1]["suggestions"][0]["image"], "P4.jpg");

    // Random pages: distinct pages of the dataset with open suggestions.
    let random = s.random_pages(&wiki, 10).await.unwrap();
    assert_eq!(random.len(), 10);
    let distinct: std::collections::BTreeSet<_> = random.iter().collect();
    assert_eq!(distinct.len(), 10);
    assert!(random.iter().all(|p| (0..100).contains(p)));
    assert!(s.random_pages(&wiki, 51).await.is_err());

    // REST: the public service's field names and JSON types.
    let base = &srv.url;
    let get = |path: String, token: Option<String>| {
        let c = srv.client.clone();
        async move {
            let mut r = c.get(format!("{base}{path}"));
            if let Some(t) = token {
                r = r.bearer_auth(t);
            }
            let resp = r.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Json>().await.unwrap())
        }
    };
    let (status, body) = get(
        format!("/public/image_suggestions/suggestions/{wiki}/42"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let row = &body["rows"][0];
    let mut keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "confidence",
            "found_on",
            "id",
            "image",
            "kind",
            "origin_wiki",
            "page_id",
            "page_qid",
            "page_rev",
            "section_heading",
            "section_index",
            "wiki"
        ]
    );
    assert!(row["page_id"].is_i64() && row["confidence"].is_f64() && row["found_on"].is_array());
    assert!(row["section_heading"].is_null() && row["page_rev"].is_i64());
    let (_, empty) = get(
        "/public/image_suggestions/suggestions/nowiki/1".into(),
        None,
    )
    .await;
    assert_eq!(empty, json!({"rows": []}));
    let (status, bad) = get(
        format!("/public/image_suggestions/suggestions/{wiki}/abc"),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["error"]["code"], "BAD_USER_INPUT");
    let private = format!("/private/image_suggestions/instanceof_cache/{wiki}/42");
    assert_eq!(get(private.clone(), None).await.0, 401);
    assert_eq!(
        get(private.clone(), Some(srv.token(&["contributor"])))
            .await
            .0,
        403
    );
    let (status, inst) = get(private, Some(srv.token(&["editor"]))).await;
    assert_eq!(status, 200);
    assert_eq!(
        inst["rows"][0]["instance_of"],
        json!(["Q5119", "Q515"]),
        "a set, sorted"
    );
    let (_, title) = get(
        format!("/private/image_suggestions/title_cache/{wiki}/Berlin"),
        Some(srv.token(&["machine"])),
    )
    .await;
    assert_eq!(title["rows"][0]["page_id"], 42);
    let (_, fb) = get(
        format!("/private/image_suggestions/feedback/{wiki}/42"),
        Some(srv.admin()),
    )
    .await;
    assert_eq!(fb, json!({"rows": []}));
}

/// `randomPagesWithSuggestions` answers every count it documents (1 to 50),
/// also where one bucket of the dataset's keys holds more pages than one
/// multi-page read takes; 0 and 51 are refused.
async fn random_pages_answer_every_documented_count(engine: Engine) {
    // Page ids in one bucket of 16: 150 keys for the walk to read there.
    let (app, _, wiki) = serving(
        engine,
        (0..150)
            .map(|i| line(16 * i, &format!("P{i}.jpg"), 0.5))
            .collect(),
    )
    .await;
    let query = "query($w: String!, $n: Int) { randomPagesWithSuggestions(wiki: $w, count: $n) }";
    for n in [1, 10, 25, 26, 27, 40, 49, 50] {
        let d = app
            .anonymous()
            .query(query, json!({"w": wiki, "n": n}))
            .await;
        let pages: Vec<i64> = d["randomPagesWithSuggestions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_i64().unwrap())
            .collect();
        assert_eq!(pages.len(), n as usize, "count {n}: {pages:?}");
        let distinct: std::collections::BTreeSet<_> = pages.iter().collect();
        assert_eq!(distinct.len(), pages.len(), "count {n}: {pages:?}");
        assert!(
            pages
                .iter()
                .all(|p| p % 16 == 0 && (0..16 * 150).contains(p)),
            "{pages:?}"
        );
    }
    for n in [0, 51, -1] {
        let r = app
            .anonymous()
            .response(query, json!({"w": wiki, "n": n}))
            .await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "count {n}");
    }
}

/// A page named twice (or more) in `imageSuggestionsForPages`, or by two
/// `imageSuggestions` fields of one request, is answered each time, in the
/// order asked.
async fn duplicate_page_ids_are_each_answered(engine: Engine) {
    let (app, _, wiki) = serving(
        engine,
        vec![line(5, "Five.jpg", 0.9), line(6, "Six.jpg", 0.9)],
    )
    .await;
    let d = app.anonymous().query("query($w: String!) {
               many: imageSuggestionsForPages(wiki: $w, pageIds: [5, 6, 5, 5, 7]) { pageId suggestions { image } }
               a: imageSuggestions(wiki: $w, pageId: 5) { image }
               b: imageSuggestions(wiki: $w, pageId: 5) { image } }", json!({"w": wiki}))
        .await;
    let answered: Vec<(i64, Json)> = d["many"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pageId"].as_i64().unwrap(), p["suggestions"].clone()))
        .collect();
    let five = json!([{"image": "Five.jpg"}]);
    assert_eq!(
        answered,
        [
            (5, five.clone()),
            (6, json!([{"image": "Six.jpg"}])),
            (5, five.clone()),
            (5, five.clone()),
            (7, json!([])),
        ]
    );
    assert_eq!(d["a"], five);
    assert_eq!(d["b"], five);
}

both_engines!(
    titles_and_many_pages,
    random_pages_answer_every_documented_count,
    duplicate_page_ids_are_each_answered,
);
