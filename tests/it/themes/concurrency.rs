//! Two administrators moving one keyword at once: it ends in one category,
//! with every derived row on the winner's side.

use super::{listed_in, tree};
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

/// Issue 30: two concurrent `upsertKeyword` calls moving one keyword to
/// different categories left it in both (40 of 40 tries).
async fn two_concurrent_moves_leave_a_keyword_in_one_category(engine: Engine) {
    use kartei::domains::themes::model::{
        KEYWORDS, KEYWORDS_CATEGORIES, KEYWORDS_HIERARCHIES, KEYWORDS_SEARCH,
    };
    use kartei::domains::themes::service::{KeywordInput, Themes};
    use kartei::store::{Bound, Slice};
    let app = TestApp::on(engine).build().await;
    let t = tree(&app).await;
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
    let slow = crate::support::Faulty::new(app.store.clone());
    *slow.read_delay.lock().unwrap() = Some(std::time::Duration::from_millis(20));
    let themes = Themes::new(slow);
    let admin =
        kartei::kernel::roles::Principal::local("tester", &[kartei::kernel::roles::Role::Admin]);
    themes.upsert_keyword(&admin, a.clone()).await.unwrap();
    let in_table = |table, category: &str| {
        let (store, category, k) = (app.store.clone(), category.to_owned(), k.clone());
        async move { listed_in(&store, table, &category).await.contains(&k) }
    };
    let searchable = |portal: &str, text: &str| {
        let (store, portal, k) = (app.store.clone(), portal.to_owned(), k.clone());
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
        let row = app
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

both_engines!(two_concurrent_moves_leave_a_keyword_in_one_category);
