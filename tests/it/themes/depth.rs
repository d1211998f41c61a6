//! The maximum category depth, through the API and through the importer.

use serde_json::{Value, json};

use super::{UPSERT_CATEGORY, category, listed_in};
use crate::both_engines;
use crate::support::{Engine, TestApp, code, uid};

/// Issue 30: a 3,000-level category chain took 19 s and 1.38 GB to answer,
/// and such chains grow the store with the square of their depth.
async fn categories_deeper_than_the_maximum_category_depth_are_refused(engine: Engine) {
    use kartei::domains::themes::import::import;
    use kartei::domains::themes::model::KEYWORDS_HIERARCHIES;
    use kartei::domains::themes::service::Themes;
    // The setting reaches the server: 4 levels here.
    let app = TestApp::on(engine)
        .with_limits(kartei::kernel::limits::Limits {
            vocabulary: kartei::kernel::limits::VocabularyLimits {
                max_category_depth: 4,
            },
            ..crate::support::test_limits()
        })
        .build()
        .await;
    let u = uid();
    let level = |i: usize| format!("d{i}-{u}");
    category(&app, &level(1), None, "Portal").await;
    for i in 2..=4 {
        category(&app, &level(i), Some(&level(i - 1)), &format!("Ebene {i}")).await;
    }
    let r = app
        .gql(
            UPSERT_CATEGORY,
            json!({"i": {"id": level(5), "parentId": level(4), "label": "Ebene 5"}}),
            Some(&app.admin()),
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
    let d = app.data(q, json!({"id": level(5)}), None).await;
    assert_eq!(
        d["category"],
        Value::Null,
        "the refused category is not stored"
    );
    let d = app.data(q, json!({"id": level(4)}), None).await;
    assert_eq!(d["category"]["children"], json!([]));

    // The importer, at the default of 16: a chain of 3,000 (one line per
    // level, deepest last) keeps 16 levels; every deeper line is refused
    // with its number, the first naming the limit.
    let themes = Themes::new(app.store.clone());
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
    let d = app.data(q, json!({"id": chain(16)}), None).await;
    assert_eq!(d["category"]["children"], json!([]));
    assert_eq!(
        app.data(q, json!({"id": chain(17)}), None).await["category"],
        Value::Null
    );
    // The keyword at the deepest level has a row under each of its 16 levels.
    for i in [1, 8, 16] {
        assert!(
            listed_in(&app.store, &KEYWORDS_HIERARCHIES, &chain(i))
                .await
                .contains(&format!("kw16-{u}"))
        );
    }
}

both_engines!(categories_deeper_than_the_maximum_category_depth_are_refused);
