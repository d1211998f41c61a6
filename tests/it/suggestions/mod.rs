//! Image suggestions on both engines: datasets that switch at once, failed and
//! killed imports that stay invisible, rollback, feedback masking, title
//! lookup, the 100-page multi-get, the REST drop-in and role checks.

mod datasets;
mod feedback;
mod pages;

use kartei::domains::suggestions::import::{ImportOptions, ImportReport, import};
use kartei::domains::suggestions::model::SUGGESTIONS;
use kartei::domains::suggestions::service::{ReadOptions, Suggestions};
use kartei::kernel::roles::{Principal, Role};
use kartei::store::{DynStore, Slice, Value};
use serde_json::json;

use crate::support::{Engine, TestApp, uid};

fn machine() -> Principal {
    Principal::local("importer", &[Role::Machine])
}

pub(crate) fn line(page: i32, image: &str, confidence: f64) -> String {
    json!({
        "page_id": page, "image": image, "origin_wiki": "commonswiki",
        "confidence": confidence, "found_on": ["enwiki", "frwiki"],
        "kind": ["istype-wikidata-image"], "page_rev": 100 + page,
        "section_heading": null, "section_index": null, "page_qid": format!("Q{page}")
    })
    .to_string()
}

pub(crate) async fn run_import(
    s: &Suggestions,
    wiki: &str,
    lines: Vec<String>,
    max_errors: usize,
    keep: usize,
) -> ImportReport {
    let text = lines.join("\n");
    import(
        s,
        &machine(),
        std::io::Cursor::new(text.into_bytes()),
        ImportOptions {
            wiki: wiki.into(),
            source: Some("test.ndjson".into()),
            max_errors,
            keep,
            concurrency: 2,
            size: 0,
        },
    )
    .await
    .unwrap()
}

async fn images(s: &Suggestions, wiki: &str, page: i32) -> Vec<(String, String)> {
    s.page(wiki, page, ReadOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.suggestion.image, r.suggestion.id))
        .collect()
}

async fn rows_of(store: &DynStore, wiki: &str, page: i32, dataset: &str) -> usize {
    store
        .slice(
            &SUGGESTIONS,
            &Slice::partition(vec![wiki.into(), Value::Int(page)]).prefix(vec![dataset.into()]),
        )
        .await
        .unwrap()
        .rows
        .len()
}

/// An application, and a wiki of its own whose current dataset is `lines`.
async fn serving(engine: Engine, lines: Vec<String>) -> (TestApp, Suggestions, String) {
    let app = TestApp::on(engine).build().await;
    let s = Suggestions::new(app.store.clone());
    let wiki = format!("w{}", uid());
    assert!(run_import(&s, &wiki, lines, 0, 1).await.published);
    (app, s, wiki)
}
