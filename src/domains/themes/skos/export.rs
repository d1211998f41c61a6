//! A portal as SKOS triples, and the triples as a document.

use std::collections::HashSet;

use oxrdf::{Literal, NamedNode, Triple};
use oxrdfio::{RdfFormat, RdfSerializer};

use super::{DCTERMS, GND_PREFIX, LANGUAGE, RDF_TYPE, SKOS, VANN, VOCNET, XSD_DATE_TIME};
use crate::domains::themes::model::{Category, Keyword};

/// The IRIs of a server's SKOS documents and concepts.
pub struct Iris<'a> {
    /// The server's base URL (`--public-url`, or the request's host).
    pub base: &'a str,
    /// The vocabulary's licence (`--skos-license`), said on each scheme.
    pub license: Option<&'a str>,
}

fn segment(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

impl Iris<'_> {
    /// A portal's scheme (also the URL its document is served at).
    pub fn scheme(&self, portal_id: &str) -> String {
        format!("{}/skos/{}", self.base, segment(portal_id))
    }
    pub fn category(&self, id: &str) -> String {
        format!("{}/skos/category/{}", self.base, segment(id))
    }
    pub fn keyword(&self, id: &str) -> String {
        format!("{}/skos/keyword/{}", self.base, segment(id))
    }
}

fn iri(s: &str) -> NamedNode {
    NamedNode::new_unchecked(s)
}

fn skos(term: &str) -> NamedNode {
    iri(&format!("{SKOS}{term}"))
}

fn dct(term: &str) -> NamedNode {
    iri(&format!("{DCTERMS}{term}"))
}

fn label(text: &str) -> Literal {
    Literal::new_language_tagged_literal_unchecked(text, LANGUAGE)
}

/// An IRI the store holds, if it parses as one (a stored value that does
/// not is left out rather than written as a broken IRI).
fn stored_iri(s: &str) -> Option<NamedNode> {
    NamedNode::new(s.trim()).ok()
}

/// The triples of one portal: its scheme, its categories (every one below
/// it) and the keywords in them. A keyword's broader concepts are its
/// categories in this portal.
pub fn triples(iris: &Iris<'_>, portal: &Category, categories: &[Category], keywords: &[Keyword]) -> Vec<Triple> {
    let mut out = Vec::new();
    let mut add = |s: &NamedNode, p: NamedNode, o: oxrdf::Term| out.push(Triple::new(s.clone(), p, o));
    let scheme = iri(&iris.scheme(&portal.id));
    add(&scheme, iri(RDF_TYPE), skos("ConceptScheme").into());
    add(&scheme, skos("prefLabel"), label(&portal.label).into());
    add(
        &scheme,
        dct("description"),
        label(&format!("Schlagwörter des Portals {}", portal.label)).into(),
    );
    add(&scheme, dct("identifier"), Literal::new_simple_literal(&portal.id).into());
    add(
        &scheme,
        iri(&format!("{VANN}preferredNamespaceUri")),
        Literal::new_simple_literal(format!("{}/skos/", iris.base)).into(),
    );
    if let Some(l) = iris.license.and_then(stored_iri) {
        add(&scheme, dct("license"), l.into());
    }
    if let Some(x) = portal.xtree_uri.as_deref().and_then(stored_iri) {
        add(&scheme, skos("exactMatch"), x.into());
    }
    let in_portal: HashSet<&str> = categories.iter().map(|c| c.id.as_str()).collect();
    for c in categories {
        let node = iri(&iris.category(&c.id));
        add(&node, iri(RDF_TYPE), skos("Concept").into());
        add(&node, iri(RDF_TYPE), iri(&format!("{VOCNET}NonIndexingConcept")).into());
        add(&node, skos("prefLabel"), label(&c.label).into());
        add(&node, dct("identifier"), Literal::new_simple_literal(&c.id).into());
        add(&node, skos("inScheme"), scheme.clone().into());
        if let Some(n) = &c.notation {
            add(&node, skos("notation"), Literal::new_simple_literal(n).into());
        }
        if let Some(x) = c.xtree_uri.as_deref().and_then(stored_iri) {
            add(&node, skos("exactMatch"), x.into());
        }
        match c.parent_id.as_deref() {
            Some(p) if p == portal.id => {
                add(&node, skos("topConceptOf"), scheme.clone().into());
                add(&scheme, skos("hasTopConcept"), node.clone().into());
            }
            Some(p) => {
                let parent = iri(&iris.category(p));
                add(&node, skos("broader"), parent.clone().into());
                add(&parent, skos("narrower"), node.clone().into());
            }
            None => {}
        }
    }
    for k in keywords {
        let node = iri(&iris.keyword(&k.id));
        add(&node, iri(RDF_TYPE), skos("Concept").into());
        add(&node, skos("prefLabel"), label(&k.label).into());
        // A synonym equal to the label says nothing (and SKOS checkers
        // warn about it).
        for s in k.synonyms.iter().filter(|s| s.trim() != k.label.trim()) {
            add(&node, skos("altLabel"), label(s).into());
        }
        if let Some(n) = &k.note {
            add(&node, skos("scopeNote"), label(n).into());
        }
        add(&node, dct("identifier"), Literal::new_simple_literal(&k.id).into());
        if !k.created_at.is_empty() {
            add(
                &node,
                dct("created"),
                Literal::new_typed_literal(&k.created_at, iri(XSD_DATE_TIME)).into(),
            );
        }
        add(&node, skos("inScheme"), scheme.clone().into());
        // Right in the portal: a top concept of its scheme.
        if k.category_ids.contains(&portal.id) {
            add(&node, skos("topConceptOf"), scheme.clone().into());
            add(&scheme, skos("hasTopConcept"), node.clone().into());
        }
        for c in k.category_ids.iter().filter(|c| in_portal.contains(c.as_str())) {
            let parent = iri(&iris.category(c));
            add(&node, skos("broader"), parent.clone().into());
            add(&parent, skos("narrower"), node.clone().into());
        }
        if let Some(g) = k.primary_gnd_uri.as_deref().and_then(stored_iri) {
            add(&node, skos("exactMatch"), g.into());
        }
        if let Some(x) = k
            .xtree_uri
            .as_deref()
            .filter(|x| !x.starts_with(GND_PREFIX))
            .and_then(stored_iri)
        {
            add(&node, skos("exactMatch"), x.into());
        }
        for r in k.related_gnd_uris.iter().filter_map(|r| stored_iri(r)) {
            add(&node, skos("relatedMatch"), r.into());
        }
    }
    out
}

/// The triples as a document in `format`, with the usual prefixes.
pub fn serialize(triples: &[Triple], format: RdfFormat) -> std::io::Result<Vec<u8>> {
    let mut serializer = RdfSerializer::from_format(format);
    for (prefix, ns) in [
        ("skos", super::SKOS),
        ("dcterms", super::DCTERMS),
        ("vocnet", super::VOCNET),
        ("vann", super::VANN),
        ("xsd", "http://www.w3.org/2001/XMLSchema#"),
    ] {
        serializer = serializer
            .with_prefix(prefix, ns)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    // Each subject's triples together (in the order subjects first come),
    // so that Turtle writes each concept as one block.
    let mut order: Vec<&oxrdf::NamedOrBlankNode> = Vec::new();
    let mut by_subject: std::collections::HashMap<&oxrdf::NamedOrBlankNode, Vec<&Triple>> =
        std::collections::HashMap::new();
    for t in triples {
        by_subject
            .entry(&t.subject)
            .or_insert_with(|| {
                order.push(&t.subject);
                Vec::new()
            })
            .push(t);
    }
    let mut writer = serializer.for_writer(Vec::new());
    for s in order {
        for t in &by_subject[s] {
            writer.serialize_triple(*t)?;
        }
    }
    writer.finish()
}
