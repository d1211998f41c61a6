//! Subscribers see the changes of every instance, filtered by status, with
//! the vocabulary as it is when each event comes and who made it when they
//! signed in.

use std::time::Duration;

use serde_json::{Value, json};

use super::{CHANGES, connect, next_event, next_message, subscribe, watching};
use crate::assignments::{SUGGEST, TRANSITION, key, suggestion};
use crate::both_engines;
use crate::support::{Caller, Engine, TestApp, second_instance};

/// Contributor `creator` suggests a keyword for obj-1; `editor` accepts it
/// and runs the portal's release.
async fn suggest_accept_release(app: &TestApp, creator: &str, editor: &Caller<'_>) {
    let v = app.vocabulary();
    let k = key(&v.p, "obj-1", &v.k1, creator);
    app.as_contributor(creator)
        .query(SUGGEST, suggestion(&v.p, "obj-1", &v.k1, &v.c1))
        .await;
    editor
        .query(
            TRANSITION,
            json!({"k": k, "e": "SUGGESTED", "t": "ACCEPTED"}),
        )
        .await;
    editor
        .query(
            "mutation($p: ID!) { runRelease(portalId: $p) { published } }",
            json!({"p": v.p}),
        )
        .await;
}

/// Two instances over one store: a change made through one reaches a
/// subscriber of the other, in order, with who made it; a subscriber that
/// reconnects with the first event's id gets the second again (no gap).
async fn a_change_on_one_instance_reaches_a_subscriber_of_another(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let other = second_instance(&app).await;
    // A token (no role needed) to be told who made each change.
    let reader = app.token_as("rita", &[]);
    let mut ws = watching(&other.url, &v.p, Some(&reader)).await;

    let contributor = app.as_contributor("clara");
    let editor = app.as_editor("eddie");
    contributor
        .query(SUGGEST, suggestion(&v.p, "obj-1", &v.k1, &v.c1))
        .await;
    let t = editor
        .response(
            TRANSITION,
            json!({"k": key(&v.p, "obj-1", &v.k1, "clara"), "e": "SUGGESTED", "t": "ACCEPTED"}),
        )
        .await;
    assert!(t.get("errors").is_none(), "{t:#}");
    // A change in another portal is not sent.
    contributor
        .query(SUGGEST, suggestion(&v.q, "obj-2", &v.kq, &v.qc))
        .await;

    let created = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(created["kind"], "CHANGED");
    assert_eq!(created["actor"], "clara");
    assert_eq!(created["previousStatus"], Value::Null);
    assert_eq!(created["assignment"]["status"], "SUGGESTED");
    assert_eq!(created["assignment"]["keyword"]["label"], "Bayern");
    let accepted = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(accepted["actor"], "eddie");
    assert_eq!(accepted["previousStatus"], "SUGGESTED");
    assert_eq!(accepted["assignment"]["status"], "ACCEPTED");
    assert!(created["id"].as_str() < accepted["id"].as_str());
    drop(ws);

    // Reconnect and resume after the first event: the second comes again.
    let (mut ws, _) = connect(&app.url, None).await;
    subscribe(
        &mut ws,
        "1",
        CHANGES,
        json!({"p": v.p, "after": created["id"]}),
    )
    .await;
    let mut ids = Vec::new();
    loop {
        let e = next_event(&mut ws, "assignmentChanged").await;
        ids.push(e["id"].as_str().unwrap().to_owned());
        if e["id"] == accepted["id"] {
            break;
        }
    }
    assert!(ids.contains(&accepted["id"].as_str().unwrap().to_owned()));
    assert!(
        ids.iter()
            .all(|id| id.as_str() >= created["id"].as_str().unwrap())
    );

    // An `after` that is no event id is refused, and the socket stays usable.
    subscribe(&mut ws, "2", CHANGES, json!({"p": v.p, "after": "garbage"})).await;
    let refused = next_message(&mut ws).await.expect("an answer");
    assert_eq!(refused["id"], "2", "{refused:#}");
    assert!(
        refused.to_string().contains("BAD_USER_INPUT"),
        "{refused:#}"
    );
    // So is one from before the replay window: the client reloads.
    let old = "0000000000000-0000000000000000";
    subscribe(&mut ws, "3", CHANGES, json!({"p": v.p, "after": old})).await;
    let mut refused = next_message(&mut ws).await.expect("an answer");
    if refused["type"] == "complete" {
        refused = next_message(&mut ws).await.expect("an answer");
    }
    assert_eq!(refused["id"], "3", "{refused:#}");
    let text = refused.to_string();
    assert!(
        text.contains("REPLAY_TOO_OLD") && text.contains("--replay-window"),
        "{refused:#}"
    );
}

/// With a status, only changes into or out of it are sent; release runs
/// reach `releaseRunFinished` with their outcome.
async fn status_filters_and_release_runs(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let editor = app.as_editor("eddie");
    let (mut ws, acked) = connect(&app.url, editor.token()).await;
    assert!(acked);
    subscribe(&mut ws, "s", CHANGES, json!({"p": v.p, "s": "ACCEPTED"})).await;
    subscribe(
        &mut ws,
        "r",
        "subscription($p: ID!) { releaseRunFinished(portalId: $p) { actor run { successful published } } }",
        json!({"p": v.p}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    suggest_accept_release(&app, "clara", &editor).await;
    // The creation (SUGGESTED) is not sent; the acceptance is; the release
    // moves it out of ACCEPTED (no per-row events for a run), then its end.
    // Two subscriptions of one socket are not ordered between each other.
    let mut by_id = std::collections::BTreeMap::new();
    for _ in 0..2 {
        let m = next_message(&mut ws).await.unwrap();
        assert_eq!(m["type"], "next", "{m:#}");
        assert!(
            by_id
                .insert(m["id"].as_str().unwrap().to_owned(), m)
                .is_none()
        );
    }
    let accepted = &by_id["s"]["payload"]["data"]["assignmentChanged"];
    assert_eq!(accepted["assignment"]["status"], "ACCEPTED");
    assert_eq!(accepted["previousStatus"], "SUGGESTED");
    let run = &by_id["r"]["payload"]["data"]["releaseRunFinished"];
    assert_eq!(run["actor"], "eddie");
    assert_eq!(run["run"]["successful"], true);
    assert_eq!(run["run"]["published"], 1);
}

/// A subscription's DataLoaders live per event (issue 30): a keyword renamed
/// between two events shows its new label in the second, not the label the
/// first event's read cached.
async fn each_event_reads_the_vocabulary_as_it_is_when_it_comes(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let mut ws = watching(&app.url, &v.p, None).await;
    let clara = app.as_contributor("clara");
    clara
        .query(SUGGEST, suggestion(&v.p, "obj-1", &v.k1, &v.c1))
        .await;
    let created = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(created["assignment"]["keyword"]["label"], "Bayern");

    let renamed = json!({"i": {"id": v.k1, "label": "Freistaat Bayern", "categoryIds": [v.c1]}});
    app.as_admin()
        .query(
            "mutation($i: UpsertKeywordInput!) { upsertKeyword(input: $i) { label } }",
            renamed,
        )
        .await;
    let k = key(&v.p, "obj-1", &v.k1, "clara");
    app.as_editor("eddie")
        .query(
            TRANSITION,
            json!({"k": k, "e": "SUGGESTED", "t": "ACCEPTED"}),
        )
        .await;
    let accepted = next_event(&mut ws, "assignmentChanged").await;
    assert_eq!(accepted["assignment"]["status"], "ACCEPTED");
    assert_eq!(
        accepted["assignment"]["keyword"]["label"], "Freistaat Bayern",
        "the second event read the keyword again"
    );
}

/// Who made a change (a token's subject: a user's name or e-mail address)
/// is sent to subscribers with a token only; an anonymous subscriber gets the
/// same events with `actor: null`, for assignment changes and release runs.
async fn event_actors_are_shown_to_subscribers_with_a_token(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let editor = app.as_editor("eddie@example.org");
    let reader = app.token_as("rita", &[]);
    let runs = "subscription($p: ID!) { releaseRunFinished(portalId: $p) { actor run { successful published } } }";
    let mut sockets = Vec::new();
    for token in [None, Some(reader.as_str())] {
        let (mut ws, acked) = connect(&app.url, token).await;
        assert!(acked, "{token:?}");
        subscribe(&mut ws, "c", CHANGES, json!({"p": v.p})).await;
        subscribe(&mut ws, "r", runs, json!({"p": v.p})).await;
        sockets.push((ws, token.is_some()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    suggest_accept_release(&app, "clara@example.org", &editor).await;
    for (ws, signed_in) in &mut sockets {
        // Two changes (the release sends no per-row events) and one run, the
        // two subscriptions not ordered between each other.
        let (mut changes, mut runs) = (Vec::new(), Vec::new());
        while changes.len() < 2 || runs.is_empty() {
            let m = next_message(ws).await.expect("an event");
            assert_eq!(m["type"], "next", "{m:#}");
            assert!(m["payload"].get("errors").is_none(), "{m:#}");
            match m["id"].as_str() {
                Some("c") => changes.push(m["payload"]["data"]["assignmentChanged"].clone()),
                _ => runs.push(m["payload"]["data"]["releaseRunFinished"].clone()),
            }
        }
        assert_eq!(changes[0]["assignment"]["status"], "SUGGESTED");
        assert_eq!(changes[1]["assignment"]["status"], "ACCEPTED");
        assert_eq!(runs[0]["run"]["successful"], true);
        let actors = [
            &changes[0]["actor"],
            &changes[1]["actor"],
            &runs[0]["actor"],
        ];
        if *signed_in {
            assert_eq!(
                actors,
                [
                    &json!("clara@example.org"),
                    &json!("eddie@example.org"),
                    &json!("eddie@example.org")
                ]
            );
        } else {
            assert_eq!(actors, [&Value::Null, &Value::Null, &Value::Null]);
            let all = format!("{changes:?}{runs:?}");
            assert!(!all.contains("example.org"), "{all}");
        }
    }
}

both_engines!(
    a_change_on_one_instance_reaches_a_subscriber_of_another,
    status_filters_and_release_runs,
    each_event_reads_the_vocabulary_as_it_is_when_it_comes,
    event_actors_are_shown_to_subscribers_with_a_token,
);
