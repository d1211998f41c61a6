//! `GET /export/assignments?portalId=…&status=…&creator=…&keywordId=…&format=csv|ndjson`:
//! a portal's assignments by the queue's filter (`status` may list several,
//! comma-separated; `childCategoryId`, `minConfidence` and `maxConfidence`
//! narrow as the queue does), streamed page by page as CSV or NDJSON, for
//! editors. The columns begin with the five the importer
//! (`kartei import-assignments`) reads, so an NDJSON export imports again.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{FromRef, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::api::caller::Caller;
use crate::domains::assignments::model::{Assignment, AssignmentStatus};
use crate::domains::assignments::service::{Assignments, ExportFilter};
use crate::kernel::error::ApiError;
use crate::kernel::roles::Role;

/// What the export route needs: the service and the places for exports
/// running at once (`--max-exports`; one more is refused, not queued).
#[derive(Clone)]
pub struct Exports {
    assignments: Assignments,
    running: Arc<Semaphore>,
    max: usize,
}

impl Exports {
    pub fn new(assignments: Assignments, max_running: usize) -> Self {
        Exports {
            assignments,
            running: Arc::new(Semaphore::new(max_running)),
            max: max_running,
        }
    }
}

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Exports: FromRef<S>,
{
    Router::new().route("/export/assignments", get(export))
}

/// The columns, in order: the importer's five, then what the export adds.
const COLUMNS: [&str; 10] = [
    "portalId",
    "ddbId",
    "keywordId",
    "childCategoryId",
    "confidence",
    "creator",
    "status",
    "assignmentType",
    "createdAt",
    "modifiedAt",
];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Format {
    Csv,
    Ndjson,
}

/// One line of an NDJSON export (the fields in [`COLUMNS`]' order).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    portal_id: &'a str,
    ddb_id: &'a str,
    keyword_id: &'a str,
    child_category_id: &'a str,
    confidence: Option<f64>,
    creator: &'a str,
    status: &'static str,
    assignment_type: &'static str,
    created_at: &'a str,
    modified_at: &'a str,
}

impl<'a> Line<'a> {
    fn of(a: &'a Assignment) -> Self {
        Line {
            portal_id: &a.key.portal_id,
            ddb_id: &a.key.ddb_id,
            keyword_id: &a.key.keyword_id,
            child_category_id: &a.child_category_id,
            confidence: a.confidence,
            creator: &a.key.creator,
            status: a.status.as_str(),
            assignment_type: a.assignment_type.as_str(),
            created_at: &a.created_at,
            modified_at: &a.modified_at,
        }
    }

    fn csv(&self, out: &mut String) {
        let confidence = self.confidence.map(|c| c.to_string()).unwrap_or_default();
        let cells = [
            self.portal_id,
            self.ddb_id,
            self.keyword_id,
            self.child_category_id,
            &confidence,
            self.creator,
            self.status,
            self.assignment_type,
            self.created_at,
            self.modified_at,
        ];
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_cell(cell, out);
        }
        out.push_str("\r\n");
    }
}

/// One CSV cell (RFC 4180): quoted when it holds a comma, quote or line
/// break, quotes doubled. A text that a spreadsheet would run as a formula
/// (`=`, `+`, `-`, `@`, tab or carriage return first) gets a `'` before it
/// (OWASP's advice against CSV injection): ids are free text and may come
/// from any contributor. NDJSON keeps every value as stored.
fn csv_cell(cell: &str, out: &mut String) {
    let formula = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quoted = formula || cell.contains([',', '"', '\n', '\r']);
    if quoted {
        out.push('"');
    }
    if formula {
        out.push('\'');
    }
    for c in cell.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    if quoted {
        out.push('"');
    }
}

/// A page of assignments in `format`.
fn encode(rows: &[Assignment], format: Format) -> Bytes {
    let mut out = String::with_capacity(rows.len() * 200);
    for a in rows {
        let line = Line::of(a);
        match format {
            Format::Csv => line.csv(&mut out),
            Format::Ndjson => {
                // Serializing plain strings and a float cannot fail.
                out.push_str(&serde_json::to_string(&line).unwrap_or_default());
                out.push('\n');
            }
        }
    }
    Bytes::from(out)
}

/// The filter as the query string gives it; every parameter once, none unknown.
#[derive(Debug, PartialEq)]
struct Filter {
    rows: ExportFilter,
    format: Option<Format>,
}

fn filter(params: Vec<(String, String)>) -> Result<Filter, ApiError> {
    let mut seen: Vec<String> = Vec::new();
    let mut f = Filter {
        rows: ExportFilter::default(),
        format: None,
    };
    for (name, value) in params {
        if seen.contains(&name) {
            return Err(ApiError::bad_input(format!(
                "the parameter {name:?} is given twice; an export takes one of each"
            )));
        }
        match name.as_str() {
            "portalId" => f.rows.portal_id = value,
            "status" => {
                for s in value.split(',') {
                    let s = AssignmentStatus::parse(s).ok_or_else(|| {
                        ApiError::bad_input(format!(
                            "status {s:?} is not one of {}",
                            AssignmentStatus::ALL.map(|s| s.as_str()).join(", ")
                        ))
                    })?;
                    if !f.rows.statuses.contains(&s) {
                        f.rows.statuses.push(s);
                    }
                }
            }
            "keywordId" if value.is_empty() => {
                return Err(ApiError::bad_input(
                    "keywordId is empty; leave it out for every keyword",
                ));
            }
            "keywordId" => f.rows.keyword_id = Some(value),
            "childCategoryId" if value.is_empty() => {
                return Err(ApiError::bad_input(
                    "childCategoryId is empty; leave it out for every category",
                ));
            }
            "childCategoryId" => f.rows.child_category_id = Some(value),
            "minConfidence" => f.rows.min_confidence = Some(confidence(&name, &value)?),
            "maxConfidence" => f.rows.max_confidence = Some(confidence(&name, &value)?),
            "creator" if value.is_empty() => {
                return Err(ApiError::bad_input(
                    "creator is empty; leave it out for every creator",
                ));
            }
            "creator" => f.rows.creator = Some(value),
            "format" => {
                f.format = Some(match value.as_str() {
                    "csv" => Format::Csv,
                    "ndjson" => Format::Ndjson,
                    _ => {
                        return Err(ApiError::bad_input(format!(
                            "format {value:?} is not csv or ndjson"
                        )));
                    }
                })
            }
            _ => {
                return Err(ApiError::bad_input(format!(
                    "unknown parameter {name:?}: an export takes portalId, status, creator, keywordId, childCategoryId, minConfidence, maxConfidence and format"
                )));
            }
        }
        seen.push(name);
    }
    if f.rows.portal_id.is_empty() {
        return Err(ApiError::bad_input(
            "portalId is required: the portal to export",
        ));
    }
    Ok(f)
}

/// A confidence bound: a number from 0 to 1.
fn confidence(name: &str, value: &str) -> Result<f64, ApiError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|c| (0.0..=1.0).contains(c))
        .ok_or_else(|| ApiError::bad_input(format!("{name} {value:?} is not a number from 0 to 1")))
}

/// Without `format`: CSV when the client asks for `text/csv`, else NDJSON.
fn negotiated(headers: &HeaderMap) -> Format {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.contains("text/csv") {
        Format::Csv
    } else {
        Format::Ndjson
    }
}

/// A file name of the filter, in characters every browser keeps.
fn file_name(f: &ExportFilter, format: Format) -> String {
    let mut name = format!("assignments-{}", f.portal_id);
    for s in &f.statuses {
        name = format!("{name}-{}", s.as_str().to_lowercase());
    }
    for part in [&f.creator, &f.keyword_id].into_iter().flatten() {
        name = format!("{name}-{part}");
    }
    let name: String = name
        .chars()
        .take(120)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let ext = match format {
        Format::Csv => "csv",
        Format::Ndjson => "ndjson",
    };
    format!("{name}.{ext}")
}

/// Editors and admins: the portal's assignments that match, in the queue's
/// order, one page in memory at a time. A store failure after the first
/// bytes ends the answer without its last chunk, so a client sees a broken
/// transfer and never a short file taken for whole.
async fn export(
    State(x): State<Exports>,
    Caller(caller): Caller,
    headers: HeaderMap,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    caller.require(Role::Editor)?;
    let f = filter(params)?;
    let format = f.format.unwrap_or_else(|| negotiated(&headers));
    let running = x.running.clone().try_acquire_owned().map_err(|_| {
        let message = match x.max {
            0 => "exports are turned off on this server (--max-exports 0)".to_string(),
            n => {
                format!("{n} exports are running (--max-exports); try again when one has finished")
            }
        };
        ApiError::limit("TOO_MANY_EXPORTS", 429, message)
    })?;
    let disposition = format!("attachment; filename=\"{}\"", file_name(&f.rows, format));
    let portal = f.rows.portal_id.clone();
    let pages = x.assignments.export(f.rows).await?;
    let head = match format {
        Format::Csv => Some(Ok(Bytes::from(format!("{}\r\n", COLUMNS.join(","))))),
        Format::Ndjson => None,
    };
    let body = futures::stream::iter(head).chain(pages.map(move |page| {
        let _ = &running;
        match page {
            Ok(rows) => Ok(encode(&rows, format)),
            Err(e) => {
                tracing::warn!(portal = %portal, error = ?e, "an export stopped: the store failed");
                Err(std::io::Error::other("the store failed during an export"))
            }
        }
    }));
    let content_type = match format {
        Format::Csv => "text/csv; charset=utf-8",
        Format::Ndjson => "application/x-ndjson",
    };
    let mut response = Body::from_stream(body).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_cell_is_quoted_only_when_it_must_be() {
        let cell = |s: &str| {
            let mut out = String::new();
            csv_cell(s, &mut out);
            out
        };
        for (text, written) in [
            ("o1", "o1"),
            ("", ""),
            ("a,b", "\"a,b\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("two\nlines", "\"two\nlines\""),
            ("=HYPERLINK(\"x\")", "\"'=HYPERLINK(\"\"x\"\")\""),
            ("-1", "\"'-1\""),
            ("@sum", "\"'@sum\""),
            ("a=b", "a=b"),
        ] {
            assert_eq!(cell(text), written, "{text:?}");
        }
    }

    #[test]
    fn the_filter_takes_each_known_parameter_once() {
        let f = filter(params(&[
            ("portalId", "p1"),
            ("status", "ACCEPTED,SUGGESTED,ACCEPTED"),
            ("creator", "bot"),
            ("keywordId", "k1"),
            ("childCategoryId", "c1"),
            ("minConfidence", "0.25"),
            ("maxConfidence", "1"),
            ("format", "csv"),
        ]))
        .unwrap();
        assert_eq!(
            f,
            Filter {
                rows: ExportFilter {
                    portal_id: "p1".into(),
                    statuses: vec![AssignmentStatus::Accepted, AssignmentStatus::Suggested],
                    creator: Some("bot".into()),
                    keyword_id: Some("k1".into()),
                    child_category_id: Some("c1".into()),
                    min_confidence: Some(0.25),
                    max_confidence: Some(1.0),
                },
                format: Some(Format::Csv),
            }
        );
        for bad in [
            params(&[]),
            params(&[("status", "ACCEPTED")]),
            params(&[("portalId", "p1"), ("status", "accepted")]),
            params(&[("portalId", "p1"), ("status", "ACCEPTED,")]),
            params(&[("portalId", "p1"), ("keywordId", "")]),
            params(&[("portalId", "p1"), ("minConfidence", "1.5")]),
            params(&[("portalId", "p1"), ("maxConfidence", "NaN")]),
            params(&[("portalId", "p1"), ("childCategoryId", "")]),
            params(&[("portalId", "p1"), ("format", "xlsx")]),
            params(&[("portalId", "p1"), ("creator", "")]),
            params(&[("portalId", "p1"), ("portalId", "p2")]),
            params(&[("portalId", "p1"), ("limit", "5")]),
        ] {
            let e = filter(bad.clone()).unwrap_err();
            assert!(matches!(e, ApiError::BadUserInput(_)), "{bad:?}: {e:?}");
        }
    }

    #[test]
    fn the_file_name_keeps_plain_characters_only() {
        let f = ExportFilter {
            portal_id: "p 1/\"x\"".into(),
            statuses: vec![AssignmentStatus::Autosuggested],
            creator: Some("bot".into()),
            ..ExportFilter::default()
        };
        assert_eq!(
            file_name(&f, Format::Csv),
            "assignments-p_1__x_-autosuggested-bot.csv"
        );
    }
}
