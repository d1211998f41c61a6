//! The vocabulary as SKOS: each portal a `skos:ConceptScheme`, its
//! categories and keywords `skos:Concept`s (categories also
//! `vocnet:NonIndexingConcept`, as xTree marks concepts that are not
//! assigned themselves), in Turtle, RDF/XML or JSON-LD through the oxigraph
//! family's parsers and serializers.
//!
//! - `export.rs`: a portal's categories and keywords as triples (pure).
//! - `import.rs`: triples as the importer's entries, every structural error
//!   found before anything is written (pure).
//!
//! The mapping (both ways): `skos:prefLabel` (language [`LANGUAGE`]) the
//! label, `skos:altLabel` the synonyms, `skos:scopeNote` the note,
//! `skos:notation` a category's notation, `skos:broader`/`skos:narrower`
//! the hierarchy (a keyword's broader concepts are its categories),
//! `skos:topConceptOf`/`skos:hasTopConcept` the portal's children,
//! `skos:inScheme` the portal, `skos:exactMatch` the GND concept (an IRI
//! under `https://d-nb.info/gnd/`) or else the xTree concept,
//! `skos:relatedMatch` the related GND concepts, `dcterms:identifier` the
//! id, `dcterms:created` a keyword's creation time. A scheme also says
//! `dcterms:description`, `vann:preferredNamespaceUri` and, when the server
//! has one, `dcterms:license` (SkoHub's shapes ask for them; an import
//! reads past them). A keyword's GND entity type has no SKOS term: an import
//! keeps the stored one.

pub mod export;
pub mod import;

use std::collections::HashSet;

use oxrdfio::RdfFormat;

use crate::domains::themes::import::{Entries, ImportReport, write};
use crate::domains::themes::model::{Category, Keyword};
use crate::domains::themes::service::Themes;
use crate::kernel::error::{ApiError, ApiResult};

pub const SKOS: &str = "http://www.w3.org/2004/02/skos/core#";
pub const DCTERMS: &str = "http://purl.org/dc/terms/";
pub const VOCNET: &str = "http://schema.vocnet.org/";
pub const VANN: &str = "http://purl.org/vocab/vann/";
pub const RDF_TYPE: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
pub const XSD_DATE_TIME: &str = "http://www.w3.org/2001/XMLSchema#dateTime";
/// The language of labels, synonyms and notes.
pub const LANGUAGE: &str = "de";
/// Where GND concepts live: an `exactMatch` here is the keyword's GND concept.
pub const GND_PREFIX: &str = "https://d-nb.info/gnd/";

/// The formats served and read, by media type and file extension.
pub fn format_of(name: &str) -> Option<RdfFormat> {
    match name.trim().to_ascii_lowercase().as_str() {
        "ttl" | "turtle" | "text/turtle" | "application/x-turtle" => Some(RdfFormat::Turtle),
        "rdf" | "xml" | "rdfxml" | "application/rdf+xml" => Some(RdfFormat::RdfXml),
        "jsonld" | "json-ld" | "json" | "application/ld+json" => Some(RdfFormat::JsonLd {
            profile: oxrdfio::JsonLdProfileSet::empty(),
        }),
        _ => None,
    }
}

/// The media type of a format (what `Content-Type` says).
pub fn media_type(format: RdfFormat) -> &'static str {
    match format {
        RdfFormat::RdfXml => "application/rdf+xml",
        RdfFormat::JsonLd { .. } => "application/ld+json",
        _ => "text/turtle",
    }
}

/// The format an `Accept` header asks for: the first it names that we
/// serve (Turtle for `*/*`, `text/*` or none); `None` when it names only
/// others.
pub fn negotiate(accept: Option<&str>) -> Option<RdfFormat> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(RdfFormat::Turtle);
    };
    let mut ranges: Vec<(f32, usize, &str)> = accept
        .split(',')
        .enumerate()
        .filter_map(|(i, part)| {
            let mut bits = part.split(';');
            let range = bits.next()?.trim();
            let q = bits
                .filter_map(|b| b.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            (q > 0.0).then_some((q, i, range))
        })
        .collect();
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranges.into_iter().find_map(|(_, _, r)| match r {
        "*/*" | "text/*" => Some(RdfFormat::Turtle),
        "application/*" => Some(RdfFormat::RdfXml),
        other => format_of(other),
    })
}


/// Keyword ids read per page of a portal's keywords, and keywords per read.
const PAGE: usize = 1_000;
/// Triples an import reads at most by default.
pub const MAX_TRIPLES: usize = 5_000_000;

/// A portal with every category below it and every keyword in them.
pub async fn read_portal(themes: &Themes, portal_id: &str) -> ApiResult<(Category, Vec<Category>, Vec<Keyword>)> {
    let portal = themes.portal(portal_id).await?;
    let mut categories = Vec::new();
    let mut level = vec![portal.id.clone()];
    while !level.is_empty() {
        let children = themes.children_of(&level).await?;
        let mut next = Vec::new();
        for parent in &level {
            for c in children.get(parent).into_iter().flatten() {
                next.push(c.id.clone());
                categories.push(c.clone());
            }
        }
        level = next;
    }
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = themes.category_keyword_ids(&portal.id, true, PAGE, after).await?;
        let next = page.items.last().map(|(c, _)| c.clone());
        ids.extend(page.items.into_iter().map(|(_, id)| id));
        match (page.has_next, next) {
            (true, Some(n)) => after = Some(n),
            _ => break,
        }
    }
    let mut keywords = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(PAGE) {
        let found = themes.keywords(chunk).await?;
        keywords.extend(chunk.iter().filter_map(|id| found.get(id).cloned()));
    }
    Ok((portal, categories, keywords))
}

/// A portal as a SKOS document in `format`.
pub async fn export(
    themes: &Themes,
    iris: &export::Iris<'_>,
    portal_id: &str,
    format: RdfFormat,
) -> ApiResult<Vec<u8>> {
    let (portal, categories, keywords) = read_portal(themes, portal_id).await?;
    let triples = export::triples(iris, &portal, &categories, &keywords);
    export::serialize(&triples, format).map_err(|e| {
        tracing::error!(error = %e, "serializing SKOS");
        ApiError::Internal
    })
}

/// Imports a SKOS document: nothing at all when it has a structural error
/// (every one is reported by its triple's number, a syntax error under 0
/// with its line and column); else each scheme,
/// category and keyword as `import-vocabulary` writes records, numbered by
/// their first triple. A keyword keeps its stored GND entity type and its
/// categories in portals the document does not hold.
pub async fn import(themes: &Themes, bytes: &[u8], format: RdfFormat, concurrency: usize, max_triples: usize) -> ImportReport {
    let started = std::time::Instant::now();
    let mut report = ImportReport::default();
    let triples = match import::parse(bytes, format, max_triples) {
        Ok(t) => t,
        Err(e) => {
            report.errors.push((0, e));
            return report;
        }
    };
    let (mut entries, portals) = match import::entries(&triples) {
        Ok(e) => e,
        Err(errors) => {
            report.errors.extend(errors);
            return report;
        }
    };
    if let Err(e) = keep_what_skos_does_not_say(themes, &mut entries, &portals).await {
        report.errors.push((0, e.message()));
        return report;
    }
    write(themes, entries, concurrency, &mut report).await;
    report.errors.sort();
    report.elapsed = started.elapsed();
    report
}

async fn keep_what_skos_does_not_say(themes: &Themes, entries: &mut Entries, portals: &[String]) -> ApiResult<()> {
    let ids: Vec<String> = entries.keywords.iter().map(|(_, k)| k.id.clone()).collect();
    let mut stored = std::collections::HashMap::new();
    for chunk in ids.chunks(PAGE) {
        stored.extend(themes.keywords(chunk).await?);
    }
    let their: Vec<String> = stored
        .values()
        .flat_map(|k| k.category_ids.iter().cloned())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut categories = std::collections::HashMap::new();
    for chunk in their.chunks(PAGE) {
        categories.extend(themes.categories(chunk).await?);
    }
    for (_, k) in entries.keywords.iter_mut() {
        let Some(old) = stored.get(&k.id) else { continue };
        k.gnd_entity_id = old.gnd_entity_id.clone();
        for c in &old.category_ids {
            let elsewhere = categories
                .get(c)
                .is_some_and(|cat| !portals.iter().any(|p| p == cat.portal_id()));
            if elsewhere && !k.category_ids.contains(c) {
                k.category_ids.push(c.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_picks_the_best_format_we_serve() {
        assert_eq!(negotiate(None), Some(RdfFormat::Turtle));
        assert_eq!(negotiate(Some("*/*")), Some(RdfFormat::Turtle));
        assert_eq!(negotiate(Some("application/rdf+xml")), Some(RdfFormat::RdfXml));
        assert_eq!(
            negotiate(Some("text/html;q=0.9, application/ld+json")).map(media_type),
            Some("application/ld+json")
        );
        assert_eq!(
            negotiate(Some("application/rdf+xml;q=0.5, text/turtle;q=0.8")),
            Some(RdfFormat::Turtle)
        );
        assert_eq!(negotiate(Some("text/html")), None);
        assert_eq!(negotiate(Some("text/turtle;q=0")), None);
    }
}
