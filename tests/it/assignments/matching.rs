//! `transitionMatching`: "select all N matching" as one server-side job,
//! refused when the count changed since the curator looked, followed with
//! `job(id)`, and exact in its result, its history and the counts.

use serde_json::{Value, json};

use super::{SUGGEST, check_views, import_text, suggestion};
use crate::both_engines;
use crate::support::{Caller, Engine, TestApp};

const MATCHING: &str = "mutation($f: MatchingFilter!, $n: Int!, $t: AssignmentStatus!) { transitionMatching(filter: $f, expectedCount: $n, to: $t) { id kind state input bytesTotal } }";
const JOB: &str = "query($id: ID!) { job(id: $id) { state bytesRead bytesTotal progress result errors exitCode startedBy } }";
const COUNTS: &str =
    "query($p: ID!) { assignmentCounts(portalId: $p) { byCreator { creator status count } } }";

fn filter(portal: &str, status: &str, creator: Option<&str>) -> Value {
    json!({"portalId": portal, "status": status, "creator": creator})
}

/// The job `id` once it has ended (polled; the server writes its progress
/// as it goes).
async fn ended(who: &Caller<'_>, id: &str) -> Value {
    for _ in 0..600 {
        let job = who.query(JOB, json!({"id": id})).await["job"].clone();
        if job["state"] != "RUNNING" {
            return job;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("job {id} still runs after a minute");
}

async fn count_of(who: &Caller<'_>, portal: &str, creator: &str, status: &str) -> i64 {
    let d = who.query(COUNTS, json!({"p": portal})).await;
    d["assignmentCounts"]["byCreator"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["creator"] == creator && c["status"] == status)
        .map(|c| c["count"].as_i64().unwrap())
        .sum()
}

async fn a_whole_filter_is_accepted_as_one_job_when_its_count_still_holds(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let erik = app.as_editor("erik");
    let lines: Vec<String> = (0..250)
        .map(|i| {
            json!({"portalId": v.p, "ddbId": format!("m{i:03}"), "keywordId": v.k1, "childCategoryId": v.c1})
                .to_string()
        })
        .collect();
    import_text(&app.store, "bot", &lines.join("\n")).await;
    // Another creator's suggestion, outside the filter.
    app.as_machine("other")
        .query(SUGGEST, suggestion(&v.p, "m000", &v.k2, &v.c2))
        .await;
    let all_bot = filter(&v.p, "AUTOSUGGESTED", Some("bot"));

    // Refused before anything changes: another count than the curator saw,
    // a filter that matches nothing, the wrong roles, a move the workflow
    // does not have.
    let vars = |f: &Value, n: i64, to: &str| json!({"f": f, "n": n, "t": to});
    assert_eq!(
        erik.query_err(MATCHING, vars(&all_bot, 249, "ACCEPTED"))
            .await,
        "MATCH_COUNT_CHANGED"
    );
    assert_eq!(
        erik.query_err(
            MATCHING,
            vars(
                &filter(&v.p, "AUTOSUGGESTED", Some("nobody")),
                1,
                "ACCEPTED"
            )
        )
        .await,
        "NOTHING_MATCHES"
    );
    assert_eq!(
        app.as_contributor("carla")
            .query_err(MATCHING, vars(&all_bot, 250, "ACCEPTED"))
            .await,
        "FORBIDDEN"
    );
    assert_eq!(
        app.anonymous()
            .query_err(MATCHING, vars(&all_bot, 250, "ACCEPTED"))
            .await,
        "UNAUTHENTICATED"
    );
    assert_eq!(
        erik.query_err(MATCHING, vars(&all_bot, 250, "PUBLISHED"))
            .await,
        "INVALID_TRANSITION"
    );
    assert_eq!(
        erik.query_err(MATCHING, vars(&all_bot, 0, "ACCEPTED"))
            .await,
        "BAD_USER_INPUT"
    );
    assert_eq!(count_of(&erik, &v.p, "bot", "AUTOSUGGESTED").await, 250);

    // The count holds: one job moves all 250, and nothing else.
    let d = erik.query(MATCHING, vars(&all_bot, 250, "ACCEPTED")).await;
    let job = &d["transitionMatching"];
    assert_eq!(job["kind"], "transition-matching");
    assert_eq!(job["bytesTotal"], 250.0);
    let done = ended(&erik, job["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "DONE", "{done}");
    assert_eq!(done["exitCode"], 0);
    assert_eq!(done["bytesRead"], 250.0);
    assert_eq!(done["progress"], 1.0);
    assert_eq!(done["startedBy"], "erik");
    assert_eq!(
        done["result"],
        json!(["250 changed, 0 changed by someone else first, 0 failed"])
    );
    assert_eq!(count_of(&erik, &v.p, "bot", "ACCEPTED").await, 250);
    assert_eq!(count_of(&erik, &v.p, "bot", "AUTOSUGGESTED").await, 0);
    assert_eq!(count_of(&erik, &v.p, "other", "AUTOSUGGESTED").await, 1);
    // Each one a transition of its own, in its history as erik's.
    let h = erik
        .query(
            "query($p: ID!) { objectAssignments(ddbId: \"m123\", portalId: $p) { creator status history { from to actor } } }",
            json!({"p": v.p}),
        )
        .await;
    let a = &h["objectAssignments"][0];
    assert_eq!(a["status"], "ACCEPTED");
    assert_eq!(
        a["history"],
        json!([{"from": "AUTOSUGGESTED", "to": "ACCEPTED", "actor": "erik"}])
    );
    check_views(&app.store, &v.p).await;
}

both_engines!(a_whole_filter_is_accepted_as_one_job_when_its_count_still_holds);
