//! SKOS documents as the vocabulary importer's entries. Every triple is
//! read and checked before anything is written: a syntax error, a triple
//! with a predicate or class this mapping does not know, a concept without
//! a label or with a broader concept that is not a category, are reported
//! by the triple's number (its place in the document, from 1; syntax
//! errors by line and column) and the import writes nothing.

use std::collections::{BTreeMap, HashMap};

use oxrdf::{NamedOrBlankNode, Term, Triple};
use oxrdfio::{RdfFormat, RdfParser};

use super::{DCTERMS, GND_PREFIX, LANGUAGE, RDF_TYPE, SKOS, VANN, VOCNET};
use crate::domains::themes::import::Entries;
use crate::domains::themes::service::{CategoryInput, KeywordInput};

/// The triples of a document, numbered from 1; or the syntax error, by
/// line and column.
pub fn parse(bytes: &[u8], format: RdfFormat, max_triples: usize) -> Result<Vec<(usize, Triple)>, String> {
    let mut out = Vec::new();
    for quad in RdfParser::from_format(format).for_slice(bytes) {
        match quad {
            Ok(q) => {
                if !q.graph_name.is_default_graph() {
                    return Err(format!("triple {}: named graphs are not read (only triples)", out.len() + 1));
                }
                if out.len() >= max_triples {
                    return Err(format!("more than {max_triples} triples (--max-skos-triples)"));
                }
                out.push((out.len() + 1, Triple::new(q.subject, q.predicate, q.object)));
            }
            // The parsers' messages name the line and column.
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(out)
}

/// What the triples say of one subject.
#[derive(Default)]
struct Node {
    first: usize,
    types: Vec<String>,
    pref: Vec<(Option<String>, String)>,
    alt: Vec<(Option<String>, String)>,
    notes: Vec<(Option<String>, String)>,
    notation: Option<String>,
    identifier: Option<String>,
    created: Option<String>,
    broader: Vec<String>,
    in_scheme: Vec<String>,
    top_of: Vec<String>,
    exact: Vec<String>,
    related: Vec<String>,
}

const PREDICATES: [&str; 18] = [
    "rdf:type",
    "skos:prefLabel",
    "skos:altLabel",
    "skos:scopeNote",
    "skos:notation",
    "skos:broader",
    "skos:narrower",
    "skos:inScheme",
    "skos:topConceptOf",
    "skos:hasTopConcept",
    "skos:exactMatch",
    "skos:relatedMatch",
    "dcterms:identifier",
    "dcterms:title",
    "dcterms:created",
    "dcterms:description",
    "dcterms:license",
    "vann:preferredNamespaceUri",
];

fn short(iri: &str) -> String {
    if iri == RDF_TYPE {
        return "rdf:type".into();
    }
    for (prefix, ns) in [("skos", SKOS), ("dcterms", DCTERMS), ("vocnet", VOCNET), ("vann", VANN)] {
        if let Some(local) = iri.strip_prefix(ns) {
            return format!("{prefix}:{local}");
        }
    }
    format!("<{iri}>")
}

fn subject_key(s: &NamedOrBlankNode) -> Option<String> {
    match s {
        NamedOrBlankNode::NamedNode(n) => Some(n.as_str().to_owned()),
        _ => None,
    }
}

/// The id a concept gives itself: its `dcterms:identifier`, else the last
/// segment (or fragment) of its IRI.
fn id_of(iri: &str, node: Option<&Node>) -> String {
    if let Some(id) = node.and_then(|n| n.identifier.clone()) {
        return id;
    }
    let tail = iri.rsplit(['/', '#']).find(|s| !s.is_empty()).unwrap_or(iri);
    url::form_urlencoded::parse(format!("i={}", tail.replace('+', "%2B").replace('&', "%26")).as_bytes())
        .next()
        .map_or_else(|| tail.to_owned(), |(_, v)| v.into_owned())
}

/// The text of the preferred language (then no language, then any).
fn pick(texts: &[(Option<String>, String)]) -> Option<String> {
    texts
        .iter()
        .find(|(l, _)| l.as_deref() == Some(LANGUAGE))
        .or_else(|| texts.iter().find(|(l, _)| l.is_none()))
        .or_else(|| texts.first())
        .map(|(_, t)| t.clone())
}

fn in_language(texts: &[(Option<String>, String)]) -> Vec<String> {
    texts
        .iter()
        .filter(|(l, _)| l.is_none() || l.as_deref() == Some(LANGUAGE))
        .map(|(_, t)| t.clone())
        .collect()
}

/// Errors by triple number.
pub type Errors = Vec<(usize, String)>;

/// The entries (and the portals they are in) of the triples, or every
/// error found, by triple number.
pub fn entries(triples: &[(usize, Triple)]) -> Result<(Entries, Vec<String>), Errors> {
    let mut errors = Vec::new();
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for (n, t) in triples {
        let Some(s) = subject_key(&t.subject) else {
            errors.push((*n, "a blank node or triple as subject: every concept needs an IRI".into()));
            continue;
        };
        let p = short(t.predicate.as_str());
        let node = nodes.entry(s.clone()).or_insert_with(|| Node { first: *n, ..Node::default() });
        let text = match &t.object {
            Term::Literal(l) => Some((l.language().map(str::to_owned), l.value().to_owned())),
            _ => None,
        };
        let target = match &t.object {
            Term::NamedNode(o) => Some(o.as_str().to_owned()),
            _ => None,
        };
        let wrong = |what: &str| format!("{p} of <{s}> must be {what}");
        match (p.as_str(), text, target) {
            ("rdf:type", _, Some(c)) => {
                let c = short(&c);
                if ["skos:ConceptScheme", "skos:Concept", "vocnet:NonIndexingConcept"].contains(&c.as_str()) {
                    node.types.push(c);
                } else {
                    errors.push((*n, format!("<{s}> is a {c}: only skos:ConceptScheme, skos:Concept and vocnet:NonIndexingConcept are read")));
                }
            }
            ("skos:prefLabel" | "dcterms:title", Some(t), _) => node.pref.push(t),
            ("skos:altLabel", Some(t), _) => node.alt.push(t),
            ("skos:scopeNote", Some(t), _) => node.notes.push(t),
            ("skos:notation", Some((_, t)), _) => node.notation = Some(t),
            ("dcterms:identifier", Some((_, t)), _) => node.identifier = Some(t),
            ("dcterms:created", Some((_, t)), _) => node.created = Some(t),
            ("skos:broader", _, Some(o)) => node.broader.push(o),
            ("skos:inScheme", _, Some(o)) => node.in_scheme.push(o),
            ("skos:topConceptOf", _, Some(o)) => node.top_of.push(o),
            ("skos:exactMatch", _, Some(o)) => node.exact.push(o),
            ("skos:relatedMatch", _, Some(o)) => node.related.push(o),
            // The inverses say nothing their counterparts do not; a
            // document may hold either.
            ("skos:narrower", _, Some(o)) => {
                let _ = o;
            }
            ("skos:hasTopConcept", _, Some(_)) => {}
            // What a scheme says of itself beyond its label: read past.
            ("dcterms:description" | "vann:preferredNamespaceUri", Some(_), _)
            | ("dcterms:license", _, _) => {}
            (
                "skos:prefLabel" | "dcterms:title" | "skos:altLabel" | "skos:scopeNote" | "skos:notation"
                | "dcterms:identifier" | "dcterms:created",
                None,
                _,
            ) => errors.push((*n, wrong("a literal"))),
            (known, _, None) if PREDICATES.contains(&known) => errors.push((*n, wrong("an IRI"))),
            _ => errors.push((
                *n,
                format!("unknown predicate {p} (README, \"SKOS\", lists those read)"),
            )),
        }
    }
    // The inverse triples, as broader and topConceptOf of their objects.
    for (n, t) in triples {
        let (Some(s), Term::NamedNode(o)) = (subject_key(&t.subject), &t.object) else {
            continue;
        };
        let p = short(t.predicate.as_str());
        if p == "skos:narrower" || p == "skos:hasTopConcept" {
            let child = nodes.entry(o.as_str().to_owned()).or_insert_with(|| Node { first: *n, ..Node::default() });
            let list = if p == "skos:narrower" { &mut child.broader } else { &mut child.top_of };
            if !list.contains(&s) {
                list.push(s);
            }
        }
    }
    let is = |node: &Node, c: &str| node.types.iter().any(|t| t == c);
    let schemes: HashMap<&str, String> = nodes
        .iter()
        .filter(|(_, n)| is(n, "skos:ConceptScheme"))
        .map(|(iri, n)| (iri.as_str(), id_of(iri, Some(n))))
        .collect();
    let category_ids: HashMap<&str, String> = nodes
        .iter()
        .filter(|(_, n)| is(n, "vocnet:NonIndexingConcept"))
        .map(|(iri, n)| (iri.as_str(), id_of(iri, Some(n))))
        .collect();
    let mut entries = Entries::default();
    for (iri, node) in &nodes {
        let n = node.first;
        let label = pick(&node.pref);
        if is(node, "skos:ConceptScheme") {
            match label {
                Some(label) => entries.categories.push((
                    n,
                    CategoryInput {
                        id: id_of(iri, Some(node)),
                        parent_id: None,
                        label,
                        notation: node.notation.clone(),
                        xtree_uri: node.exact.first().cloned(),
                    },
                )),
                None => errors.push((n, format!("concept scheme <{iri}> has no skos:prefLabel"))),
            }
            continue;
        }
        if !is(node, "skos:Concept") {
            if node.types.is_empty() && node.pref.is_empty() {
                // Only named as the object of a narrower/hasTopConcept.
                continue;
            }
            errors.push((n, format!("<{iri}> is neither a skos:ConceptScheme nor a skos:Concept")));
            continue;
        }
        let Some(label) = label else {
            errors.push((n, format!("concept <{iri}> has no skos:prefLabel")));
            continue;
        };
        let id = id_of(iri, Some(node));
        let scheme_of = |list: &[String]| list.iter().find_map(|s| schemes.get(s.as_str()).cloned());
        // What a broader IRI names: a category or scheme of the document,
        // or (not in it) a stored category by the IRI's last segment.
        let target = |b: &String| -> Result<String, String> {
            if let Some(c) = category_ids.get(b.as_str()).or_else(|| schemes.get(b.as_str())) {
                Ok(c.clone())
            } else if nodes.get(b.as_str()).is_some_and(|t| !t.types.is_empty()) {
                Err(format!("<{iri}> has skos:broader <{b}>, which is not a category (vocnet:NonIndexingConcept) or a scheme"))
            } else {
                Ok(id_of(b, None))
            }
        };
        if is(node, "vocnet:NonIndexingConcept") {
            let parent = match node.broader.as_slice() {
                [] => scheme_of(&node.top_of).or_else(|| scheme_of(&node.in_scheme)),
                [one] => match target(one) {
                    Ok(id) => Some(id),
                    Err(e) => {
                        errors.push((n, e));
                        continue;
                    }
                },
                _ => {
                    errors.push((n, format!("category <{iri}> has more than one skos:broader")));
                    continue;
                }
            };
            let Some(parent) = parent else {
                errors.push((n, format!("category <{iri}> is in no scheme: give it skos:topConceptOf, skos:inScheme or skos:broader")));
                continue;
            };
            entries.categories.push((
                n,
                CategoryInput {
                    id,
                    parent_id: Some(parent),
                    label,
                    notation: node.notation.clone(),
                    xtree_uri: node.exact.first().cloned(),
                },
            ));
        } else {
            // Its categories: broader ones, and the portals it is a top
            // concept of (a keyword right in a portal).
            let mut in_categories = Vec::new();
            let mut bad = None;
            for b in &node.broader {
                match target(b) {
                    Ok(id) => in_categories.push(id),
                    Err(e) => bad = Some(e),
                }
            }
            in_categories.extend(node.top_of.iter().filter_map(|t| schemes.get(t.as_str()).cloned()));
            if let Some(e) = bad {
                errors.push((n, e));
                continue;
            }
            if in_categories.is_empty() {
                errors.push((n, format!("keyword <{iri}> has no skos:broader category")));
                continue;
            }
            let (gnd, other): (Vec<&String>, Vec<&String>) =
                node.exact.iter().partition(|e| e.starts_with(GND_PREFIX));
            entries.keywords.push((
                n,
                KeywordInput {
                    id,
                    label,
                    synonyms: in_language(&node.alt),
                    note: pick(&node.notes),
                    primary_gnd_uri: gnd.first().map(|g| (*g).clone()),
                    related_gnd_uris: node.related.clone(),
                    gnd_entity_id: None,
                    category_ids: in_categories,
                    xtree_uri: other.first().map(|x| (*x).clone()),
                    created_at: node.created.clone(),
                },
            ));
        }
    }
    // Two concepts of one kind with one id would overwrite each other.
    let mut seen: HashMap<(bool, &str), usize> = HashMap::new();
    for (n, id, keyword) in entries
        .categories
        .iter()
        .map(|(n, c)| (*n, c.id.as_str(), false))
        .chain(entries.keywords.iter().map(|(n, k)| (*n, k.id.as_str(), true)))
    {
        if let Some(first) = seen.insert((keyword, id), n) {
            errors.push((n, format!("id {id:?} is also the id of the concept at triple {first}")));
        }
    }
    if errors.is_empty() {
        let mut portals: Vec<String> = schemes.into_values().collect();
        portals.sort();
        Ok((entries, portals))
    } else {
        errors.sort();
        Err(errors)
    }
}
