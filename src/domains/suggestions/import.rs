//! `kartei import-suggestions --wiki WIKI FILE`: one dataset from one NDJSON
//! file (gzip detected by its magic bytes, `-` for stdin). The file is streamed
//! in chunks of [`CHUNK`] lines, `concurrency` chunks in flight, each written
//! as bulk writes into the new dataset, which nobody reads yet. At the end the
//! dataset is published (one write switches readers to it) unless more than
//! `max_errors` lines were bad, the input failed or the store did: then it is
//! marked FAILED and its rows are removed. A killed import leaves an IMPORTING
//! dataset whose heartbeat stops; the next import or `kartei suggestions
//! purge` removes it. Memory stays bounded by the chunks in flight.

use std::io::{BufRead, Read};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Deserialize;

use super::model::Suggestion;
use super::service::{Record, Suggestions};
use crate::kernel::error::ApiError;
use crate::kernel::progress::Progress;
use crate::kernel::roles::Principal;

/// Lines per bulk write.
const CHUNK: usize = 1_000;

/// The input, gunzipped when it starts with gzip's magic bytes.
pub fn open_input(mut input: Box<dyn BufRead + Send>) -> std::io::Result<Box<dyn BufRead + Send>> {
    let head = input.fill_buf()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(std::io::BufReader::new(
            flate2::bufread::MultiGzDecoder::new(input),
        )))
    } else {
        Ok(input)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuggestionLine {
    #[serde(default)]
    row: Option<String>,
    page_id: i64,
    image: String,
    origin_wiki: String,
    confidence: f64,
    #[serde(default)]
    found_on: Vec<String>,
    #[serde(default)]
    kind: Vec<String>,
    #[serde(default)]
    page_rev: Option<i64>,
    #[serde(default)]
    section_heading: Option<String>,
    #[serde(default)]
    section_index: Option<i64>,
    #[serde(default)]
    page_qid: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TitleLine {
    #[allow(dead_code)]
    row: String,
    title: String,
    page_id: i64,
    #[serde(default)]
    page_rev: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceOfLine {
    #[allow(dead_code)]
    row: String,
    page_id: i64,
    #[serde(default)]
    page_rev: Option<i64>,
    #[serde(default)]
    instance_of: Vec<String>,
}

fn int(what: &str, v: i64) -> Result<i32, String> {
    i32::try_from(v)
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| format!("{what} {v} is not a page id (0 to 2^31-1)"))
}

fn opt_int(what: &str, v: Option<i64>) -> Result<Option<i32>, String> {
    v.map(|v| int(what, v)).transpose()
}

fn text(what: &str, s: &str) -> Result<(), String> {
    if s.trim().is_empty() || s.len() > 1_000 {
        Err(format!("{what} must have 1 to 1000 bytes"))
    } else {
        Ok(())
    }
}

/// A text that may be empty, within the same 1000 bytes: every string a row
/// carries is bounded, or one 1 MiB line stores a 1 MiB field.
fn bounded<'a>(what: &str, texts: impl IntoIterator<Item = &'a String>) -> Result<(), String> {
    if texts.into_iter().any(|t| t.len() > 1_000) {
        Err(format!("{what} may have at most 1000 bytes"))
    } else {
        Ok(())
    }
}

/// Sorted and without repeats (the public schema's sets).
fn set(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// One line as a record, or why not.
pub fn parse(line: &str) -> Result<Record, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let kind = match value.get("row") {
        None | Some(serde_json::Value::Null) => "suggestion".to_owned(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(_) => return Err("\"row\" must be a string".into()),
    };
    drop(value);
    let bad = |e: serde_json::Error| format!("invalid {kind} row: {e}");
    match kind.as_str() {
        "suggestion" => {
            let l: SuggestionLine = serde_json::from_str(line).map_err(bad)?;
            let _ = l.row;
            text("image", &l.image)?;
            text("origin_wiki", &l.origin_wiki)?;
            if !(0.0..=1.0).contains(&l.confidence) {
                return Err(format!(
                    "confidence must be between 0 and 1, got {}",
                    l.confidence
                ));
            }
            if l.found_on.len() + l.kind.len() > 200 {
                return Err("found_on and kind hold at most 200 items".into());
            }
            bounded(
                "an item of found_on or kind",
                l.found_on.iter().chain(&l.kind),
            )?;
            bounded("section_heading", &l.section_heading)?;
            bounded("page_qid", &l.page_qid)?;
            Ok(Record::Suggestion(Suggestion {
                wiki: String::new(),
                page_id: int("page_id", l.page_id)?,
                id: String::new(),
                image: l.image,
                origin_wiki: l.origin_wiki,
                confidence: l.confidence,
                found_on: set(l.found_on),
                kind: set(l.kind),
                page_rev: opt_int("page_rev", l.page_rev)?,
                section_heading: l.section_heading,
                section_index: l
                    .section_index
                    .map(|i| {
                        i32::try_from(i).map_err(|_| format!("section_index {i} is too large"))
                    })
                    .transpose()?,
                page_qid: l.page_qid,
            }))
        }
        "title" => {
            let l: TitleLine = serde_json::from_str(line).map_err(bad)?;
            text("title", &l.title)?;
            Ok(Record::Title {
                title: l.title,
                page_id: int("page_id", l.page_id)?,
                page_rev: opt_int("page_rev", l.page_rev)?,
            })
        }
        "instanceof" => {
            let l: InstanceOfLine = serde_json::from_str(line).map_err(bad)?;
            if l.instance_of.len() > 200 {
                return Err("instance_of holds at most 200 items".into());
            }
            bounded("an item of instance_of", &l.instance_of)?;
            Ok(Record::InstanceOf {
                page_id: int("page_id", l.page_id)?,
                page_rev: opt_int("page_rev", l.page_rev)?,
                instance_of: set(l.instance_of),
            })
        }
        other => Err(format!(
            "unknown row kind {other:?} (suggestion, title or instanceof)"
        )),
    }
}

#[derive(Debug, Default)]
pub struct ImportReport {
    pub dataset: Option<String>,
    pub published: bool,
    pub rows: usize,
    /// (line number, reason); line 0 for the input or the store failing.
    pub errors: crate::kernel::ndjson::BadLines,
    pub purged: Vec<String>,
    pub elapsed: Duration,
}

impl ImportReport {
    pub fn summary(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-6);
        format!(
            "dataset {} {}: {} rows, {} bad lines, {:.1} s, {:.0} rows/s",
            self.dataset.as_deref().unwrap_or("-"),
            if self.published {
                "published"
            } else {
                "NOT published"
            },
            self.rows,
            self.errors.len(),
            secs,
            self.rows as f64 / secs
        )
    }
}

pub struct ImportOptions {
    pub wiki: String,
    pub source: Option<String>,
    pub max_errors: usize,
    pub keep: usize,
    pub concurrency: usize,
    /// Bytes of input, for the progress bar (0 if unknown).
    pub size: usize,
}

/// Imports `input` as a new dataset of `opts.wiki`, as `who` (machine or admin).
pub async fn import(
    service: &Suggestions,
    who: &Principal,
    input: impl Read + Send + 'static,
    opts: ImportOptions,
) -> Result<ImportReport, ApiError> {
    let started = Instant::now();
    let ds = service.begin(who, &opts.wiki, opts.source.clone()).await?;
    let mut report = ImportReport {
        dataset: Some(ds.id.clone()),
        ..Default::default()
    };
    // The heartbeat tells a later import that this one is alive.
    let beat = {
        let (service, ds) = (service.clone(), ds.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(super::service::HEARTBEAT_SECS)).await;
                if let Err(e) = service.heartbeat(&ds).await {
                    tracing::warn!(error = %e.message(), "suggestions import heartbeat failed");
                }
            }
        })
    };
    let progress = Progress::start(opts.size.max(1));
    let mut read_error = None;
    let reader = std::io::BufReader::new(input);
    let lines = match open_input(Box::new(reader)) {
        Ok(r) => Some(r),
        Err(e) => {
            read_error = Some(e);
            None
        }
    };
    let mut store_error = None;
    if let Some(lines) = lines {
        let lines = crate::kernel::ndjson::lines_until_error(lines, &mut read_error);
        let chunks_iter = crate::kernel::ndjson::chunks(lines, &progress, CHUNK, parse);
        let ds_ref = &ds;
        let mut writes = futures::stream::iter(chunks_iter)
            .map(|(records, bad)| async move {
                let records: Vec<Record> = records.into_iter().map(|(_, r)| r).collect();
                let n = records.len();
                let r = if records.is_empty() {
                    Ok(0)
                } else {
                    service.write(ds_ref, records).await
                };
                (n, r, bad)
            })
            .buffer_unordered(opts.concurrency.clamp(1, 64));
        while let Some((n, r, bad)) = writes.next().await {
            report.errors.extend(bad);
            match r {
                Ok(_) => report.rows += n,
                Err(e) => {
                    store_error = Some(e);
                    break;
                }
            }
            // The import has failed already: reading on would only collect
            // more reasons (a file of bad lines holds millions).
            if report.errors.len() > opts.max_errors {
                break;
            }
        }
    }
    progress.finish();
    beat.abort();
    if let Some(e) = &read_error {
        report.errors.push((0, format!("cannot read further: {e}")));
    }
    report.errors.sort();
    crate::kernel::metrics::suggestions_imported(report.rows, report.errors.len());
    let rows = report.rows as i64;
    let bad = report.errors.len() as i64;
    if let Some(e) = store_error {
        report
            .errors
            .push((0, format!("the store failed: {}", e.message())));
        let _ = service.fail(&ds, rows, bad).await;
    } else if read_error.is_some() || report.errors.len() > opts.max_errors {
        service.fail(&ds, rows, bad).await?;
    } else {
        service.publish(&ds, rows, bad, opts.keep).await?;
        report.published = true;
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_each_kind_parse_and_bad_ones_say_why() {
        let s = r#"{"page_id": 7, "image": "A.jpg", "origin_wiki": "commonswiki", "confidence": 0.9, "found_on": ["dewiki", "enwiki", "dewiki"], "kind": ["istype-lead-image"], "page_rev": 3, "section_heading": null, "section_index": null, "page_qid": "Q1"}"#;
        match parse(s).unwrap() {
            Record::Suggestion(x) => {
                assert_eq!(x.page_id, 7);
                assert_eq!(x.found_on, ["dewiki", "enwiki"]);
            }
            _ => panic!("a suggestion"),
        }
        assert!(matches!(
            parse(r#"{"row": "title", "title": "Berlin", "page_id": 7, "page_rev": 3}"#),
            Ok(Record::Title { .. })
        ));
        assert!(matches!(
            parse(r#"{"row": "instanceof", "page_id": 7, "page_rev": 3, "instance_of": ["Q5"]}"#),
            Ok(Record::InstanceOf { .. })
        ));
        for (line, why) in [
            ("{", "invalid JSON"),
            (r#"{"row": "x"}"#, "unknown row kind"),
            (
                r#"{"page_id": -1, "image": "A", "origin_wiki": "w", "confidence": 0.5}"#,
                "page id",
            ),
            (
                r#"{"page_id": 1, "image": "A", "origin_wiki": "w", "confidence": 1.5}"#,
                "confidence",
            ),
            (
                r#"{"page_id": 1, "image": "", "origin_wiki": "w", "confidence": 0.5}"#,
                "image",
            ),
            (
                r#"{"page_id": 1, "image": "A", "origin_wiki": "w", "confidence": 0.5, "extra": 1}"#,
                "unknown field",
            ),
            (r#"{"row": "title", "page_id": 1}"#, "missing field"),
        ] {
            let e = parse(line).unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
        }
        // Every string a row carries is bounded, not only the three texts.
        let long = "x".repeat(1001);
        for (line, why) in [
            (
                format!(
                    r#"{{"page_id": 1, "image": "A", "origin_wiki": "w", "confidence": 0.5, "section_heading": "{long}"}}"#
                ),
                "section_heading",
            ),
            (
                format!(
                    r#"{{"page_id": 1, "image": "A", "origin_wiki": "w", "confidence": 0.5, "found_on": ["{long}"]}}"#
                ),
                "found_on",
            ),
            (
                format!(r#"{{"row": "instanceof", "page_id": 7, "instance_of": ["{long}"]}}"#),
                "instance_of",
            ),
        ] {
            let e = parse(&line).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn gzip_is_recognised_by_its_magic_bytes() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"line one\n").unwrap();
        let bytes = gz.finish().unwrap();
        let mut out = String::new();
        open_input(Box::new(std::io::Cursor::new(bytes)))
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "line one\n");
        let mut plain = String::new();
        open_input(Box::new(std::io::Cursor::new(b"plain\n".to_vec())))
            .unwrap()
            .read_to_string(&mut plain)
            .unwrap();
        assert_eq!(plain, "plain\n");
    }

    use proptest::prelude::*;
    use serde_json::json;

    /// JSON objects of the three kinds with fields present, missing or wrong,
    /// and anything at all.
    fn line() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just(json!(null)),
            ".{0,8}".prop_map(|s| json!(s)),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            prop::collection::vec(".{0,4}", 0..3).prop_map(|v| json!(v)),
            Just(json!(true)),
        ];
        let field = prop::sample::select(vec![
            "row",
            "page_id",
            "image",
            "origin_wiki",
            "confidence",
            "found_on",
            "kind",
            "page_rev",
            "section_heading",
            "section_index",
            "page_qid",
            "title",
            "instance_of",
        ]);
        let object = prop::collection::vec((field, value), 0..8).prop_map(|fields| {
            let mut doc = serde_json::Map::new();
            for (k, v) in fields {
                doc.insert(k.into(), v);
            }
            serde_json::Value::Object(doc).to_string()
        });
        prop_oneof![3 => object, 1 => any::<String>(), 1 => "[{}\\[\\]\":, a-z0-9.-]{0,30}"]
    }

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        /// Any line is a record within the schema's bounds, or a reason.
        #[test]
        fn any_line_is_a_bounded_record_or_a_reason(l in line()) {
            match parse(&l) {
                Ok(Record::Suggestion(s)) => {
                    prop_assert!(s.page_id >= 0 && (0.0..=1.0).contains(&s.confidence));
                    prop_assert!(!s.image.trim().is_empty() && s.image.len() <= 1_000);
                    prop_assert!(s.found_on.len() + s.kind.len() <= 200);
                    prop_assert!(s.found_on.windows(2).all(|w| w[0] < w[1]));
                    prop_assert!(s.page_rev.is_none_or(|r| r >= 0));
                }
                Ok(Record::Title { title, page_id, .. }) => {
                    prop_assert!(page_id >= 0 && !title.trim().is_empty());
                }
                Ok(Record::InstanceOf { page_id, instance_of, .. }) => {
                    prop_assert!(page_id >= 0 && instance_of.len() <= 200);
                }
                Err(reason) => prop_assert!(!reason.is_empty()),
            }
        }

        #[test]
        fn a_suggestion_reads_back_as_written(
            page_id in 0i64..=i64::from(i32::MAX),
            image in "[A-Za-z0-9_.]{1,20}",
            confidence in 0.0f64..=1.0,
            found_on in prop::collection::vec("[a-z]{2,8}wiki", 0..5),
            page_rev in prop::option::of(0i64..=i64::from(i32::MAX)),
            section_index in prop::option::of(any::<i32>()),
        ) {
            let l = json!({
                "page_id": page_id, "image": image, "origin_wiki": "commonswiki",
                "confidence": confidence, "found_on": found_on, "page_rev": page_rev,
                "section_index": section_index,
            })
            .to_string();
            let Ok(Record::Suggestion(s)) = parse(&l) else {
                return Err(TestCaseError::fail(format!("{l} is a suggestion")));
            };
            let mut sorted = found_on;
            sorted.sort();
            sorted.dedup();
            prop_assert_eq!(i64::from(s.page_id), page_id);
            prop_assert_eq!(s.image, image);
            prop_assert_eq!(s.confidence, confidence);
            prop_assert_eq!(s.found_on, sorted);
            prop_assert_eq!(s.page_rev.map(i64::from), page_rev);
            prop_assert_eq!(s.section_index, section_index);
        }

        /// Page ids and revisions past 2^31-1, negative ones, and numbers past
        /// i64 are refused, never wrapped.
        #[test]
        fn page_ids_out_of_range_are_refused(
            id in prop_oneof![
                (i64::from(i32::MAX) + 1..=i64::MAX).prop_map(|n| n.to_string()),
                (i64::MIN..0).prop_map(|n| n.to_string()),
                Just("99999999999999999999".to_owned()),
                "[1-9][0-9]{19,40}",
            ],
            kind in 0usize..3,
        ) {
            let l = match kind {
                0 => format!(r#"{{"page_id":{id},"image":"A","origin_wiki":"w","confidence":0.5}}"#),
                1 => format!(r#"{{"row":"title","title":"T","page_id":{id}}}"#),
                _ => format!(r#"{{"row":"instanceof","page_id":1,"page_rev":{id}}}"#),
            };
            prop_assert!(parse(&l).is_err(), "{l}");
        }
    }
}
