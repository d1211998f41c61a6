//! The W3C Reconciliation API over the vocabulary, versions 0.2 and 1.0,
//! over real HTTP: manifests, batches with types and property conditions,
//! scores and matches, suggestions, data extension, previews, JSONP, and
//! typed refusals. (The answers' shapes are checked against the
//! specification's JSON schemas by scripts/reconcile/validate.py.)

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{category, keyword};
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

const GND: &str = "https://d-nb.info/gnd/4005044-2";

async fn get(app: &TestApp, path: &str) -> (StatusCode, String) {
    let r = app
        .client
        .get(format!("{}{path}", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
    (r.status(), r.text().await.unwrap())
}

async fn get_json(app: &TestApp, path: &str) -> (StatusCode, Value) {
    let (s, t) = get(app, path).await;
    (s, serde_json::from_str(&t).unwrap_or(Value::Null))
}

/// A 0.2 form post (`queries=` or `extend=`).
async fn form(app: &TestApp, path: &str, field: &str, value: &Value) -> (StatusCode, Value) {
    let r = app
        .client
        .post(format!("{}{path}", app.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            url::form_urlencoded::Serializer::new(String::new())
                .append_pair(field, &value.to_string())
                .finish(),
        )
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

async fn post_json(app: &TestApp, path: &str, body: &Value) -> (StatusCode, Value) {
    let r = app
        .client
        .post(format!("{}{path}", app.url))
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

fn ids(result: &Value) -> Vec<&str> {
    result
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect()
}

async fn keywords_reconcile_in_both_versions(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    // Bayern with its GND concept and a synonym.
    let vars = json!({"i": {"id": v.k1, "label": "Bayern", "synonyms": ["Freistaat Bayern"], "categoryIds": [v.c1], "primaryGndUri": GND}});
    app.as_admin()
        .query(
            "mutation($i: UpsertKeywordInput!) { upsertKeyword(input: $i) { id } }",
            vars,
        )
        .await;
    let svc = format!("/reconcile/portals/{}", v.p);

    // Manifests.
    let (s, m) = get_json(&app, &svc).await;
    assert_eq!(s, StatusCode::OK, "{m}");
    assert_eq!(m["versions"], json!(["0.2"]));
    assert_eq!(m["name"], "kartei keywords: Portal P");
    assert!(
        m["preview"]["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{svc}/preview?id={{{{id}}}}"))
    );
    assert_eq!(
        m["suggest"]["entity"]["service_path"],
        format!("{svc}/suggest/entity")
    );
    let (s, m10) = get_json(&app, &format!("{svc}/1.0")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(m10["versions"], json!(["1.0-draft"]));
    assert_eq!(
        m10["suggest"],
        json!({"entity": true, "type": true, "property": true})
    );

    // A 0.2 batch: an exact name, a synonym, a near miss, a type that
    // narrows, a GND condition met and one not met.
    let batch = json!({
        "q0": {"query": "Bayern"},
        "q1": {"query": "freistaat bayern"},
        "q2": {"query": "Bayrn"},
        "q3": {"query": "München", "type": v.c2},
        "q4": {"query": "München", "type": v.c1, "type_strict": "should"},
        "q5": {"query": "Bayern", "properties": [{"pid": "gnd", "v": "4005044-2"}]},
        "q6": {"query": "Bayern", "properties": [{"pid": "gnd", "v": "https://d-nb.info/gnd/1-1"}]},
        "q7": {"query": "Elsewhere"},
    });
    let (s, r) = form(&app, &svc, "queries", &batch).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let top = |q: &str| r[q]["result"][0].clone();
    assert_eq!(top("q0")["id"], v.k1);
    assert_eq!(
        (top("q0")["score"].clone(), top("q0")["match"].clone()),
        (json!(100.0), json!(true))
    );
    assert_eq!(top("q0")["description"], "Portal P › Orte");
    assert!(
        top("q0")["type"]
            .as_array()
            .unwrap()
            .contains(&json!({"id": v.c1, "name": "Orte"}))
    );
    assert_eq!(
        (top("q1")["id"].clone(), top("q1")["match"].clone()),
        (json!(v.k1), json!(true))
    );
    assert_eq!(top("q2")["id"], v.k1, "{r}");
    assert_eq!(top("q2")["match"], false);
    assert!(top("q2")["score"].as_f64().unwrap() < 90.0);
    assert!(
        r["q3"]["result"].as_array().unwrap().is_empty(),
        "München is not under C2"
    );
    assert_eq!(top("q4")["id"], v.k2, "München is in G1, below C1");
    assert_eq!(
        (top("q5")["score"].clone(), top("q5")["match"].clone()),
        (json!(100.0), json!(true))
    );
    assert_eq!(
        (top("q6")["score"].clone(), top("q6")["match"].clone()),
        (json!(70.0), json!(false))
    );
    assert!(
        r["q7"]["result"].as_array().unwrap().is_empty(),
        "Elsewhere is in portal Q"
    );

    // The same in 1.0, with a required condition that removes the candidate.
    let (s, r10) = post_json(&app, &format!("{svc}/1.0/match"), &json!({"queries": [
        {"conditions": [{"matchType": "name", "propertyValue": "Bayern"}]},
        {"conditions": [{"matchType": "name", "propertyValue": "Bayern"},
                        {"matchType": "property", "propertyId": "gnd", "propertyValue": "1-1", "required": true}]},
        {"conditions": [{"matchType": "id", "propertyValue": v.k2}]},
    ]}))
    .await;
    assert_eq!(s, StatusCode::OK, "{r10}");
    let results = r10["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["candidates"][0]["id"], v.k1);
    assert!(results[1]["candidates"].as_array().unwrap().is_empty());
    assert_eq!(results[2]["candidates"][0]["id"], v.k2);

    // A hundred queries answer in one round.
    let many: serde_json::Map<String, Value> = (0..100)
        .map(|i| {
            (
                format!("q{i}"),
                json!({"query": if i % 2 == 0 { "Bayern" } else { "München" }, "limit": 3}),
            )
        })
        .collect();
    let (s, r) = form(&app, &svc, "queries", &Value::Object(many)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r.as_object().unwrap().len(), 100);
    assert_eq!(r["q99"]["result"][0]["id"], v.k2);

    // Suggestions.
    let (_, e) = get_json(&app, &format!("{svc}/suggest/entity?prefix=bay")).await;
    assert_eq!(ids(&e["result"]), [v.k1.as_str()]);
    let (_, t) = get_json(&app, &format!("{svc}/1.0/suggest/type?prefix=st%C3%A4d")).await;
    assert_eq!(ids(&t["result"]), [v.g1.as_str()]);
    assert_eq!(t["result"][0]["description"], "Portal P › Orte › Städte");
    let (_, p) = get_json(&app, &format!("{svc}/suggest/property?prefix=gnd")).await;
    assert_eq!(ids(&p["result"]), ["gnd", "relatedGnd"]);

    // Data extension, 0.2 and 1.0; an unknown id has no values.
    let ext = json!({"ids": [v.k2, "no-such-keyword"], "properties": [{"id": "category"}, {"id": "categoryPath"}, {"id": "portal"}, {"id": "gnd"}]});
    let (s, x) = form(&app, &svc, "extend", &ext).await;
    assert_eq!(s, StatusCode::OK, "{x}");
    assert_eq!(
        x["rows"][&v.k2]["category"],
        json!([{"id": v.g1, "name": "Städte"}])
    );
    assert_eq!(
        x["rows"][&v.k2]["categoryPath"],
        json!([{"str": "Portal P › Orte › Städte"}])
    );
    assert_eq!(
        x["rows"][&v.k2]["portal"],
        json!([{"id": v.p, "name": "Portal P"}])
    );
    assert_eq!(x["rows"]["no-such-keyword"]["gnd"], json!([]));
    let (_, x10) = post_json(
        &app,
        &format!("{svc}/1.0/extend"),
        &json!({"ids": [v.k1], "properties": [{"id": "gnd"}]}),
    )
    .await;
    assert_eq!(
        x10["rows"][0]["properties"][0]["values"],
        json!([{"str": GND}])
    );
    let (_, props) = get_json(&app, &format!("{svc}/properties?type={}", v.c1)).await;
    assert!(ids(&props["properties"]).contains(&"categoryPath"));
    let (_, none) = get_json(&app, &format!("{svc}/1.0/extend/propose?type=Person")).await;
    assert!(none["properties"].as_array().unwrap().is_empty());

    // Preview: an HTML card that escapes what it shows.
    keyword(&app, &format!("kx-{}", uid()), "<b>Fett</b>", &[], &[&v.c2]).await;
    let (s, html) = get(&app, &format!("{svc}/preview?id={}", v.k1)).await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("Bayern") && html.contains(GND), "{html}");
    let (_, found) = form(&app, &svc, "queries", &json!({"q0": {"query": "Fett"}})).await;
    let bold = found["q0"]["result"][0]["id"].as_str().unwrap().to_owned();
    let (_, html) = get(&app, &format!("{svc}/preview?id={bold}")).await;
    assert!(
        html.contains("&lt;b&gt;Fett&lt;/b&gt;") && !html.contains("<b>Fett"),
        "{html}"
    );

    // JSONP for 0.2 clients that still use it.
    let (s, js) = get(&app, &format!("{svc}?callback=jQuery_1")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        js.starts_with("/**/jQuery_1({") && js.ends_with(");"),
        "{js}"
    );

    // Refusals: typed, nothing done.
    let (_, once) = form(
        &app,
        &svc,
        "extend",
        &json!({"ids": [v.k1], "properties": [{"id": "gnd"}, {"id": "gnd"}, {"id": "gnd"}]}),
    )
    .await;
    assert_eq!(
        once["meta"].as_array().unwrap().len(),
        1,
        "each property once: {once}"
    );
    let many_conditions: Vec<Value> = (0..17).map(|_| json!({"pid": "note", "v": "x"})).collect();
    let over: serde_json::Map<String, Value> = (0..101)
        .map(|i| (format!("q{i}"), json!({"query": "x"})))
        .collect();
    for (status, body) in [
        form(&app, &svc, "queries", &Value::Object(over)).await,
        form(
            &app,
            &svc,
            "queries",
            &json!({"q0": {"query": "x", "properties": [{"pid": "colour", "v": "blau"}]}}),
        )
        .await,
        form(
            &app,
            &svc,
            "queries",
            &json!({"q0": {"query": "x", "limit": 1000}}),
        )
        .await,
        form(&app, &svc, "queries", &json!(["not", "an", "object"])).await,
        form(
            &app,
            &svc,
            "queries",
            &json!({"q0": {"query": "x", "properties": many_conditions}}),
        )
        .await,
        form(
            &app,
            &svc,
            "extend",
            &json!({"ids": [v.k1], "properties": [{"id": "colour"}]}),
        )
        .await,
        post_json(
            &app,
            &format!("{svc}/1.0/match"),
            &json!({"queries": [{"conditions": []}]}),
        )
        .await,
        get_json(&app, &format!("{svc}?callback=alert(1)")).await,
        get_json(&app, &format!("/reconcile/portals/{}", v.c1)).await,
    ] {
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["code"], "BAD_USER_INPUT", "{body}");
    }
    let (s, body) = get_json(&app, &format!("/reconcile/portals/nothing-{}", uid())).await;
    assert_eq!(
        (s, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("NOT_FOUND"))
    );
    let (s, _) = get(&app, &format!("{svc}/preview?id=no-such-keyword")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

/// The service of all portals finds keywords of every portal.
async fn the_service_of_all_portals_spans_them(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let u = uid();
    let (p, q) = (format!("rp-{u}"), format!("rq-{u}"));
    category(&app, &p, None, "Portal R").await;
    category(&app, &q, None, "Portal S").await;
    category(&app, &format!("{p}-c"), Some(&p), "Kinder").await;
    category(&app, &format!("{q}-c"), Some(&q), "Kinder").await;
    let label = format!("Zyklopenmauer {u}");
    keyword(&app, &format!("kp-{u}"), &label, &[], &[&format!("{p}-c")]).await;
    keyword(
        &app,
        &format!("kq-{u}"),
        &format!("{label} Süd"),
        &[],
        &[&format!("{q}-c")],
    )
    .await;
    let (s, r) = form(
        &app,
        "/reconcile",
        "queries",
        &json!({"q0": {"query": label}}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    // Both, best first (other tests' keywords that share a word start
    // may follow, far behind).
    let found = ids(&r["q0"]["result"]);
    assert!(found.contains(&format!("kq-{u}").as_str()), "{r}");
    assert_eq!(r["q0"]["result"][0]["id"], format!("kp-{u}"));
    assert_eq!(r["q0"]["result"][0]["score"], 100.0);
    let (_, only_q) = form(
        &app,
        &format!("/reconcile/portals/{q}"),
        "queries",
        &json!({"q0": {"query": label}}),
    )
    .await;
    assert_eq!(only_q["q0"]["result"][0]["id"], format!("kq-{u}"));
    assert!(!ids(&only_q["q0"]["result"]).contains(&format!("kp-{u}").as_str()));
}

both_engines!(
    keywords_reconcile_in_both_versions,
    the_service_of_all_portals_spans_them
);
