//! `kartei import-assignments FILE --creator NAME`: bulk machine suggestions as
//! NDJSON, one `{portalId, ddbId, keywordId, childCategoryId, confidence}` per
//! line. Each line goes through the same rules as `suggestAssignment` with the
//! machine role. The file is streamed (never held in memory) in chunks of
//! 1,000 lines, a bounded number of chunks in flight; each chunk is one bulk
//! insertion that never overwrites (`Assignments::suggest_many`). An
//! assignment that exists already is counted, not an error, so the same file
//! can be imported again, and a killed import can be run again to the same end.
//! The columns an export adds (`creator`, `status`, `assignmentType`,
//! `createdAt`, `modifiedAt`) are read and passed over, so an exported NDJSON
//! file imports again as new suggestions by `--creator`.

use std::io::BufRead;

use serde::Deserialize;

use super::service::{Assignments, SuggestInput, Suggester, VocabularyCache};
use crate::kernel::chunked::{self, Input, Row};
use crate::kernel::error::ApiError;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Line {
    portal_id: String,
    ddb_id: String,
    keyword_id: String,
    child_category_id: String,
    #[serde(default)]
    confidence: Option<f64>,
    // The columns an export (`GET /export/assignments`) adds: read and
    // passed over, so that an exported file imports again. An imported line
    // is always a new suggestion by `--creator`, whatever its status was.
    #[serde(default, rename = "creator")]
    _creator: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "status")]
    _status: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "assignmentType")]
    _assignment_type: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "createdAt")]
    _created_at: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "modifiedAt")]
    _modified_at: Option<serde::de::IgnoredAny>,
}

/// One line as a suggestion, or why not (the rules of `suggestAssignment`
/// are checked when it is imported).
pub fn parse(line: &str) -> Result<SuggestInput, String> {
    let l: Line = serde_json::from_str(line).map_err(|e| format!("invalid record: {e}"))?;
    Ok(SuggestInput {
        portal_id: l.portal_id,
        ddb_id: l.ddb_id,
        keyword_id: l.keyword_id,
        child_category_id: l.child_category_id,
        confidence: l.confidence,
    })
}

crate::import_report!(ImportReport {
    created: "assignments created",
    existing: "already present",
});

/// Lines per call of [`Assignments::suggest_many`].
const CHUNK: usize = 1_000;

/// Imports `input` as `creator`,
/// its `concurrency` chunks of [`CHUNK`] lines at a time.
pub async fn import(
    assignments: &Assignments,
    creator: &str,
    input: Input<impl BufRead>,
) -> std::io::Result<ImportReport> {
    let who = Suggester::machine(creator);
    let mut report = ImportReport::default();
    if let Err(e) = crate::kernel::check_id("creator", creator) {
        report.errors.push((0, e.message()));
        return Ok(report);
    }
    let vocabulary = VocabularyCache::default();
    let (who, vocabulary) = (&who, &vocabulary);
    let (mut created, mut existing) = (0, 0);
    let ended = chunked::import(
        input,
        CHUNK,
        parse,
        |inputs| assignments.suggest_many(who, inputs, vocabulary),
        |r| match r {
            Ok(_) => {
                created += 1;
                Row::Counted
            }
            Err(ApiError::Conflict { .. }) => {
                existing += 1;
                Row::Counted
            }
            Err(e) => Row::Bad(e),
        },
    )
    .await;
    report.created = created;
    report.existing = existing;
    report.errors = ended.errors;
    report.stopped = ended.stopped;
    report.elapsed = ended.elapsed;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const FIELDS: [&str; 5] = [
        "portalId",
        "ddbId",
        "keywordId",
        "childCategoryId",
        "confidence",
    ];

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        #[test]
        fn any_line_is_a_suggestion_or_an_invalid_record(l in prop_oneof![
            any::<String>(),
            "[{}\\[\\]\":, a-zA-Z0-9.]{0,40}",
            (prop::collection::vec((prop::sample::select(FIELDS.to_vec()), ".{0,6}"), 0..6))
                .prop_map(|f| json!(f.into_iter().collect::<std::collections::HashMap<_, _>>()).to_string()),
        ]) {
            if let Err(reason) = parse(&l) {
                prop_assert!(reason.starts_with("invalid record: "), "{reason}");
            }
        }

        #[test]
        fn a_suggestion_reads_back_as_written(
            ids in prop::collection::vec(".{0,12}", 4),
            confidence in prop::option::of(prop_oneof![0.0f64..=1.0, any::<f64>().prop_filter("finite", |c| c.is_finite())]),
        ) {
            let l = json!({
                "portalId": ids[0], "ddbId": ids[1], "keywordId": ids[2],
                "childCategoryId": ids[3], "confidence": confidence,
            })
            .to_string();
            let s = parse(&l).unwrap();
            prop_assert_eq!(
                [s.portal_id, s.ddb_id, s.keyword_id, s.child_category_id].to_vec(),
                ids
            );
            prop_assert_eq!(s.confidence, confidence);
        }

        /// A line missing a field, with one more, or with a number no f64
        /// holds is refused whole.
        #[test]
        fn a_line_of_the_wrong_shape_is_refused(
            drop in 0usize..4,
            extra in "[a-z]{1,8}",
            huge in "[1-9][0-9]{0,3}e[4-9][0-9]{2}",
        ) {
            let mut doc = json!({"portalId": "p", "ddbId": "d", "keywordId": "k", "childCategoryId": "c"});
            doc.as_object_mut().unwrap().remove(FIELDS[drop]);
            prop_assert!(parse(&doc.to_string()).unwrap_err().contains("missing field"));
            let mut doc = json!({"portalId": "p", "ddbId": "d", "keywordId": "k", "childCategoryId": "c"});
            prop_assume!(!FIELDS.contains(&extra.as_str()));
            doc.as_object_mut().unwrap().insert(extra, json!(1));
            prop_assert!(parse(&doc.to_string()).unwrap_err().contains("unknown field"));
            let over = format!(r#"{{"portalId":"p","ddbId":"d","keywordId":"k","childCategoryId":"c","confidence":{huge}}}"#);
            prop_assert!(parse(&over).is_err(), "{over}");
        }
    }
}
