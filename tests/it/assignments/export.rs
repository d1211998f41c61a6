//! `GET /export/assignments`: the queue's filter as a streamed file, for
//! editors; the same rows in the same order as the `assignments` query, over
//! more than one page; an NDJSON export imports again.

use kartei::domains::assignments::service::Assignments;
use kartei::domains::assignments::service::EXPORT_PAGE;
use kartei::kernel::limits::Limits;
use serde_json::{Value, json};

use super::paging::page_all;
use super::{SUGGEST, TRANSITION, key, suggestion};
use crate::both_engines;
use crate::support::{Engine, TestApp, test_limits};

/// The importer's five columns, then what the export adds.
const COLUMNS: &str = "portalId,ddbId,keywordId,childCategoryId,confidence,creator,status,assignmentType,createdAt,modifiedAt";

/// The whole answer: status, content type, body.
async fn export(
    app: &TestApp,
    query: &str,
    token: Option<&str>,
    accept: &str,
) -> (u16, String, String) {
    let mut req = app
        .client
        .get(format!("{}/export/assignments?{query}", app.url))
        .header("accept", accept);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ctype, resp.text().await.expect("body"))
}

fn ndjson(body: &str) -> Vec<Value> {
    body.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn keys(lines: &[Value]) -> Vec<(String, String, String)> {
    lines
        .iter()
        .map(|l| {
            (
                l["ddbId"].as_str().unwrap().into(),
                l["keywordId"].as_str().unwrap().into(),
                l["creator"].as_str().unwrap().into(),
            )
        })
        .collect()
}

async fn an_editor_exports_the_queue_s_filter_as_csv_or_ndjson(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let editor = app.token_as("erik", &["editor"]);
    // More machine suggestions than one page of the export, and two by a person.
    let n = EXPORT_PAGE + 300;
    let lines: Vec<String> = (0..n)
        .map(|i| {
            json!({"portalId": v.p, "ddbId": format!("x{i:05}"), "keywordId": v.k1, "childCategoryId": v.c1, "confidence": 0.25})
                .to_string()
        })
        .collect();
    let text = lines.join("\n");
    let service = Assignments::new(app.store.clone());
    let r = kartei::domains::assignments::import::import(
        &service,
        "bot",
        kartei::kernel::chunked::Input::new(text.as_bytes(), text.len(), 8),
    )
    .await
    .unwrap();
    assert_eq!(r.created, n, "{}", r.summary());
    let carla = app.as_contributor("carla");
    carla
        .query(SUGGEST, suggestion(&v.p, "o,1", &v.k1, &v.c1))
        .await;
    carla
        .query(SUGGEST, suggestion(&v.p, "=o2", &v.k2, &v.c2))
        .await;
    app.as_editor("erik")
        .query(
            TRANSITION,
            json!({"k": key(&v.p, "o,1", &v.k1, "carla"), "e": "SUGGESTED", "t": "ACCEPTED"}),
        )
        .await;

    // Nobody without a token, no contributor.
    let q = format!("portalId={}", v.p);
    let (status, _, body) = export(&app, &q, None, "*/*").await;
    assert_eq!(status, 401, "{body}");
    let contributor = app.token_as("carla", &["contributor"]);
    let (status, _, body) = export(&app, &q, Some(&contributor), "*/*").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("FORBIDDEN"), "{body}");

    // The whole portal: every assignment once, in the query's order, over pages.
    let (status, ctype, body) = export(&app, &q, Some(&editor), "*/*").await;
    assert_eq!(
        (status, ctype.as_str()),
        (200, "application/x-ndjson"),
        "{body}"
    );
    let all = ndjson(&body);
    assert_eq!(all.len(), n + 2);
    assert_eq!(keys(&all), page_all(&app, &v.p, None, None).await);
    let accepted = all.iter().find(|l| l["ddbId"] == "o,1").unwrap();
    assert_eq!(accepted["status"], "ACCEPTED");
    assert_eq!(accepted["creator"], "carla");
    assert_eq!(accepted["portalId"].as_str(), Some(v.p.as_str()));
    assert_eq!(accepted["childCategoryId"].as_str(), Some(v.c1.as_str()));
    assert_eq!(accepted["confidence"], 0.5);
    assert_eq!(accepted["assignmentType"], "ANYBODY");
    assert!(
        accepted["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{accepted}"
    );
    assert!(
        accepted["modifiedAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{accepted}"
    );
    assert_ne!(
        accepted["createdAt"], accepted["modifiedAt"],
        "accepted after it was made"
    );
    // The fields in the columns' order, the importer's five first.
    let first = body.lines().next().unwrap();
    let at: Vec<usize> = COLUMNS
        .split(',')
        .map(|c| first.find(&format!("\"{c}\":")).expect(c))
        .collect();
    assert!(at.is_sorted(), "{first}");

    // By status and by creator; CSV by parameter or by Accept.
    let (_, _, body) = export(
        &app,
        &format!("{q}&status=AUTOSUGGESTED&creator=bot"),
        Some(&editor),
        "*/*",
    )
    .await;
    assert_eq!(ndjson(&body).len(), n);
    let (_, _, body) = export(&app, &format!("{q}&creator=carla"), Some(&editor), "*/*").await;
    let carlas = ndjson(&body);
    assert_eq!(keys(&carlas).len(), 2);
    let (status, ctype, body) = export(
        &app,
        &format!("{q}&status=ACCEPTED&format=csv"),
        Some(&editor),
        "*/*",
    )
    .await;
    assert_eq!((status, ctype.as_str()), (200, "text/csv; charset=utf-8"));
    let rows: Vec<&str> = body.split("\r\n").collect();
    assert_eq!(rows[0], COLUMNS);
    assert!(
        rows[1].starts_with(&format!(
            "{},\"o,1\",{},{},0.5,carla,ACCEPTED,ANYBODY,",
            v.p, v.k1, v.c1
        )),
        "{body}"
    );
    assert_eq!(rows.len(), 3, "{body}");
    let (_, ctype, body) = export(
        &app,
        &format!("{q}&status=SUGGESTED"),
        Some(&editor),
        "text/csv",
    )
    .await;
    assert_eq!(ctype, "text/csv; charset=utf-8");
    assert!(
        body.contains(",\"'=o2\","),
        "a formula is not run by a spreadsheet: {body}"
    );

    // Several statuses (the queue's review filter), one after the other;
    // one keyword's.
    let (_, _, body) = export(
        &app,
        &format!("{q}&status=SUGGESTED,AUTOSUGGESTED"),
        Some(&editor),
        "*/*",
    )
    .await;
    let review = ndjson(&body);
    assert_eq!(review.len(), n + 1);
    assert_eq!(review[0]["ddbId"], "=o2");
    assert_eq!(
        keys(&review[1..]),
        page_all(&app, &v.p, Some("AUTOSUGGESTED"), None).await
    );
    let (_, _, body) = export(
        &app,
        &format!("{q}&keywordId={}&status=SUGGESTED,ACCEPTED", v.k2),
        Some(&editor),
        "*/*",
    )
    .await;
    assert_eq!(
        keys(&ndjson(&body)),
        [("=o2".to_string(), v.k2.clone(), "carla".to_string())]
    );
    let (_, _, body) = export(
        &app,
        &format!("{q}&keywordId={}&creator=nobody", v.k1),
        Some(&editor),
        "*/*",
    )
    .await;
    assert_eq!(body, "");

    // Narrowed as the queue narrows: one child category, a confidence range.
    let (_, _, body) = export(
        &app,
        &format!(
            "{q}&childCategoryId={}&minConfidence=0.3&maxConfidence=0.5",
            v.c1
        ),
        Some(&editor),
        "*/*",
    )
    .await;
    assert_eq!(
        keys(&ndjson(&body)),
        [("o,1".to_string(), v.k1.clone(), "carla".to_string())],
        "only carla's o,1 is in c1 with a confidence from 0.3 to 0.5 (the machine's are 0.25)"
    );

    // Wrong requests: a clear code, nothing streamed.
    for (query, code, status) in [
        ("status=ACCEPTED".to_string(), "BAD_USER_INPUT", 400),
        (format!("{q}&status=accepted"), "BAD_USER_INPUT", 400),
        (format!("{q}&format=xlsx"), "BAD_USER_INPUT", 400),
        (format!("{q}&first=10"), "BAD_USER_INPUT", 400),
        (format!("{q}&{q}"), "BAD_USER_INPUT", 400),
        (format!("portalId={}", v.c1), "BAD_USER_INPUT", 400),
        ("portalId=no-such-portal".to_string(), "NOT_FOUND", 404),
    ] {
        let (s, ctype, body) = export(&app, &query, Some(&editor), "*/*").await;
        assert_eq!(s, status, "{query}: {body}");
        assert!(ctype.starts_with("application/json"), "{query}: {ctype}");
        assert!(body.contains(code), "{query}: {body}");
    }

    // The NDJSON export imports again (as new suggestions of another creator).
    let (_, _, body) = export(&app, &format!("{q}&creator=carla"), Some(&editor), "*/*").await;
    let again = kartei::domains::assignments::import::import(
        &service,
        "copy",
        kartei::kernel::chunked::Input::new(body.as_bytes(), body.len(), 2),
    )
    .await
    .unwrap();
    assert_eq!(
        (again.created, again.errors.len()),
        (2, 0),
        "{}",
        again.summary()
    );
}

async fn exports_can_be_turned_off(engine: Engine) {
    let limits = Limits {
        max_exports: 0,
        ..test_limits()
    };
    let app = TestApp::on(engine)
        .with_vocabulary()
        .with_limits(limits)
        .build()
        .await;
    let v = app.vocabulary();
    let (status, _, body) = export(
        &app,
        &format!("portalId={}", v.p),
        Some(&app.admin()),
        "*/*",
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("TOO_MANY_EXPORTS"), "{body}");
}

both_engines!(
    an_editor_exports_the_queue_s_filter_as_csv_or_ndjson,
    exports_can_be_turned_off
);
