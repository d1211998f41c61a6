//! `assignments(orderBy:)`: a status's assignments by confidence (highest
//! first, none last) or by age (oldest first), paged with cursors over the
//! merged buckets, following every status change.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::{SUGGEST, check_views, key, transition};
use crate::both_engines;
use crate::support::{Caller, Engine, TestApp, movable_clock};

const LIST: &str = "query($p: ID!, $s: AssignmentStatus, $c: String, $o: AssignmentOrder!, $a: String) { assignments(portalId: $p, status: $s, creator: $c, orderBy: $o, first: 7, after: $a) { edges { cursor node { ddbId confidence createdAt } } pageInfo { hasNextPage endCursor } } }";

/// Every page of `status` in `order`: (ddb id, confidence, created at).
async fn all(
    who: &Caller<'_>,
    portal: &str,
    status: &str,
    order: &str,
) -> Vec<(String, Option<f64>, String)> {
    let mut out = Vec::new();
    let mut after = Value::Null;
    loop {
        let d = who
            .query(
                LIST,
                json!({"p": portal, "s": status, "o": order, "a": after}),
            )
            .await;
        let c = &d["assignments"];
        for e in c["edges"].as_array().unwrap() {
            let n = &e["node"];
            out.push((
                n["ddbId"].as_str().unwrap().to_owned(),
                n["confidence"].as_f64(),
                n["createdAt"].as_str().unwrap().to_owned(),
            ));
        }
        if c["pageInfo"]["hasNextPage"] != true {
            return out;
        }
        after = c["pageInfo"]["endCursor"].clone();
    }
}

async fn a_status_pages_by_confidence_or_age(engine: Engine) {
    // A clock a minute further back for each suggestion, so ages differ.
    let (minutes, clock) = movable_clock();
    let app = TestApp::on(engine)
        .with_vocabulary()
        .with_clock(clock)
        .build()
        .await;
    let v = app.vocabulary();
    let bot = app.as_machine("bot");
    // 30 suggestions: confidences out of key order, three without one, the
    // youngest first in key order.
    for i in 0..30u32 {
        minutes.store(60 * i64::from(100 - i), Ordering::SeqCst);
        let confidence = if i % 10 == 3 {
            Value::Null
        } else {
            json!(f64::from((i * 7) % 30) / 30.0)
        };
        bot.query(
            SUGGEST,
            json!({"i": {"portalId": v.p, "ddbId": format!("s{i:02}"), "keywordId": v.k1, "childCategoryId": v.c1, "confidence": confidence}}),
        )
        .await;
    }
    let by_confidence = all(&bot, &v.p, "AUTOSUGGESTED", "CONFIDENCE").await;
    assert_eq!(by_confidence.len(), 30);
    let rank = |c: &Option<f64>| c.unwrap_or(-1.0);
    for w in by_confidence.windows(2) {
        assert!(
            rank(&w[0].1) > rank(&w[1].1) || (rank(&w[0].1) == rank(&w[1].1) && w[0].0 < w[1].0),
            "{w:?}"
        );
    }
    assert!(by_confidence[27..].iter().all(|r| r.1.is_none()));
    let oldest = all(&bot, &v.p, "AUTOSUGGESTED", "OLDEST").await;
    assert_eq!(oldest.len(), 30);
    assert_eq!(oldest[0].0, "s29");
    assert_eq!(oldest[29].0, "s00");
    assert!(oldest.windows(2).all(|w| w[0].2 <= w[1].2));
    // The default: key order.
    let by_key = all(&bot, &v.p, "AUTOSUGGESTED", "OBJECT").await;
    assert_eq!(by_key[0].0, "s00");

    // Accepted ones leave the status's orders and join ACCEPTED's.
    let erik = app.as_editor("erik");
    let top: Vec<String> = by_confidence[..3].iter().map(|r| r.0.clone()).collect();
    for ddb in &top {
        transition(
            &erik,
            &key(&v.p, ddb, &v.k1, "bot"),
            "AUTOSUGGESTED",
            "ACCEPTED",
        )
        .await;
    }
    let left = all(&bot, &v.p, "AUTOSUGGESTED", "CONFIDENCE").await;
    assert_eq!(left.len(), 27);
    assert_eq!(left[..], by_confidence[3..]);
    let accepted: Vec<String> = all(&bot, &v.p, "ACCEPTED", "CONFIDENCE")
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(accepted, top);
    assert_eq!(all(&bot, &v.p, "ACCEPTED", "OLDEST").await.len(), 3);

    // Confidence and age need a status, and take no creator.
    for vars in [
        json!({"p": v.p, "o": "CONFIDENCE"}),
        json!({"p": v.p, "s": "AUTOSUGGESTED", "c": "bot", "o": "OLDEST"}),
    ] {
        assert_eq!(bot.query_err(LIST, vars).await, "BAD_USER_INPUT");
    }
    // A cursor of one order is not one of another.
    let d = bot
        .query(
            LIST,
            json!({"p": v.p, "s": "AUTOSUGGESTED", "o": "CONFIDENCE"}),
        )
        .await;
    let cursor = d["assignments"]["pageInfo"]["endCursor"].clone();
    assert_eq!(
        bot.query_err(
            LIST,
            json!({"p": v.p, "s": "AUTOSUGGESTED", "o": "OLDEST", "a": cursor})
        )
        .await,
        "BAD_CURSOR"
    );
    check_views(&app.store, &v.p).await;
}

both_engines!(a_status_pages_by_confidence_or_age);
