//! SKOS out and in: `GET /skos/{portalId}` in three formats, the export
//! read back by the importer to the same graph, and bad documents refused
//! whole with the triple or line at fault.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use kartei::domains::themes::service::Themes;
use kartei::domains::themes::skos;
use oxrdfio::{RdfFormat, RdfParser};
use serde_json::json;

use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

const GND: &str = "https://d-nb.info/gnd/4005044-2";

async fn get(app: &TestApp, path: &str, accept: &str) -> (StatusCode, String, Vec<u8>) {
    let r = app
        .client
        .get(format!("{}{path}", app.url))
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status(), ct, r.bytes().await.unwrap().to_vec())
}

/// A document's triples as N-Triples lines (no blank nodes here, so equal
/// sets are equal graphs).
fn graph(bytes: &[u8], format: RdfFormat) -> BTreeSet<String> {
    RdfParser::from_format(format)
        .for_slice(bytes)
        .map(|q| {
            let q = q.unwrap();
            format!("{} {} {} .", q.subject, q.predicate, q.object)
        })
        .collect()
}

async fn import(app: &TestApp, doc: &str) -> kartei::domains::themes::import::ImportReport {
    let themes = Themes::new(app.store.clone());
    skos::import(&themes, doc.as_bytes(), RdfFormat::Turtle, 4, 10_000).await
}

async fn a_portal_goes_out_as_skos_and_comes_back_the_same(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let vars = json!({"i": {"id": v.k1, "label": "Bayern", "synonyms": ["Freistaat Bayern", "Bayern"], "note": "Das Land", "categoryIds": [v.c1, v.qc], "primaryGndUri": GND, "relatedGndUris": ["https://d-nb.info/gnd/4005728-8"]}});
    app.as_admin()
        .query(
            "mutation($i: UpsertKeywordInput!) { upsertKeyword(input: $i) { id } }",
            vars,
        )
        .await;
    let path = format!("/skos/{}", v.p);

    let (s, ct, ttl) = get(&app, &path, "text/turtle").await;
    assert_eq!(s, StatusCode::OK);
    assert!(ct.starts_with("text/turtle"), "{ct}");
    let text = String::from_utf8(ttl.clone()).unwrap();
    assert!(text.contains("a skos:ConceptScheme"), "{text}");
    assert!(text.contains("vocnet:NonIndexingConcept"), "{text}");
    assert!(text.contains("\"Freistaat Bayern\"@de"), "{text}");
    assert!(text.contains(&format!("skos:exactMatch <{GND}>")), "{text}");
    assert_eq!(
        text.matches("\"Bayern\"@de").count(),
        1,
        "a synonym equal to the label is left out: {text}"
    );
    let turtle = graph(&ttl, RdfFormat::Turtle);
    // Bayern is also in portal Q: that category is not in P's document.
    assert!(!text.contains(&format!("category/{}", v.qc)), "{text}");
    for (accept, format, media) in [
        (
            "application/rdf+xml",
            RdfFormat::RdfXml,
            "application/rdf+xml",
        ),
        (
            "text/html;q=0.5, application/ld+json",
            RdfFormat::JsonLd {
                profile: oxrdfio::JsonLdProfileSet::empty(),
            },
            "application/ld+json",
        ),
    ] {
        let (s, ct, body) = get(&app, &path, accept).await;
        assert_eq!(s, StatusCode::OK, "{accept}");
        assert!(ct.starts_with(media), "{ct}");
        assert_eq!(graph(&body, format), turtle, "{accept}: the same graph");
    }
    let (_, ct, _) = get(&app, &format!("{path}?format=rdf"), "text/turtle").await;
    assert!(ct.starts_with("application/rdf+xml"));
    for (p, accept, status) in [
        (path.clone(), "text/html", StatusCode::NOT_ACCEPTABLE),
        (format!("{path}?format=pdf"), "*/*", StatusCode::BAD_REQUEST),
        (format!("/skos/{}", v.c1), "*/*", StatusCode::BAD_REQUEST),
        (
            format!("/skos/nothing-{}", uid()),
            "*/*",
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (s, _, body) = get(&app, &p, accept).await;
        assert_eq!(s, status, "{p}: {}", String::from_utf8_lossy(&body));
    }

    // Read back: the same records, so the same graph; Bayern stays in Q.
    let report = import(&app, &text).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(
        (report.categories, report.keywords),
        (4, 2),
        "{}",
        report.summary()
    );
    let (_, _, again) = get(&app, &path, "text/turtle").await;
    assert_eq!(graph(&again, RdfFormat::Turtle), turtle);
    let k1 = app
        .anonymous()
        .query(
            "query($k: ID!) { keyword(id: $k) { categories { id } synonyms } }",
            json!({"k": v.k1}),
        )
        .await;
    let mut cats: Vec<&str> = k1["keyword"]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    cats.sort_unstable();
    let mut want = vec![v.c1.as_str(), v.qc.as_str()];
    want.sort_unstable();
    assert_eq!(cats, want);

    // A change in the document is a change in the vocabulary.
    let renamed = text.replace("\"Freistaat Bayern\"@de", "\"Bavaria\"@de");
    let report = import(&app, &renamed).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let (_, _, after) = get(&app, &path, "text/turtle").await;
    assert!(String::from_utf8(after).unwrap().contains("\"Bavaria\"@de"));
}

async fn a_bad_document_writes_nothing(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let u = uid();
    let head = "@prefix skos: <http://www.w3.org/2004/02/skos/core#> .\n@prefix vocnet: <http://schema.vocnet.org/> .\n";
    let good = format!(
        "<http://x/k-{u}> a skos:Concept ;\n skos:prefLabel \"Neu\"@de ;\n skos:broader <http://x/{c1}> .\n",
        c1 = v.c1
    );
    let cases = [
        // A syntax error: by line.
        (
            format!("{head}{good}<http://x/b-{u}> skos:prefLabel \"B\"\n"),
            "line",
        ),
        // A predicate the mapping does not know: by triple.
        (
            format!("{head}{good}<http://x/k-{u}> skos:example \"x\"@de .\n"),
            "triple 4: unknown predicate skos:example",
        ),
        // A class it does not know.
        (
            format!("{head}{good}<http://x/p-{u}> a <http://xmlns.com/foaf/0.1/Person> .\n"),
            "only skos:ConceptScheme",
        ),
        // A concept without a label.
        (
            format!(
                "{head}{good}<http://x/n-{u}> a skos:Concept ; skos:broader <http://x/{}> .\n",
                v.c1
            ),
            "no skos:prefLabel",
        ),
        // A label that is not a literal.
        (
            format!("{head}{good}<http://x/k-{u}> skos:altLabel <http://x/y> .\n"),
            "must be a literal",
        ),
        // A blank node.
        (format!("{head}{good}[] a skos:Concept .\n"), "blank node"),
        // A keyword under a keyword.
        (
            format!(
                "{head}{good}<http://x/j-{u}> a skos:Concept ; skos:prefLabel \"J\"@de ; skos:broader <http://x/k-{u}> .\n"
            ),
            "which is not a category",
        ),
        // Two keywords with one id.
        (
            format!(
                "{head}{good}<http://y/k-{u}> a skos:Concept ; skos:prefLabel \"K\"@de ; skos:broader <http://x/{}> .\n",
                v.c1
            ),
            "is also the id of the concept at triple",
        ),
    ];
    for (doc, reason) in cases {
        let report = import(&app, &doc).await;
        assert_eq!(report.records(), 0, "{doc}");
        let all: Vec<String> = report
            .errors
            .iter()
            .map(|(n, e)| format!("triple {n}: {e}"))
            .collect();
        assert!(all.iter().any(|e| e.contains(reason)), "{reason}: {all:?}");
        let k = app
            .anonymous()
            .response(
                "query($k: ID!) { keyword(id: $k) { id } }",
                json!({"k": format!("k-{u}")}),
            )
            .await;
        assert!(k["data"]["keyword"].is_null(), "nothing written: {k}");
    }
    // The good part alone is written.
    let report = import(&app, &format!("{head}{good}")).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.keywords, 1);
}

both_engines!(
    a_portal_goes_out_as_skos_and_comes_back_the_same,
    a_bad_document_writes_nothing
);
