//! IIIF Presentation 3: an object's manifest (its images as canvases, its
//! catalogue record, its accepted keywords as tagging annotations) and a
//! portal's collection, over real HTTP; the walk behind the collection's
//! pages on the service.

use axum::http::StatusCode;
use kartei::api::iiif_presentation::SHOWN;
use kartei::domains::themes::service::{KeywordInput, Themes};
use kartei::kernel::roles::{Principal, Role};
use serde_json::{Value, json};

use super::{get, jpeg, settled, upload};
use crate::assignments::{SUGGEST, TRANSITION, key, suggestion};
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

const GND: &str = "https://d-nb.info/gnd/4005044-2";

/// `who` suggests `keyword` for `ddb`; the editor accepts it when `accept`.
async fn assign(app: &TestApp, portal: &str, ddb: &str, keyword: &str, child: &str, accept: bool) {
    let c = app.as_contributor("presenter");
    c.query(SUGGEST, suggestion(portal, ddb, keyword, child))
        .await;
    if accept {
        let vars =
            json!({"k": key(portal, ddb, keyword, "presenter"), "e": "SUGGESTED", "t": "ACCEPTED"});
        app.as_editor("curator").query(TRANSITION, vars).await;
    }
}

async fn json_at(app: &TestApp, path: &str) -> (StatusCode, Value) {
    let r = get(app, path, &[]).await;
    let status = r.status();
    assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The path of one of our URLs (the base is the test server's).
fn path_of(url: &Value) -> String {
    let u = url::Url::parse(url.as_str().unwrap()).unwrap();
    match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_owned(),
    }
}

async fn an_object_s_manifest_shows_its_images_record_and_accepted_keywords(engine: Engine) {
    let app = TestApp::on(engine)
        .crawling()
        .with_vocabulary()
        .build()
        .await;
    let v = app.vocabulary();
    let u = uid();
    let ddb = format!("OBJ{u}");
    // Bayern gets a GND concept.
    Themes::new(app.store.clone())
        .upsert_keyword(
            &Principal::local("tester", &[Role::Admin]),
            KeywordInput {
                id: v.k1.clone(),
                label: "Bayern".into(),
                category_ids: vec![v.c1.clone()],
                primary_gnd_uri: Some(GND.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    crate::objects::import_text(
        &app,
        &(json!({"ddbId": ddb, "title": "Ein Krug", "institution": "Museum am Markt"}).to_string()
            + "\n"),
    )
    .await;
    let mut refs = Vec::new();
    for (w, h) in [(1200, 900), (300, 400)] {
        let (_, r) = upload(&app, &ddb, &jpeg(w, h)).await;
        let id = r["referenceId"].as_str().unwrap().to_owned();
        assert_eq!(settled(&app, &id).await["status"], "OK");
        refs.push(id);
    }
    refs.sort();
    assign(&app, &v.p, &ddb, &v.k1, &v.c1, true).await;
    assign(&app, &v.p, &ddb, &v.k2, &v.c1, false).await;
    assign(&app, &v.q, &ddb, &v.kq, &v.qc, true).await;

    let (status, m) = json_at(&app, &format!("/iiif/3/manifest/{ddb}")).await;
    assert_eq!(status, StatusCode::OK, "{m}");
    assert_eq!(
        m["@context"],
        "http://iiif.io/api/presentation/3/context.json"
    );
    assert_eq!(m["type"], "Manifest");
    assert!(
        m["id"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/iiif/3/manifest/{ddb}"))
    );
    assert_eq!(m["label"], json!({"none": ["Ein Krug"]}));
    assert_eq!(
        m["requiredStatement"]["value"],
        json!({"none": ["Museum am Markt"]})
    );
    assert_eq!(
        m["homepage"][0]["id"],
        format!("https://www.deutsche-digitale-bibliothek.de/item/{ddb}")
    );
    let canvases = m["items"].as_array().unwrap();
    assert_eq!(canvases.len(), 2);
    let mut sizes: Vec<(i64, i64)> = canvases
        .iter()
        .map(|c| (c["width"].as_i64().unwrap(), c["height"].as_i64().unwrap()))
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [(300, 400), (1200, 900)]);
    for c in canvases {
        let painting = &c["items"][0]["items"][0];
        assert_eq!(painting["motivation"], "painting");
        assert_eq!(painting["target"], c["id"]);
        let body = &painting["body"];
        let service = path_of(&body["service"][0]["id"]);
        assert!(
            refs.iter().any(|r| service == format!("/iiif/3/{r}")),
            "{service}"
        );
        // The image, its thumbnail (a stored derivative) and its service answer.
        for url in [&body["id"], &c["thumbnail"][0]["id"]] {
            let r = get(&app, &path_of(url), &[]).await;
            assert_eq!(r.status(), StatusCode::OK, "{url}");
            let img = image::load_from_memory(&r.bytes().await.unwrap()).unwrap();
            let thumb = &c["thumbnail"][0];
            if url == &thumb["id"] {
                assert_eq!(
                    (i64::from(img.width()), i64::from(img.height())),
                    (
                        thumb["width"].as_i64().unwrap(),
                        thumb["height"].as_i64().unwrap()
                    )
                );
            }
        }
        let (status, info) = json_at(&app, &format!("{service}/info.json")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(info["width"], c["width"]);
    }
    // Accepted keywords of both portals, not the suggested one.
    let tags = m["annotations"][0]["items"].as_array().unwrap();
    let mut labels: Vec<&str> = tags
        .iter()
        .map(|t| t["body"][0]["value"].as_str().unwrap())
        .collect();
    labels.sort_unstable();
    assert_eq!(labels, ["Bayern", "Elsewhere"]);
    for t in tags {
        assert_eq!(t["motivation"], "tagging");
        assert_eq!(t["target"], m["id"]);
    }
    let bayern = tags
        .iter()
        .find(|t| t["body"][0]["value"] == "Bayern")
        .unwrap();
    assert_eq!(
        bayern["body"][1],
        json!({"type": "SpecificResource", "source": GND})
    );
    let elsewhere = tags
        .iter()
        .find(|t| t["body"][0]["value"] == "Elsewhere")
        .unwrap();
    assert_eq!(
        elsewhere["body"].as_array().unwrap().len(),
        1,
        "no GND concept"
    );
    let part_of: Vec<String> = m["partOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| path_of(&c["id"]))
        .collect();
    assert!(
        part_of.contains(&format!("/iiif/3/collection/{}", v.p)),
        "{part_of:?}"
    );
    let see_also: Vec<String> = m["seeAlso"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| path_of(&s["id"]))
        .collect();
    assert!(see_also.contains(&format!("/skos/{}", v.p)), "{see_also:?}");

    // JSON-LD when asked for.
    let ld = get(
        &app,
        &format!("/iiif/3/manifest/{ddb}"),
        &[("accept", "application/ld+json")],
    )
    .await;
    assert!(ld.headers()["content-type"].to_str().unwrap().starts_with(
        "application/ld+json;profile=\"http://iiif.io/api/presentation/3/context.json\""
    ));

    // The portal's collection lists it; an object with only a suggestion,
    // and one with an accepted keyword but no image, are not listed.
    let plain = format!("OBJ{u}b");
    assign(&app, &v.p, &plain, &v.k1, &v.c1, true).await;
    let open = format!("OBJ{u}c");
    upload(&app, &open, &jpeg(50, 50)).await;
    assign(&app, &v.p, &open, &v.k2, &v.c1, false).await;
    let (status, c) = json_at(&app, &format!("/iiif/3/collection/{}", v.p)).await;
    assert_eq!(status, StatusCode::OK, "{c}");
    assert_eq!(c["type"], "Collection");
    assert_eq!(c["label"], json!({"none": ["Portal P"]}));
    let items = c["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{c}");
    assert_eq!(items[0]["type"], "Manifest");
    assert_eq!(items[0]["label"], json!({"none": ["Ein Krug"]}));
    assert_eq!(items[0]["id"], m["id"]);

    // An object with a keyword and no image has no manifest; nor has an
    // unknown one; bad ids and portals get typed errors.
    for (path, status) in [
        (format!("/iiif/3/manifest/{plain}"), StatusCode::NOT_FOUND),
        (
            format!("/iiif/3/manifest/nothing-{u}"),
            StatusCode::NOT_FOUND,
        ),
        (
            "/iiif/3/manifest/%0Abad".to_owned(),
            StatusCode::BAD_REQUEST,
        ),
        (
            format!("/iiif/3/collection/nothing-{u}"),
            StatusCode::NOT_FOUND,
        ),
        (
            format!("/iiif/3/collection/{}", v.c1),
            StatusCode::BAD_REQUEST,
        ),
        (
            format!("/iiif/3/collection/{}?after=%0A", v.p),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (got, body) = json_at(&app, &path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(body["error"]["code"].is_string(), "{path}: {body}");
    }
}

/// The walk behind a collection's pages: distinct objects in id order,
/// page after page, whatever the number of keywords per object.
async fn a_portal_s_objects_are_walked_page_by_page(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let u = uid();
    let ids: Vec<String> = (0..7).map(|i| format!("W{u}-{i}")).collect();
    for (n, ddb) in ids.iter().enumerate() {
        assign(&app, &v.p, ddb, &v.k1, &v.c1, n != 3).await;
        assign(&app, &v.p, ddb, &v.k2, &v.c1, n % 2 == 0).await;
    }
    let service = kartei::domains::assignments::service::Assignments::new(app.store.clone());
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = service
            .objects_in(&v.p, &SHOWN, 2, after.as_deref())
            .await
            .unwrap();
        assert!(page.len() <= 2);
        seen.extend(page.iter().cloned());
        match page.last() {
            Some(l) if page.len() == 2 => after = Some(l.clone()),
            _ => break,
        }
    }
    // Object 3 has no accepted keyword; the others one or two.
    let want: Vec<String> = ids
        .iter()
        .enumerate()
        .filter(|(n, _)| *n != 3)
        .map(|(_, id)| id.clone())
        .collect();
    assert_eq!(seen, want);
    let none = service.objects_in(&v.q, &SHOWN, 2, None).await.unwrap();
    assert!(none.is_empty());
}

both_engines!(
    an_object_s_manifest_shows_its_images_record_and_accepted_keywords,
    a_portal_s_objects_are_walked_page_by_page,
);
