//! `kartei import-objects FILE`: what the catalogue says of its objects, as
//! NDJSON, one `{"ddbId", "title", "institution"?, "imageUrl"?}` per line.
//! Streamed in chunks of [`CHUNK`] lines, a few chunks at once; a bad line is
//! reported with its number and skipped, nothing of it written. An object
//! imported again is updated where the line differs and left alone where
//! it does not, so the same file can be imported again (and a killed import
//! run again) to the same end. A new image URL is registered as a binary
//! under the ddb id (the crawler of a running server fetches it); one
//! registered before is not registered again.

use std::io::BufRead;

use serde::Deserialize;

use super::service::{Imported, ObjectInput, Objects};
use crate::domains::binaries::service::Binaries;
use crate::kernel::chunked::{self, Input, Row};
use crate::kernel::error::ApiError;
use crate::kernel::roles::Principal;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Line {
    ddb_id: String,
    title: String,
    #[serde(default)]
    institution: Option<String>,
    #[serde(default)]
    image_url: Option<String>,
}

/// One line as an object, or why not (the rules of the service are checked
/// when it is imported).
pub fn parse(line: &str) -> Result<ObjectInput, String> {
    let l: Line = serde_json::from_str(line).map_err(|e| format!("invalid record: {e}"))?;
    Ok(ObjectInput {
        ddb_id: l.ddb_id,
        title: l.title,
        institution: l.institution,
        image_url: l.image_url,
    })
}

crate::import_report!(ImportReport {
    created: "objects created",
    updated: "updated",
    unchanged: "unchanged",
});

/// Lines per call of [`Objects::import_many`].
const CHUNK: usize = 500;

/// Imports `input` as `who`,
/// its `concurrency` chunks at a time, registering images with `binaries`.
pub async fn import(
    objects: &Objects,
    binaries: &Binaries,
    who: &Principal,
    input: Input<impl BufRead>,
) -> std::io::Result<ImportReport> {
    let (mut created, mut updated, mut unchanged) = (0, 0, 0);
    let ended = chunked::import(
        input,
        CHUNK,
        parse,
        |inputs| objects.import_many(who, binaries, inputs),
        |r| match r {
            Ok(Imported::Created) => {
                created += 1;
                Row::Counted
            }
            Ok(Imported::Updated) => {
                updated += 1;
                Row::Counted
            }
            Ok(Imported::Unchanged) => {
                unchanged += 1;
                Row::Counted
            }
            Err(e @ ApiError::BadUserInput(_)) => Row::Bad(e),
            // The store failed registering an image.
            Err(e) => Row::Stop(e),
        },
    )
    .await;
    Ok(ImportReport {
        created,
        updated,
        unchanged,
        errors: ended.errors,
        stopped: ended.stopped,
        elapsed: ended.elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_an_object_or_an_invalid_record() {
        let o = parse(r#"{"ddbId":"D1","title":"T","institution":"I","imageUrl":"https://e.org/a.jpg"}"#)
            .unwrap();
        assert_eq!(o.ddb_id, "D1");
        assert_eq!(o.institution.as_deref(), Some("I"));
        assert_eq!(o.image_url.as_deref(), Some("https://e.org/a.jpg"));
        let o = parse(r#"{"ddbId":"D1","title":"T"}"#).unwrap();
        assert_eq!((o.institution, o.image_url), (None, None));
        for bad in [
            r#"{"ddbId":"D1"}"#,
            r#"{"title":"T"}"#,
            r#"{"ddbId":"D1","title":"T","colour":"red"}"#,
            r#"{"ddbId":1,"title":"T"}"#,
            "not json",
        ] {
            assert!(parse(bad).unwrap_err().starts_with("invalid record: "), "{bad}");
        }
    }
}
