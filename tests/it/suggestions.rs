//! Image suggestions on both engines: datasets that switch at once, failed and
//! killed imports that stay invisible, rollback, feedback masking, title
//! lookup, the 100-page multi-get, the REST drop-in and role checks.

use kartei::domains::suggestions::import::{ImportOptions, ImportReport, import};
use kartei::domains::suggestions::model::{DatasetState, SUGGESTIONS};
use kartei::domains::suggestions::service::{FeedbackInput, ReadOptions, Suggestions};
use kartei::kernel::roles::{Principal, Role};
use kartei::store::{DynStore, Slice, Store, Value};
use serde_json::{Value as Json, json};

use crate::both_engines;
use crate::support::{Engine, TestServer, code, round_trips, server, uid};

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

async fn publishing_switches_datasets_at_once(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    assert!(
        images(&s, &wiki, 1).await.is_empty(),
        "nothing before any import"
    );
    let a = run_import(
        &s,
        &wiki,
        vec![
            line(1, "A1.jpg", 0.9),
            line(1, "A2.jpg", 0.5),
            line(2, "A3.jpg", 0.7),
        ],
        0,
        1,
    )
    .await;
    assert!(a.published, "{}", a.summary());
    let a_id = a.dataset.clone().unwrap();
    assert_eq!(
        images(&s, &wiki, 1).await,
        [
            ("A1.jpg".into(), a_id.clone()),
            ("A2.jpg".into(), a_id.clone())
        ]
    );

    // B is written but not published: readers still see only A.
    let b = s.begin(&machine(), &wiki, None).await.unwrap();
    let rec = |l: String| kartei::domains::suggestions::import::parse(&l).unwrap();
    s.write(
        &b,
        vec![rec(line(1, "B1.jpg", 0.8)), rec(line(3, "B3.jpg", 0.6))],
    )
    .await
    .unwrap();
    assert_eq!(images(&s, &wiki, 1).await.len(), 2);
    assert!(images(&s, &wiki, 1).await.iter().all(|(_, d)| *d == a_id));
    assert!(images(&s, &wiki, 3).await.is_empty());
    // One write publishes it: only B from then on; page 2 is not in B.
    s.publish(&b, 2, 0, 1).await.unwrap();
    assert_eq!(
        images(&s, &wiki, 1).await,
        [("B1.jpg".into(), b.id.clone())]
    );
    assert!(images(&s, &wiki, 2).await.is_empty());
    assert_eq!(images(&s, &wiki, 3).await.len(), 1);

    // minConfidence filters.
    let high = s
        .page(
            &wiki,
            1,
            ReadOptions {
                min_confidence: Some(0.85),
                include_reviewed: false,
            },
        )
        .await
        .unwrap();
    assert!(high.is_empty());
}

async fn failed_imports_stay_invisible_and_leave_nothing(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let a = run_import(&s, &wiki, vec![line(1, "A.jpg", 0.9)], 0, 1).await;
    assert!(a.published);
    // Bad lines, each with its number and reason.
    let lines = vec![
        line(1, "B.jpg", 0.9),
        line(2, "B2.jpg", 0.9),
        "{not json".into(),
        line(3, "B3.jpg", 0.4),
        json!({"page_id": 4, "image": "x", "origin_wiki": "w", "confidence": 3}).to_string(),
    ];
    let b = run_import(&s, &wiki, lines.clone(), 0, 1).await;
    assert!(!b.published, "{}", b.summary());
    assert_eq!(
        b.errors.iter().map(|e| e.0).collect::<Vec<_>>(),
        [3, 5],
        "{:?}",
        b.errors
    );
    assert!(b.errors[1].1.contains("confidence"), "{:?}", b.errors);
    let b_id = b.dataset.unwrap();
    assert_eq!(images(&s, &wiki, 1).await[0].0, "A.jpg");
    assert!(images(&s, &wiki, 2).await.is_empty());
    assert_eq!(
        rows_of(&srv.store, &wiki, 1, &b_id).await,
        0,
        "rows removed"
    );
    let state = |id: String| {
        let s = s.clone();
        let wiki = wiki.clone();
        async move {
            s.datasets(&wiki)
                .await
                .unwrap()
                .into_iter()
                .find(|d| d.id == id)
                .unwrap()
                .state
        }
    };
    assert_eq!(state(b_id).await, DatasetState::Purged);
    // With --max-errors 2 the same file is published, without its bad lines.
    let c = run_import(&s, &wiki, lines, 2, 1).await;
    assert!(c.published, "{}", c.summary());
    assert_eq!(c.rows, 3);
    assert_eq!(images(&s, &wiki, 2).await[0].0, "B2.jpg");
}

async fn rollback_and_keep(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let mut ids = Vec::new();
    for name in ["A", "B", "C"] {
        let r = run_import(&s, &wiki, vec![line(1, &format!("{name}.jpg"), 0.9)], 0, 1).await;
        assert!(r.published);
        ids.push(r.dataset.unwrap());
    }
    // keep 1: A is purged, B stays for a rollback.
    let all = s.datasets(&wiki).await.unwrap();
    let state = |id: &str| all.iter().find(|d| d.id == id).unwrap().state;
    assert_eq!(state(&ids[0]), DatasetState::Purged);
    assert_eq!(state(&ids[1]), DatasetState::Complete);
    assert_eq!(rows_of(&srv.store, &wiki, 1, &ids[0]).await, 0);
    let back = s.rollback(&machine(), &wiki).await.unwrap();
    assert_eq!(back.id, ids[1]);
    assert_eq!(images(&s, &wiki, 1).await[0].0, "B.jpg");
    // Nothing complete before B any more.
    let e = s.rollback(&machine(), &wiki).await.unwrap_err();
    assert_eq!(e.code(), "NOT_FOUND");
    // Roles: a contributor may not roll back or import.
    let contributor = Principal::local("c", &[Role::Contributor]);
    assert_eq!(
        s.rollback(&contributor, &wiki).await.unwrap_err().code(),
        "FORBIDDEN"
    );
    assert_eq!(
        s.begin(&contributor, &wiki, None).await.unwrap_err().code(),
        "FORBIDDEN"
    );
}

async fn feedback_masks_across_datasets(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let lines = vec![line(7, "Good.jpg", 0.9), line(7, "Bad.jpg", 0.8)];
    assert!(run_import(&s, &wiki, lines.clone(), 0, 1).await.published);
    let record = "mutation($w: String!, $f: String!, $a: Boolean!, $r: [String!]) {
        recordSuggestionFeedback(wiki: $w, pageId: 7, filename: $f, accepted: $a, rejectionReasons: $r) {
          wiki pageId filename user accepted rejected rejectionReasons originWiki time } }";
    let vars = json!({"w": wiki, "f": "Bad.jpg", "a": false, "r": ["wrong place", "blurry"]});
    let anonymous = srv.gql(record, vars.clone(), None).await;
    assert_eq!(code(&anonymous), "UNAUTHENTICATED");
    let as_machine = srv
        .gql(record, vars.clone(), Some(&srv.token(&["machine"])))
        .await;
    assert_eq!(code(&as_machine), "FORBIDDEN");
    let editor = srv.token_as("erika", &["editor"]);
    let d = srv.data(record, vars, Some(&editor)).await;
    let f = &d["recordSuggestionFeedback"];
    assert_eq!(f["user"], "erika");
    assert_eq!(f["rejected"], true);
    assert_eq!(f["rejectionReasons"], json!(["blurry", "wrong place"]));
    assert_eq!(f["originWiki"], "commonswiki");
    assert!(f["time"].as_str().unwrap().starts_with("20"));

    let read = "query($w: String!, $all: Boolean) {
        imageSuggestions(wiki: $w, pageId: 7, includeReviewed: $all) {
          image confidence datasetId datasetTime feedback { user rejected } } }";
    let masked = srv.data(read, json!({"w": wiki}), None).await;
    let got = masked["imageSuggestions"].as_array().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["image"], "Good.jpg");
    let all = srv
        .data(read, json!({"w": wiki, "all": true}), Some(&editor))
        .await;
    let got = all["imageSuggestions"].as_array().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1]["feedback"][0]["user"], "erika");
    // A new dataset with the same image: still masked (feedback survives switches).
    assert!(run_import(&s, &wiki, lines, 0, 1).await.published);
    let again = srv.data(read, json!({"w": wiki}), None).await;
    assert_eq!(again["imageSuggestions"].as_array().unwrap().len(), 1);
    // Bad input.
    let neither = srv
        .gql(
            "{ imageSuggestions(wiki: \"x\") { image } }",
            json!({}),
            None,
        )
        .await;
    assert_eq!(code(&neither), "BAD_USER_INPUT");
}

async fn titles_and_many_pages(engine: Engine) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    let mut lines: Vec<String> = (0..100)
        .map(|p| line(p, &format!("P{p}.jpg"), 0.5))
        .collect();
    lines
        .push(json!({"row": "title", "title": "Berlin", "page_id": 42, "page_rev": 9}).to_string());
    lines.push(
        json!({"row": "instanceof", "page_id": 42, "page_rev": 9, "instance_of": ["Q515", "Q5119"]})
            .to_string(),
    );
    assert!(run_import(&s, &wiki, lines, 0, 1).await.published);
    let d = srv
        .data(
            "query($w: String!) { imageSuggestions(wiki: $w, title: \"Berlin\") { pageId image } }",
            json!({"w": wiki}),
            None,
        )
        .await;
    assert_eq!(d["imageSuggestions"][0]["image"], "P42.jpg");
    let none = srv
        .data(
            "query($w: String!) { imageSuggestions(wiki: $w, title: \"Nowhere\") { image } }",
            json!({"w": wiki}),
            None,
        )
        .await;
    assert_eq!(none["imageSuggestions"], json!([]));

    // 100 pages: the pointer and the feedback in one wave, the suggestions in
    // a second (three store calls, each of concurrent single-partition reads).
    let ids: Vec<i32> = (0..100).collect();
    let (calls, pages) =
        round_trips(&srv.store, s.pages(&wiki, &ids, ReadOptions::default())).await;
    let pages = pages.unwrap();
    assert_eq!(calls, 3);
    assert_eq!(pages.len(), 100);
    assert!(
        pages
            .iter()
            .enumerate()
            .all(|(i, p)| p[0].suggestion.image == format!("P{i}.jpg"))
    );
    let too_many: Vec<i32> = (0..101).collect();
    assert_eq!(
        s.pages(&wiki, &too_many, ReadOptions::default())
            .await
            .unwrap_err()
            .code(),
        "BAD_USER_INPUT"
    );
    let gql = srv
        .data(
            "query($w: String!, $p: [Int!]!) { imageSuggestionsForPages(wiki: $w, pageIds: $p) { pageId suggestions { image } } }",
            json!({"w": wiki, "p": [3, 5, 1000]}),
            None,
        )
        .await;
    assert_eq!(
        gql["imageSuggestionsForPages"][1]["suggestions"][0]["image"],
        "P5.jpg"
    );
    assert_eq!(gql["imageSuggestionsForPages"][2]["suggestions"], json!([]));
    // Every page a request names, through its DataLoader: one batched read.
    let (calls, d) = round_trips(
        &srv.store,
        srv.data(
            "query($w: String!) { a: imageSuggestions(wiki: $w, pageId: 1) { image }
               b: imageSuggestions(wiki: $w, pageId: 2, minConfidence: 0.9) { image }
               c: imageSuggestionsForPages(wiki: $w, pageIds: [3, 4]) { pageId suggestions { image } } }",
            json!({"w": wiki}),
            None,
        ),
    )
    .await;
    assert_eq!(calls, 3, "{d}");
    assert_eq!(d["a"][0]["image"], "P1.jpg");
    assert_eq!(d["b"], json!([]), "below minConfidence");
    assert_eq!(d["c"][1]["suggestions"][0]["image"], "P4.jpg");

    // Random pages: distinct pages of the dataset with open suggestions.
    let random = s.random_pages(&wiki, 10).await.unwrap();
    assert_eq!(random.len(), 10);
    let distinct: std::collections::BTreeSet<_> = random.iter().collect();
    assert_eq!(distinct.len(), 10);
    assert!(random.iter().all(|p| (0..100).contains(p)));
    assert!(s.random_pages(&wiki, 51).await.is_err());

    // REST: the public service's field names and JSON types.
    let base = &srv.url;
    let get = |path: String, token: Option<String>| {
        let c = srv.client.clone();
        async move {
            let mut r = c.get(format!("{base}{path}"));
            if let Some(t) = token {
                r = r.bearer_auth(t);
            }
            let resp = r.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Json>().await.unwrap())
        }
    };
    let (status, body) = get(
        format!("/public/image_suggestions/suggestions/{wiki}/42"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let row = &body["rows"][0];
    let mut keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "confidence",
            "found_on",
            "id",
            "image",
            "kind",
            "origin_wiki",
            "page_id",
            "page_qid",
            "page_rev",
            "section_heading",
            "section_index",
            "wiki"
        ]
    );
    assert!(row["page_id"].is_i64() && row["confidence"].is_f64() && row["found_on"].is_array());
    assert!(row["section_heading"].is_null() && row["page_rev"].is_i64());
    let (_, empty) = get(
        "/public/image_suggestions/suggestions/nowiki/1".into(),
        None,
    )
    .await;
    assert_eq!(empty, json!({"rows": []}));
    let (status, bad) = get(
        format!("/public/image_suggestions/suggestions/{wiki}/abc"),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["error"]["code"], "BAD_USER_INPUT");
    let private = format!("/private/image_suggestions/instanceof_cache/{wiki}/42");
    assert_eq!(get(private.clone(), None).await.0, 401);
    assert_eq!(
        get(private.clone(), Some(srv.token(&["contributor"])))
            .await
            .0,
        403
    );
    let (status, inst) = get(private, Some(srv.token(&["editor"]))).await;
    assert_eq!(status, 200);
    assert_eq!(
        inst["rows"][0]["instance_of"],
        json!(["Q5119", "Q515"]),
        "a set, sorted"
    );
    let (_, title) = get(
        format!("/private/image_suggestions/title_cache/{wiki}/Berlin"),
        Some(srv.token(&["machine"])),
    )
    .await;
    assert_eq!(title["rows"][0]["page_id"], 42);
    let (_, fb) = get(
        format!("/private/image_suggestions/feedback/{wiki}/42"),
        Some(srv.admin()),
    )
    .await;
    assert_eq!(fb, json!({"rows": []}));
}

/// A server, and a wiki of its own whose current dataset is `lines`.
async fn serving(engine: Engine, lines: Vec<String>) -> (TestServer, Suggestions, String) {
    let srv = server(engine).await;
    let s = Suggestions::new(srv.store.clone());
    let wiki = format!("w{}", uid());
    assert!(run_import(&s, &wiki, lines, 0, 1).await.published);
    (srv, s, wiki)
}

const RECORD: &str = "mutation($w: String!, $p: Int!, $f: String!, $a: Boolean!) {
    recordSuggestionFeedback(wiki: $w, pageId: $p, filename: $f, accepted: $a) { user } }";

const REVIEWED: &str = "query($w: String!, $p: Int!) {
    imageSuggestions(wiki: $w, pageId: $p, includeReviewed: true) {
      image feedback { user accepted rejected rejectionReasons } } }";

/// A verdict on page 7 of `wiki`.
fn verdict(wiki: &str, filename: &str, accepted: bool, reasons: &[&str]) -> FeedbackInput {
    FeedbackInput {
        wiki: wiki.to_owned(),
        page_id: 7,
        filename: filename.to_owned(),
        accepted,
        rejection_reasons: reasons.iter().map(|r| r.to_string()).collect(),
    }
}

/// Who reviewed what is shown to callers with a token (any role) only: an
/// anonymous reader of the reviewed suggestions gets each verdict without
/// its user, over GraphQL and over the public REST route.
async fn reviewer_names_are_shown_to_signed_in_callers_only(engine: Engine) {
    let (srv, _, wiki) = serving(
        engine,
        vec![line(7, "Good.jpg", 0.9), line(7, "Bad.jpg", 0.8)],
    )
    .await;
    let editor = srv.token_as("erika@example.org", &["editor"]);
    let vars = json!({"w": wiki, "p": 7, "f": "Bad.jpg", "a": false});
    let recorded = srv.data(RECORD, vars, Some(&editor)).await;
    assert_eq!(
        recorded["recordSuggestionFeedback"]["user"],
        "erika@example.org"
    );

    let vars = json!({"w": wiki, "p": 7});
    let anonymous = srv.data(REVIEWED, vars.clone(), None).await;
    assert!(!anonymous.to_string().contains("erika"), "{anonymous:#}");
    let bad = &anonymous["imageSuggestions"][1];
    assert_eq!(bad["image"], "Bad.jpg");
    assert_eq!(bad["feedback"][0]["user"], Json::Null);
    assert_eq!(
        bad["feedback"][0]["rejected"], true,
        "the verdict itself is public"
    );
    let signed_in = srv.token_as("rudi", &[]);
    let named = srv.data(REVIEWED, vars, Some(&signed_in)).await;
    assert_eq!(
        named["imageSuggestions"][1]["feedback"][0]["user"],
        "erika@example.org"
    );

    let path = format!(
        "{}/public/image_suggestions/suggestions/{wiki}/7?include_reviewed=true",
        srv.url
    );
    let rest = |token: Option<&str>| {
        let mut r = srv.client.get(&path);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move {
            let resp = r.send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.json::<Json>().await.unwrap()
        }
    };
    for token in [None, Some("not-a-token")] {
        let rows = rest(token).await;
        assert!(!rows.to_string().contains("erika"), "{token:?}: {rows:#}");
        let bad = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["image"] == "Bad.jpg")
            .unwrap();
        assert_eq!(bad["feedback"][0]["user_name"], Json::Null, "{rows:#}");
        assert_eq!(bad["feedback"][0]["is_rejected"], true, "{rows:#}");
    }
    let rows = rest(Some(&signed_in)).await;
    assert!(rows.to_string().contains("erika@example.org"), "{rows:#}");
}

/// One contributor sending a thousand verdicts on an image that sorts before
/// the one an editor rejects: one row per user and image (the contributor's
/// last verdict replaces the others), so the editor's rejection still masks
/// its image and is read back; a verdict on an image the page is not
/// suggested is refused and writes nothing.
async fn one_feedback_row_per_user_and_image_the_latest_wins(engine: Engine) {
    use futures::{StreamExt, TryStreamExt};
    let (srv, s, wiki) = serving(
        engine,
        vec![
            line(7, "A.jpg", 0.9),
            line(7, "B.jpg", 0.8),
            line(7, "C.jpg", 0.7),
        ],
    )
    .await;
    let contributor = Principal::local("conny", &[Role::Contributor]);
    let editor = Principal::local("erika", &[Role::Editor]);
    futures::stream::iter(0..999)
        .map(|i| s.record_feedback(&contributor, verdict(&wiki, "A.jpg", i % 2 == 0, &[])))
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    s.record_feedback(&contributor, verdict(&wiki, "A.jpg", false, &["final"]))
        .await
        .unwrap();
    s.record_feedback(&editor, verdict(&wiki, "B.jpg", false, &["wrong place"]))
        .await
        .unwrap();

    let rows = s.feedback(&wiki, 7).await.unwrap();
    let kept: Vec<(&str, &str, bool, Vec<String>)> = rows
        .iter()
        .map(|f| {
            (
                f.filename.as_str(),
                f.user_name.as_str(),
                f.is_rejected,
                f.rejection_reasons.clone(),
            )
        })
        .collect();
    assert_eq!(
        kept,
        [
            ("A.jpg", "conny", true, vec!["final".to_owned()]),
            ("B.jpg", "erika", true, vec!["wrong place".to_owned()]),
        ]
    );
    assert_eq!(images(&s, &wiki, 7).await.len(), 1, "only C.jpg is open");
    let reviewed = srv
        .data(REVIEWED, json!({"w": wiki, "p": 7}), Some(&srv.admin()))
        .await;
    let b = &reviewed["imageSuggestions"][1];
    assert_eq!(b["image"], "B.jpg");
    assert_eq!(
        b["feedback"],
        json!([{"user": "erika", "accepted": false, "rejected": true, "rejectionReasons": ["wrong place"]}])
    );

    let made_up = s
        .record_feedback(&contributor, verdict(&wiki, "0-Made-up.jpg", true, &[]))
        .await
        .unwrap_err();
    assert_eq!(made_up.code(), "NOT_FOUND", "{made_up:?}");
    let again = srv
        .gql(
            RECORD,
            json!({"w": wiki, "p": 8, "f": "A.jpg", "a": true}),
            Some(&srv.token(&["contributor"])),
        )
        .await;
    assert_eq!(
        code(&again),
        "NOT_FOUND",
        "A.jpg is not suggested for page 8"
    );
    assert_eq!(s.feedback(&wiki, 7).await.unwrap().len(), 2);
    assert!(s.feedback(&wiki, 8).await.unwrap().is_empty());
}

/// `randomPagesWithSuggestions` answers every count it documents (1 to 50),
/// also where one bucket of the dataset's keys holds more pages than one
/// multi-page read takes; 0 and 51 are refused.
async fn random_pages_answer_every_documented_count(engine: Engine) {
    // Page ids in one bucket of 16: 150 keys for the walk to read there.
    let (srv, _, wiki) = serving(
        engine,
        (0..150)
            .map(|i| line(16 * i, &format!("P{i}.jpg"), 0.5))
            .collect(),
    )
    .await;
    let query = "query($w: String!, $n: Int) { randomPagesWithSuggestions(wiki: $w, count: $n) }";
    for n in [1, 10, 25, 26, 27, 40, 49, 50] {
        let d = srv.data(query, json!({"w": wiki, "n": n}), None).await;
        let pages: Vec<i64> = d["randomPagesWithSuggestions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_i64().unwrap())
            .collect();
        assert_eq!(pages.len(), n as usize, "count {n}: {pages:?}");
        let distinct: std::collections::BTreeSet<_> = pages.iter().collect();
        assert_eq!(distinct.len(), pages.len(), "count {n}: {pages:?}");
        assert!(
            pages
                .iter()
                .all(|p| p % 16 == 0 && (0..16 * 150).contains(p)),
            "{pages:?}"
        );
    }
    for n in [0, 51, -1] {
        let r = srv.gql(query, json!({"w": wiki, "n": n}), None).await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "count {n}");
    }
}

/// A page named twice (or more) in `imageSuggestionsForPages`, or by two
/// `imageSuggestions` fields of one request, is answered each time, in the
/// order asked.
async fn duplicate_page_ids_are_each_answered(engine: Engine) {
    let (srv, _, wiki) = serving(
        engine,
        vec![line(5, "Five.jpg", 0.9), line(6, "Six.jpg", 0.9)],
    )
    .await;
    let d = srv
        .data(
            "query($w: String!) {
               many: imageSuggestionsForPages(wiki: $w, pageIds: [5, 6, 5, 5, 7]) { pageId suggestions { image } }
               a: imageSuggestions(wiki: $w, pageId: 5) { image }
               b: imageSuggestions(wiki: $w, pageId: 5) { image } }",
            json!({"w": wiki}),
            None,
        )
        .await;
    let answered: Vec<(i64, Json)> = d["many"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pageId"].as_i64().unwrap(), p["suggestions"].clone()))
        .collect();
    let five = json!([{"image": "Five.jpg"}]);
    assert_eq!(
        answered,
        [
            (5, five.clone()),
            (6, json!([{"image": "Six.jpg"}])),
            (5, five.clone()),
            (5, five.clone()),
            (7, json!([])),
        ]
    );
    assert_eq!(d["a"], five);
    assert_eq!(d["b"], five);
}

/// `kartei import-suggestions` killed with SIGKILL half-way: readers keep the
/// previous dataset; the next import purges the orphan and publishes.
async fn a_killed_import_is_never_served(engine: Engine) {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let wiki = format!("w{}", uid());
    let store_args: Vec<String> = match engine {
        Engine::Embedded => vec!["--data-dir".into(), dir.path().display().to_string()],
        Engine::Cassandra => {
            let c = crate::support::cluster().await;
            vec![
                "--cassandra".into(),
                std::env::var("KARTEI_TEST_CASSANDRA").unwrap(),
                "--env".into(),
                c.engine.env().to_owned(),
            ]
        }
    };
    let kartei = |extra: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_kartei"));
        c.args(["import-suggestions", "--wiki", &wiki, "--dead-after", "0"])
            .args(extra)
            .args(&store_args)
            .env_remove("KARTEI_CASSANDRA")
            .env_remove("KARTEI_DATA_DIR");
        c
    };
    let a_file = dir.path().join("a.ndjson");
    std::fs::write(
        &a_file,
        format!("{}\n{}\n", line(1, "A.jpg", 0.9), line(2, "A2.jpg", 0.9)),
    )
    .unwrap();
    let out = kartei(&[a_file.to_str().unwrap()]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // B arrives on stdin, part of it, then the process is killed.
    let mut child = kartei(&["-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut chunk = String::new();
    for p in 0..3_000 {
        chunk.push_str(&line(p, "B.jpg", 0.5));
        chunk.push('\n');
    }
    stdin.write_all(chunk.as_bytes()).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);

    let open = || async {
        let (store, _keep): (DynStore, Option<crate::support::TestStore>) = match engine {
            Engine::Embedded => (
                std::sync::Arc::new(kartei::store::Counted::new(
                    kartei::store::embedded::EmbeddedStore::open(dir.path()).unwrap(),
                )),
                None,
            ),
            Engine::Cassandra => (crate::support::cluster().await, None),
        };
        store
    };
    {
        let store = open().await;
        let s = Suggestions::new(store.clone());
        let shown = images(&s, &wiki, 1).await;
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].0, "A.jpg", "only A is served");
        let all = s.datasets(&wiki).await.unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].state, DatasetState::Importing, "B is an orphan");
    }

    // The rerun purges the orphan and publishes.
    let b_file = dir.path().join("b.ndjson");
    std::fs::write(&b_file, format!("{}\n", line(1, "B.jpg", 0.5))).unwrap();
    let out = kartei(&[b_file.to_str().unwrap()]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = open().await;
    let s = Suggestions::new(store.clone());
    assert_eq!(images(&s, &wiki, 1).await[0].0, "B.jpg");
    assert!(images(&s, &wiki, 2).await.is_empty());
    let all = s.datasets(&wiki).await.unwrap();
    let orphan = &all[1];
    assert_eq!(orphan.state, DatasetState::Purged, "{all:?}");
    assert_eq!(rows_of(&store, &wiki, 5, &orphan.id).await, 0);
}

both_engines!(
    reviewer_names_are_shown_to_signed_in_callers_only,
    one_feedback_row_per_user_and_image_the_latest_wins,
    random_pages_answer_every_documented_count,
    duplicate_page_ids_are_each_answered,
    publishing_switches_datasets_at_once,
    failed_imports_stay_invisible_and_leave_nothing,
    rollback_and_keep,
    feedback_masks_across_datasets,
    titles_and_many_pages,
    a_killed_import_is_never_served,
);
