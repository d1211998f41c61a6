//! The wire formats of the Reconciliation API, version 0.2 and the 1.0
//! draft: reading query batches and extension requests, writing manifests,
//! results, suggestions, extensions and property proposals. Pure functions
//! over JSON; the shapes are checked against the specification's JSON
//! schemas by `scripts/reconcile/validate.py`.

use serde_json::{Map, Value, json};

use super::engine::{Candidate, Cell, Condition, KEYWORD_TYPE, PROPERTIES, Quantifier, Query};
use crate::kernel::error::{ApiError, ApiResult};

/// The protocol version of a route.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Version {
    V02,
    V10,
}

/// Where a service lives: the server's base URL and the service's path
/// (`/reconcile`, `/reconcile/portals/{id}`, each with `/1.0` for the draft).
pub struct Service<'a> {
    pub base: &'a str,
    pub path: String,
    pub name: String,
}

/// The preview's frame, in pixels.
const PREVIEW: (u32, u32) = (400, 140);
/// Queries OpenRefine is told to send in one batch.
const BATCH_SIZE: usize = 50;
/// Candidates a query without a limit gets.
pub const DEFAULT_LIMIT: usize = 10;

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::bad_input(msg)
}

/// A value of a condition as text: a string, a number, a boolean, or an
/// entity's id.
fn value_text(v: &Value) -> ApiResult<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Object(o) => o
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| bad("an entity value needs an \"id\"")),
        _ => Err(bad(
            "a property value is a string, number, boolean or {\"id\"}",
        )),
    }
}

fn values_of(v: &Value) -> ApiResult<Vec<String>> {
    match v {
        Value::Array(a) => a.iter().map(value_text).collect(),
        other => Ok(vec![value_text(other)?]),
    }
}

fn limit_of(v: Option<&Value>) -> ApiResult<usize> {
    match v {
        None | Some(Value::Null) => Ok(DEFAULT_LIMIT),
        Some(n) => n
            .as_u64()
            .map(|n| if n == 0 { DEFAULT_LIMIT } else { n as usize })
            .ok_or_else(|| bad("a query's limit is a positive integer")),
    }
}

/// The type of a query: one id (a list's first; 0.2 allows several).
fn type_of(v: Option<&Value>) -> ApiResult<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(a)) => match a.first() {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad("a type is a string")),
        },
        Some(_) => Err(bad("a type is a string")),
    }
}

/// A 0.2 batch: `{"q0": {"query", "type", "limit", "properties": [{"pid", "v"}], "type_strict"}}`,
/// in the batch's key order.
pub fn queries_02(text: &str) -> ApiResult<Vec<(String, Query)>> {
    let batch: Map<String, Value> = serde_json::from_str(text)
        .map_err(|e| bad(format!("queries is not a JSON object: {e}")))?;
    batch
        .into_iter()
        .map(|(key, q)| {
            let o = q
                .as_object()
                .ok_or_else(|| bad(format!("query {key:?} is not an object")))?;
            let conditions = match o.get("properties") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(ps)) => ps
                    .iter()
                    .map(|p| {
                        let pid = p.get("pid").and_then(Value::as_str).ok_or_else(|| {
                            bad(format!("a property of query {key:?} needs a \"pid\""))
                        })?;
                        let v = p.get("v").ok_or_else(|| {
                            bad(format!("a property of query {key:?} needs a \"v\""))
                        })?;
                        Ok(Condition {
                            property: pid.to_owned(),
                            values: values_of(v)?,
                            quantifier: Quantifier::Any,
                            required: false,
                        })
                    })
                    .collect::<ApiResult<Vec<_>>>()?,
                Some(_) => return Err(bad(format!("properties of query {key:?} is not a list"))),
            };
            let text = match o.get("query") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(_) => return Err(bad(format!("query {key:?}: \"query\" is a string"))),
            };
            if text.trim().is_empty() && conditions.is_empty() {
                return Err(bad(format!(
                    "query {key:?} has neither a query nor properties"
                )));
            }
            Ok((
                key,
                Query {
                    text,
                    type_id: type_of(o.get("type"))?,
                    limit: limit_of(o.get("limit"))?,
                    conditions,
                },
            ))
        })
        .collect()
}

/// A 1.0 batch: `{"queries": [{"conditions": [{"matchType", "propertyId",
/// "propertyValue", "required", "matchQuantifier"}], "type", "limit"}]}`.
pub fn queries_10(body: &Value) -> ApiResult<Vec<Query>> {
    let list = body
        .get("queries")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the body is {\"queries\": [...]}"))?;
    list.iter()
        .enumerate()
        .map(|(n, q)| {
            let conds = q
                .get("conditions")
                .and_then(Value::as_array)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| bad(format!("query {n} needs a list of conditions")))?;
            let mut text = Vec::new();
            let mut conditions = Vec::new();
            for c in conds {
                let value = c.get("propertyValue").ok_or_else(|| {
                    bad(format!("a condition of query {n} needs a propertyValue"))
                })?;
                let quantifier = match c.get("matchQuantifier").and_then(Value::as_str) {
                    None | Some("any") => Quantifier::Any,
                    Some("all") => Quantifier::All,
                    Some("none") => Quantifier::None,
                    Some(other) => return Err(bad(format!("unknown matchQuantifier {other:?}"))),
                };
                let required = c.get("required").and_then(Value::as_bool).unwrap_or(false);
                match c.get("matchType").and_then(Value::as_str) {
                    Some("name") => text.extend(values_of(value)?),
                    Some("id") => conditions.push(Condition {
                        property: "id".into(),
                        values: values_of(value)?,
                        quantifier,
                        required,
                    }),
                    Some("property") => {
                        let pid = c.get("propertyId").and_then(Value::as_str).ok_or_else(|| {
                            bad(format!(
                                "a property condition of query {n} needs a propertyId"
                            ))
                        })?;
                        conditions.push(Condition {
                            property: pid.to_owned(),
                            values: values_of(value)?,
                            quantifier,
                            required,
                        });
                    }
                    _ => return Err(bad(format!("query {n}: matchType is name, id or property"))),
                }
            }
            Ok(Query {
                text: text.join(" "),
                type_id: type_of(q.get("type"))?,
                limit: limit_of(q.get("limit"))?,
                conditions,
            })
        })
        .collect()
}

fn types_json(types: &[(String, String)]) -> Value {
    types
        .iter()
        .map(|(id, name)| json!({ "id": id, "name": name }))
        .collect()
}

fn candidate_json(c: &Candidate) -> Value {
    let mut v = json!({
        "id": c.id,
        "name": c.name,
        "score": c.score,
        "match": c.matched,
        "type": types_json(&c.types),
    });
    if let Some(d) = &c.description {
        v["description"] = json!(d);
    }
    v
}

/// The results of a batch: 0.2 by the queries' keys, 1.0 in their order.
pub fn results(version: Version, keys: &[String], answers: &[Vec<Candidate>]) -> Value {
    match version {
        Version::V02 => {
            let mut out = Map::new();
            for (k, a) in keys.iter().zip(answers) {
                out.insert(
                    k.clone(),
                    json!({ "result": a.iter().map(candidate_json).collect::<Vec<_>>() }),
                );
            }
            Value::Object(out)
        }
        Version::V10 => json!({
            "results": answers
                .iter()
                .map(|a| json!({ "candidates": a.iter().map(candidate_json).collect::<Vec<_>>() }))
                .collect::<Vec<_>>()
        }),
    }
}

/// The service manifest.
pub fn manifest(version: Version, s: &Service<'_>) -> Value {
    let url = format!("{}{}", s.base, s.path);
    let default_types = json!([{ "id": KEYWORD_TYPE.0, "name": KEYWORD_TYPE.1 }]);
    match version {
        Version::V02 => {
            let suggest = |kind: &str| json!({ "service_url": s.base, "service_path": format!("{}/suggest/{kind}", s.path) });
            json!({
                "versions": ["0.2"],
                "name": s.name,
                "identifierSpace": format!("{}/keywords/", s.base),
                "schemaSpace": format!("{}/reconcile/schema/", s.base),
                "defaultTypes": default_types,
                "view": { "url": format!("{url}/preview?id={{{{id}}}}") },
                "preview": { "url": format!("{url}/preview?id={{{{id}}}}"), "width": PREVIEW.0, "height": PREVIEW.1 },
                "suggest": { "entity": suggest("entity"), "type": suggest("type"), "property": suggest("property") },
                "extend": {
                    "propose_properties": { "service_url": s.base, "service_path": format!("{}/properties", s.path) },
                    "property_settings": [],
                },
                "batchSize": BATCH_SIZE,
            })
        }
        Version::V10 => json!({
            "versions": ["1.0-draft"],
            "name": s.name,
            "defaultTypes": default_types,
            "view": { "url": format!("{url}/preview?id={{id}}") },
            "preview": { "width": PREVIEW.0, "height": PREVIEW.1 },
            "suggest": { "entity": true, "type": true, "property": true },
            "extend": { "proposeProperties": true, "propertySettings": [] },
            "batchSize": BATCH_SIZE,
            "standardizedScore": true,
        }),
    }
}

/// Entity suggestions.
pub fn suggested_entities(found: &[Candidate]) -> Value {
    json!({
        "result": found
            .iter()
            .map(|c| {
                let mut v = json!({ "id": c.id, "name": c.name });
                if let Some(d) = &c.description {
                    v["description"] = json!(d);
                }
                v
            })
            .collect::<Vec<_>>()
    })
}

/// Type suggestions: (id, name, description).
pub fn suggested_types(found: &[(String, String, Option<String>)]) -> Value {
    json!({
        "result": found
            .iter()
            .map(|(id, name, path)| {
                let mut v = json!({ "id": id, "name": name });
                if let Some(p) = path {
                    v["description"] = json!(p);
                }
                v
            })
            .collect::<Vec<_>>()
    })
}

/// Property suggestions (and proposals' list).
fn properties_json(found: &[(&str, &str)]) -> Vec<Value> {
    found
        .iter()
        .map(|(id, name)| json!({ "id": id, "name": name }))
        .collect()
}

pub fn suggested_properties(found: &[(&str, &str)]) -> Value {
    json!({ "result": properties_json(found) })
}

/// Property proposals for a type (every property for `Keyword` and for a
/// category, none for another type).
pub fn proposals(type_id: &str, known_type: bool, limit: usize) -> Value {
    let all: Vec<(&str, &str)> = if known_type {
        PROPERTIES.to_vec()
    } else {
        Vec::new()
    };
    let listed: Vec<(&str, &str)> = all.into_iter().take(limit).collect();
    json!({ "type": type_id, "properties": properties_json(&listed), "limit": limit })
}

/// An extension request: keyword ids and property ids.
pub fn extend_request(body: &Value) -> ApiResult<(Vec<String>, Vec<String>)> {
    let ids = body
        .get("ids")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("an extension request is {\"ids\": [...], \"properties\": [{\"id\"}]}"))?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| bad("an id is a string"))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let properties = body
        .get("properties")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("an extension request needs \"properties\": [{\"id\"}]"))?
        .iter()
        .map(|p| {
            let id = p
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("a property to extend by needs an \"id\""))?;
            if super::engine::is_property(id) {
                Ok(id.to_owned())
            } else {
                Err(bad(format!(
                    "unknown property {id:?}; the properties are {}",
                    PROPERTIES.map(|p| p.0).join(", ")
                )))
            }
        })
        .collect::<ApiResult<Vec<String>>>()?;
    // Each property once (there are only so many): a request naming one
    // many times asks for nothing more.
    let mut once: Vec<String> = Vec::new();
    for p in properties {
        if !once.contains(&p) {
            once.push(p);
        }
    }
    Ok((ids, once))
}

fn cell_json(c: &Cell) -> Value {
    match c {
        Cell::Text(t) => json!({ "str": t }),
        Cell::Entity(id, name) => json!({ "id": id, "name": name }),
    }
}

/// An extension's answer: for each requested id (in order), each property's
/// values; an unknown id has no values.
pub fn extension(
    version: Version,
    properties: &[String],
    rows: &[(String, Vec<Vec<Cell>>)],
) -> Value {
    let meta: Vec<Value> = properties
        .iter()
        .map(|p| {
            let name = PROPERTIES
                .iter()
                .find(|x| x.0 == p)
                .map_or(p.as_str(), |x| x.1);
            let mut m = json!({ "id": p, "name": name });
            if p == "category" || p == "portal" {
                m["type"] = json!({ "id": "Category", "name": "Category" });
            }
            m
        })
        .collect();
    match version {
        Version::V02 => {
            let mut out = Map::new();
            for (id, cells) in rows {
                let mut row = Map::new();
                for (p, values) in properties.iter().zip(cells) {
                    row.insert(p.clone(), values.iter().map(cell_json).collect());
                }
                out.insert(id.clone(), Value::Object(row));
            }
            json!({ "meta": meta, "rows": out })
        }
        Version::V10 => json!({
            "meta": meta,
            "rows": rows
                .iter()
                .map(|(id, cells)| json!({
                    "id": id,
                    "properties": properties
                        .iter()
                        .zip(cells)
                        .map(|(p, values)| json!({ "id": p, "values": values.iter().map(cell_json).collect::<Vec<_>>() }))
                        .collect::<Vec<_>>(),
                }))
                .collect::<Vec<_>>(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_0_2_batch_keeps_its_keys_and_reads_every_value_kind() {
        let q = queries_02(
            r#"{"q0": {"query": "Weimar", "type": "Keyword", "limit": 3, "type_strict": "should"},
                "q1": {"query": "X", "properties": [{"pid": "gnd", "v": "4065105-8"}, {"pid": "category", "v": {"id": "c1", "name": "Orte"}}]}}"#,
        )
        .unwrap();
        assert_eq!(q[0].0, "q0");
        assert_eq!(q[0].1.limit, 3);
        assert_eq!(q[0].1.type_id.as_deref(), Some("Keyword"));
        assert_eq!(q[1].1.limit, DEFAULT_LIMIT);
        assert_eq!(q[1].1.conditions[1].values, ["c1"]);
        for bad in [
            "[]",
            "{\"q0\": 1}",
            "{\"q0\": {}}",
            "{\"q0\": {\"query\": 5}}",
            "{\"q0\": {\"query\": \"a\", \"limit\": -1}}",
            "{\"q0\": {\"query\": \"a\", \"properties\": [{\"v\": 1}]}}",
        ] {
            assert!(queries_02(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_1_0_batch_reads_names_ids_and_properties() {
        let q = queries_10(&json!({"queries": [{"conditions": [
            {"matchType": "name", "propertyValue": "Weimar"},
            {"matchType": "property", "propertyId": "gnd", "propertyValue": ["a", "b"], "required": true, "matchQuantifier": "all"},
            {"matchType": "id", "propertyValue": "k1"}
        ], "type": "Keyword", "limit": 2}]}))
        .unwrap();
        assert_eq!(q[0].text, "Weimar");
        assert_eq!(q[0].conditions.len(), 2);
        assert!(q[0].conditions[0].required);
        assert_eq!(q[0].conditions[0].quantifier, Quantifier::All);
        assert_eq!(q[0].conditions[1].property, "id");
        for bad in [
            json!([]),
            json!({"queries": [{}]}),
            json!({"queries": [{"conditions": []}]}),
            json!({"queries": [{"conditions": [{"matchType": "fuzzy", "propertyValue": "x"}]}]}),
            json!({"queries": [{"conditions": [{"matchType": "property", "propertyValue": "x"}]}]}),
        ] {
            assert!(queries_10(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn results_and_extensions_take_each_version_s_shape() {
        let c = Candidate {
            id: "k1".into(),
            name: "Weimar".into(),
            description: Some("P › Orte".into()),
            types: vec![("Keyword".into(), "Keyword".into())],
            score: 100.0,
            matched: true,
        };
        let r02 = results(Version::V02, &["q0".into()], &[vec![c.clone()]]);
        assert_eq!(r02["q0"]["result"][0]["match"], true);
        let r10 = results(Version::V10, &[], &[vec![c]]);
        assert_eq!(r10["results"][0]["candidates"][0]["id"], "k1");
        let rows = vec![(
            "k1".to_owned(),
            vec![vec![Cell::Entity("c1".into(), "Orte".into())]],
        )];
        let e02 = extension(Version::V02, &["category".into()], &rows);
        assert_eq!(e02["rows"]["k1"]["category"][0]["name"], "Orte");
        let e10 = extension(Version::V10, &["category".into()], &rows);
        assert_eq!(e10["rows"][0]["properties"][0]["values"][0]["id"], "c1");
    }
}
