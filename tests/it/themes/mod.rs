//! The themes domain through GraphQL over real HTTP, on both engines: the
//! category tree, keywords and their search, who may change them, and the
//! vocabulary importer.

mod concurrency;
mod depth;
mod hierarchy;
mod import;
mod reconcile;
mod roles;
mod search;
mod skos;

use serde_json::{Value, json};

use crate::support::{TestApp, uid};

const UPSERT_CATEGORY: &str = "mutation($i: UpsertCategoryInput!) { upsertCategory(input: $i) { id label parentId ancestors { id } portal { id } } }";
const UPSERT_KEYWORD: &str = "mutation($i: UpsertKeywordInput!) { upsertKeyword(input: $i) { id label synonyms createdAt categories { id } hierarchicalCategories { id } } }";

/// The administrator upserts a category.
async fn category(app: &TestApp, id: &str, parent: Option<&str>, label: &str) -> Value {
    let vars = json!({"i": {"id": id, "parentId": parent, "label": label}});
    app.as_admin().query(UPSERT_CATEGORY, vars).await["upsertCategory"].clone()
}

/// The administrator upserts a keyword.
async fn keyword(app: &TestApp, id: &str, label: &str, synonyms: &[&str], cats: &[&str]) -> Value {
    let vars = json!({"i": {"id": id, "label": label, "synonyms": synonyms, "categoryIds": cats}});
    app.as_admin().query(UPSERT_KEYWORD, vars).await["upsertKeyword"].clone()
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

async fn tree(app: &TestApp) -> Tree {
    let u = uid();
    let t = Tree {
        p: format!("p-{u}"),
        a: format!("a-{u}"),
        a1: format!("a1-{u}"),
        q: format!("q-{u}"),
    };
    category(app, &t.p, None, "vocnet:hasAsLabel\"Bayern\"").await;
    category(app, &t.a, Some(&t.p), "Orte").await;
    category(app, &t.a1, Some(&t.a), "Städte").await;
    category(app, &t.q, None, "Andere").await;
    t
}

/// The ids of the keywords in one partition of a keyword query table.
async fn listed_in(
    store: &kartei::store::DynStore,
    table: &'static kartei::store::Table,
    category: &str,
) -> Vec<String> {
    use kartei::store::Slice;
    let page = store
        .slice(table, &Slice::partition(vec![category.into()]).limit(1_000))
        .await
        .unwrap();
    page.rows.iter().map(|r| r.string("keyword_id")).collect()
}
