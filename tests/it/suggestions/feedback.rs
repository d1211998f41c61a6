//! Feedback on suggested images: it masks them across datasets, one row per
//! user and image, and reviewers' names only for callers who signed in.

use kartei::domains::suggestions::service::{FeedbackInput, Suggestions};
use kartei::kernel::roles::{Principal, Role};
use serde_json::{Value as Json, json};

use super::{images, line, run_import, serving};
use crate::both_engines;
use crate::support::{Engine, TestApp, code, uid};

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

async fn feedback_masks_across_datasets(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let s = Suggestions::new(app.store.clone());
    let wiki = format!("w{}", uid());
    let lines = vec![line(7, "Good.jpg", 0.9), line(7, "Bad.jpg", 0.8)];
    assert!(run_import(&s, &wiki, lines.clone(), 0, 1).await.published);
    let record = "mutation($w: String!, $f: String!, $a: Boolean!, $r: [String!]) {
        recordSuggestionFeedback(wiki: $w, pageId: 7, filename: $f, accepted: $a, rejectionReasons: $r) {
          wiki pageId filename user accepted rejected rejectionReasons originWiki time } }";
    let vars = json!({"w": wiki, "f": "Bad.jpg", "a": false, "r": ["wrong place", "blurry"]});
    let anonymous = app.anonymous().query_err(record, vars.clone()).await;
    assert_eq!(anonymous, "UNAUTHENTICATED");
    let as_machine = app
        .as_machine("tester")
        .query_err(record, vars.clone())
        .await;
    assert_eq!(as_machine, "FORBIDDEN");
    let editor = app.as_editor("erika");
    let d = editor.query(record, vars).await;
    let f = &d["recordSuggestionFeedback"];
    assert_eq!(f["user"], "erika");
    assert_eq!(f["rejected"], true);
    assert_eq!(f["rejectionReasons"], json!(["blurry", "wrong place"]));
    assert_eq!(f["originWiki"], "commonswiki");
    assert!(f["time"].as_str().unwrap().starts_with("20"));

    let read = "query($w: String!, $all: Boolean) {
        imageSuggestions(wiki: $w, pageId: 7, includeReviewed: $all) {
          image confidence datasetId datasetTime feedback { user rejected } } }";
    let masked = app.anonymous().query(read, json!({"w": wiki})).await;
    let got = masked["imageSuggestions"].as_array().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["image"], "Good.jpg");
    let all = editor.query(read, json!({"w": wiki, "all": true})).await;
    let got = all["imageSuggestions"].as_array().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1]["feedback"][0]["user"], "erika");
    // A new dataset with the same image: still masked (feedback survives switches).
    assert!(run_import(&s, &wiki, lines, 0, 1).await.published);
    let again = app.anonymous().query(read, json!({"w": wiki})).await;
    assert_eq!(again["imageSuggestions"].as_array().unwrap().len(), 1);
    // Bad input.
    let neither = app
        .anonymous()
        .response("{ imageSuggestions(wiki: \"x\") { image } }", json!({}))
        .await;
    assert_eq!(code(&neither), "BAD_USER_INPUT");
}

/// Who reviewed what is shown to callers with a token (any role) only: an
/// anonymous reader of the reviewed suggestions gets each verdict without
/// its user, over GraphQL and over the public REST route.
async fn reviewer_names_are_shown_to_signed_in_callers_only(engine: Engine) {
    let (app, _, wiki) = serving(
        engine,
        vec![line(7, "Good.jpg", 0.9), line(7, "Bad.jpg", 0.8)],
    )
    .await;
    let editor = app.as_editor("erika@example.org");
    let vars = json!({"w": wiki, "p": 7, "f": "Bad.jpg", "a": false});
    let recorded = editor.query(RECORD, vars).await;
    assert_eq!(
        recorded["recordSuggestionFeedback"]["user"],
        "erika@example.org"
    );

    let vars = json!({"w": wiki, "p": 7});
    let anonymous = app.anonymous().query(REVIEWED, vars.clone()).await;
    assert!(!anonymous.to_string().contains("erika"), "{anonymous:#}");
    let bad = &anonymous["imageSuggestions"][1];
    assert_eq!(bad["image"], "Bad.jpg");
    assert_eq!(bad["feedback"][0]["user"], Json::Null);
    assert_eq!(
        bad["feedback"][0]["rejected"], true,
        "the verdict itself is public"
    );
    let signed_in = app.signed_in("rudi", &[]);
    let named = signed_in.query(REVIEWED, vars).await;
    assert_eq!(
        named["imageSuggestions"][1]["feedback"][0]["user"],
        "erika@example.org"
    );

    let path = format!(
        "{}/public/image_suggestions/suggestions/{wiki}/7?include_reviewed=true",
        app.url
    );
    let rest = |token: Option<&str>| {
        let mut r = app.client.get(&path);
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
    let rows = rest(signed_in.token()).await;
    assert!(rows.to_string().contains("erika@example.org"), "{rows:#}");
}

/// One contributor sending a thousand verdicts on an image that sorts before
/// the one an editor rejects: one row per user and image (the contributor's
/// last verdict replaces the others), so the editor's rejection still masks
/// its image and is read back; a verdict on an image the page is not
/// suggested is refused and writes nothing.
async fn one_feedback_row_per_user_and_image_the_latest_wins(engine: Engine) {
    use futures::{StreamExt, TryStreamExt};
    let (app, s, wiki) = serving(
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
    let reviewed = app
        .data(REVIEWED, json!({"w": wiki, "p": 7}), Some(&app.admin()))
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
    let again = app
        .gql(
            RECORD,
            json!({"w": wiki, "p": 8, "f": "A.jpg", "a": true}),
            Some(&app.token(&["contributor"])),
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

both_engines!(
    feedback_masks_across_datasets,
    reviewer_names_are_shown_to_signed_in_callers_only,
    one_feedback_row_per_user_and_image_the_latest_wins,
);
