//! Queries refused by their weight, and answers cut off by their size, before
//! they cost the server what the probes' did.

use serde_json::json;

use super::{code, refused, start};
use crate::support::run;

/// `Category.children` → `parent` → `children`, aliased: a 320-byte
/// anonymous query answered 35 MB and cost ~500 MB, since neither field
/// had a weight. Now every list field weighs the items it may return, so
/// such a query is refused before it runs, with a message naming the limit.
#[test]
fn aliased_category_cycles_are_refused_by_their_weight() {
    run(async {
        let srv = start(&[]).await;
        srv.case("children -> parent -> children, aliased", async {
            let cycle = "children{parent{children{parent{children{id label}}}}}";
            let aliases: Vec<String> = (0..20).map(|i| format!("a{i}:{cycle}")).collect();
            let q = format!("{{portals{{{}}}}}", aliases.join(" "));
            assert!(q.len() < 1200);
            let (_, r) = srv.gql(&q, None).await;
            refused(&r, "--max-complexity");
        })
        .await;
        // An ordinary tree query still runs.
        let (_, r) = srv
            .gql(
                "{ portals { id label children { id label children { id label } } } }",
                None,
            )
            .await;
        assert!(r["errors"].is_null(), "{r}");
        assert!(!r["data"]["portals"].as_array().unwrap().is_empty());
    });
}

/// The complexity expressions multiplied `first` unchecked: nested
/// `first: 2147483647` wrapped to a small number in a release build (and
/// panicked in a debug one), which switched every weight off. The weights
/// saturate now: such a query is refused by its weight.
#[test]
fn huge_first_arguments_do_not_wrap_the_weight() {
    run(async {
        let srv = start(&[]).await;
        srv.case("nested first: i32::MAX", async {
            let big = i32::MAX;
            let q = format!(
                "{{ portals {{ keywords(first: {big}) {{ edges {{ node {{ assignments(first: {big}) {{ edges {{ node {{ keyword {{ assignments(first: {big}) {{ edges {{ node {{ ddbId }} }} }} }} }} }} }} }} }} }} }} }}"
            );
            let (_, r) = srv.gql(&q, None).await;
            refused(&r, "--max-complexity");
        })
        .await;
    });
}

/// `creators` and `objectAssignments` carried no weight: 1,700 aliases of
/// them took 1.35 s each and 946 MB. They weigh what they may return now.
#[test]
fn creators_and_object_assignments_are_weighed() {
    run(async {
        let srv = start(&[]).await;
        srv.case("aliased creators", async {
            let q: Vec<String> = (0..40)
                .map(|i| format!("c{i}: creators(portalId: \"c-wr\", status: AUTOSUGGESTED)"))
                .collect();
            let (_, r) = srv.gql(&format!("{{ {} }}", q.join(" ")), None).await;
            refused(&r, "--max-complexity");
        })
        .await;
        srv.case("aliased objectAssignments", async {
            let q: Vec<String> = (0..500)
                .map(|i| {
                    format!("o{i}: objectAssignments(ddbId: \"x\") {{ ddbId keyword {{ label }} }}")
                })
                .collect();
            let (_, r) = srv.gql(&format!("{{ {} }}", q.join(" ")), None).await;
            refused(&r, "--max-complexity");
        })
        .await;
        let (_, r) = srv
            .gql(
                "{ creators(portalId: \"c-wr\", status: AUTOSUGGESTED) }",
                None,
            )
            .await;
        assert_eq!(r["data"]["creators"], json!(["demo-machine"]), "{r}");
    });
}

/// An answer that grows past `--max-response-bytes` stops while it is
/// being built and answers one RESPONSE_TOO_LARGE error naming the setting;
/// the server's memory stays bounded and it goes on serving.
#[test]
fn an_answer_past_the_response_budget_ends_with_a_typed_error() {
    run(async {
        let srv = start(&["--max-response-bytes", "8000"]).await;
        srv.case("keywords of four portals past 8 KB", async {
            let portal = |alias: &str, id: &str| {
                format!("{alias}: category(id: \"{id}\") {{ keywords(first: 100, includeDescendants: true) {{ edges {{ node {{ id label synonyms }} }} }} }}")
            };
            let q = format!(
                "{{ {} {} {} {} }}",
                portal("a", "c-wr"),
                portal("b", "c-kol"),
                portal("c", "c-sport"),
                portal("d", "c-musik")
            );
            let (status, r) = srv.gql(&q, None).await;
            assert_eq!(status, 200, "{r}");
            assert_eq!(code(&r), "RESPONSE_TOO_LARGE", "{r}");
            assert_eq!(r["errors"].as_array().unwrap().len(), 1, "{r}");
            assert!(r["data"].is_null(), "{r}");
            let message = r["errors"][0]["message"].as_str().unwrap();
            assert!(message.contains("--max-response-bytes"), "{message}");
        })
        .await;
        let (_, r) = srv.gql("{ portals { id label } }", None).await;
        assert!(r["errors"].is_null(), "{r}");
    });
}
