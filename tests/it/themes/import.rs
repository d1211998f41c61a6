//! The vocabulary importer: a third party's file with line-numbered errors,
//! the demo vocabulary, and an import killed halfway healed by a rerun.

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
        serde_json::from_str(include_str!("../../data/vocabulary-sample.expect.json")).unwrap();
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
    let s =
        "query($t: String!) { searchKeywords(portalId: \"c-wr\", text: $t, first: 3) { label } }";
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
