//! The SKOS batch commands: `import-skos` and `export-skos` (the mapping
//! is the themes domain's, `domains::themes::skos`).

use std::io::Read;
use std::path::Path;

use oxrdfio::RdfFormat;

use super::{Console, Input, Refused, failed};
use crate::domains::themes::service::Themes;
use crate::domains::themes::skos::{self, format_of};
use crate::store::DynStore;

/// What an import may read.
pub(super) struct Limits {
    pub max_category_depth: usize,
    pub max_triples: usize,
    pub max_bytes: u64,
}

/// The RDF format a SKOS job reads or writes: as asked, else by the file's
/// extension, else Turtle.
fn format(asked: Option<&str>, path: Option<&Path>) -> anyhow::Result<RdfFormat> {
    match asked {
        Some(f) => {
            format_of(f).ok_or_else(|| Refused(format!("format {f:?}: ttl, rdf or jsonld")).into())
        }
        None => Ok(path
            .and_then(|p| p.extension())
            .and_then(|e| format_of(&e.to_string_lossy()))
            .unwrap_or(RdfFormat::Turtle)),
    }
}

/// `import-skos`: errors as `FILE: triple N: reason` (a syntax error as
/// `FILE: reason`, naming its line), exit 1 on any.
pub(super) async fn import(
    store: DynStore,
    input: Input,
    read: Box<dyn Read + Send>,
    asked: Option<&str>,
    concurrency: usize,
    limits: Limits,
    console: &mut Console,
) -> anyhow::Result<u8> {
    let format = format(asked, input.path.as_deref())?;
    let mut bytes = Vec::new();
    read.take(limits.max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limits.max_bytes {
        return Err(Refused(format!(
            "{} is larger than --max-skos-bytes ({} bytes)",
            input.shown, limits.max_bytes
        ))
        .into());
    }
    let themes = Themes::new(store).with_max_category_depth(limits.max_category_depth);
    let report = skos::import(&themes, &bytes, format, concurrency, limits.max_triples).await;
    for (n, msg) in report.errors.iter() {
        console.err(if *n == 0 {
            format!("{}: {msg}", input.shown)
        } else {
            format!("{}: triple {n}: {msg}", input.shown)
        });
    }
    if report.errors.dropped() > 0 {
        console.err(format!("… and {} more errors", report.errors.dropped()));
    }
    if report.records() == 0 && !report.errors.is_empty() {
        console.err(format!("{}: nothing was imported", input.shown));
    } else {
        console.err(report.summary());
    }
    Ok(u8::from(!report.errors.is_empty()))
}

/// `export-skos`: the document on stdout.
pub(super) async fn export(
    store: DynStore,
    portal: &str,
    asked: &str,
    base: &str,
    license: Option<&str>,
    console: &mut Console,
) -> anyhow::Result<u8> {
    let format = format(Some(asked), None)?;
    let iris = skos::export::Iris {
        base: base.trim_end_matches('/'),
        license,
    };
    let doc = skos::export(&Themes::new(store), &iris, portal, format)
        .await
        .map_err(failed)?;
    for line in String::from_utf8_lossy(&doc).lines() {
        console.out(line);
    }
    Ok(0)
}
