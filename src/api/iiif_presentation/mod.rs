//! IIIF Presentation API 3.0: a manifest per catalogue object and a
//! collection per portal, public and readable from any origin like the
//! Image API routes beside them (`iiif_rest`).
//!
//! - `GET /iiif/3/manifest/{ddbId}`: one canvas per image of the object (a
//!   binary in the object's context whose original is OK), sized from the
//!   original, its thumbnail a stored derivative, its `service` our Image
//!   API; label, metadata and homepage from the object's catalogue record;
//!   the keywords its portals accepted (ACCEPTED, PUBLISHED, and
//!   DELETESUGGESTED, which is still shown until its deletion is accepted)
//!   as `tagging` annotations on the manifest, each with the keyword's
//!   label and, when it has one, its GND concept as a `SpecificResource`;
//!   `seeAlso` the SKOS documents of those portals' vocabularies.
//! - `GET /iiif/3/collection/{portalId}[?after={ddbId}]`: the manifests of
//!   the portal's objects with such keywords and an image, by ddb id, in
//!   pages of [`COLLECTION_PAGE`]; a page that is not the last ends with a
//!   reference to the next one (a `Collection`: version 3 has no paging).
//!
//! The documents are built by the pure functions below from what the
//! handlers read; a manifest costs four reads and one per keyword batch.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{FromRef, Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::api::binaries_rest::RestError;
use crate::api::iiif_rest::{base_url, public_cors, vary_on_host};
use crate::api::rest::PortalId;
use crate::domains::assignments::model::AssignmentStatus;
use crate::domains::assignments::service::Assignments;
use crate::domains::binaries::model::{BinaryStatus, Original};
use crate::domains::binaries::service::Binaries;
use crate::domains::objects::model::CatalogueObject;
use crate::domains::objects::service::Objects;
use crate::domains::themes::service::Themes;
use crate::kernel::error::ApiError;

/// The JSON-LD context of every document here.
pub const PRESENTATION_CONTEXT: &str = "http://iiif.io/api/presentation/3/context.json";
/// Canvases in one manifest at most (the object's first images by reference id).
pub const MAX_CANVASES: usize = 100;
/// Manifests listed by one collection page.
pub const COLLECTION_PAGE: usize = 100;
/// The statuses whose keywords a manifest shows and a collection lists.
pub const SHOWN: [AssignmentStatus; 3] = [
    AssignmentStatus::Accepted,
    AssignmentStatus::Published,
    AssignmentStatus::Deletesuggested,
];
/// References a collection page looks at per object to find an OK image.
const IMAGES_CHECKED: usize = 8;
/// Objects whose images a collection page checks at once.
const CHECKS_AT_ONCE: usize = 16;

/// What the presentation routes read: four domains' services.
#[derive(Clone)]
pub struct Presentation {
    pub themes: Themes,
    pub assignments: Assignments,
    pub binaries: Binaries,
    pub objects: Objects,
}

/// The manifest and collection routes, with the Image API's CORS.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Presentation: FromRef<S>,
{
    Router::new()
        .route("/iiif/3/manifest/{ddb_id}", get(manifest))
        .route("/iiif/3/collection/{portal_id}", get(collection))
        .layer(public_cors())
}

/// One image of an object, as a canvas shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub reference: String,
    pub width: u32,
    pub height: u32,
}

/// One keyword an object carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Tag {
    pub keyword_id: String,
    pub label: String,
    pub gnd_uri: Option<String>,
}

/// `base` with `segments` appended, each percent-encoded as a path segment.
fn url_of(base: &str, segments: &[&str]) -> String {
    match url::Url::parse(base) {
        Ok(mut u) => {
            if let Ok(mut path) = u.path_segments_mut() {
                path.pop_if_empty().extend(segments);
            }
            u.to_string()
        }
        // `base_url` only makes URLs that parse; keep a readable fallback.
        Err(_) => format!("{base}/{}", segments.join("/")),
    }
}

fn none_label(text: &str) -> Value {
    json!({ "none": [text] })
}

fn label_de_en(de: &str, en: &str) -> Value {
    json!({ "de": [de], "en": [en] })
}

/// The Image API service of a reference.
fn image_service(base: &str, reference: &str) -> Value {
    json!([{
        "id": url_of(base, &["iiif", "3", reference]),
        "type": "ImageService3",
        "profile": "level2",
    }])
}

/// The thumbnail of an image: its 440×330 derivative, served as stored.
fn thumbnail(base: &str, image: &Image) -> Value {
    let (w, h) = crate::domains::binaries::imaging::fit(image.width, image.height, 440, 330);
    json!([{
        "id": url_of(base, &["iiif", "3", &image.reference, "full", &format!("{w},{h}"), "0", "default.jpg"]),
        "type": "Image",
        "format": "image/jpeg",
        "width": w,
        "height": h,
        "service": image_service(base, &image.reference),
    }])
}

/// The size `full/max` gives for an original of `w`×`h` (the Image API's
/// `maxWidth`, `maxHeight` and `maxArea`).
fn max_size(w: u32, h: u32) -> (u32, u32) {
    use crate::domains::binaries::iiif;
    iiif::parse_size("max")
        .and_then(|s| iiif::output_size(s, w, h))
        .unwrap_or((w, h))
}

fn canvas(base: &str, manifest_id: &str, n: usize, image: &Image) -> Value {
    let id = format!("{manifest_id}/canvas/{n}");
    let (mw, mh) = max_size(image.width, image.height);
    json!({
        "id": id,
        "type": "Canvas",
        "label": none_label(&n.to_string()),
        "width": image.width,
        "height": image.height,
        "thumbnail": thumbnail(base, image),
        "items": [{
            "id": format!("{id}/page"),
            "type": "AnnotationPage",
            "items": [{
                "id": format!("{id}/page/image"),
                "type": "Annotation",
                "motivation": "painting",
                "body": {
                    "id": url_of(base, &["iiif", "3", &image.reference, "full", "max", "0", "default.jpg"]),
                    "type": "Image",
                    "format": "image/jpeg",
                    "width": mw,
                    "height": mh,
                    "service": image_service(base, &image.reference),
                },
                "target": id,
            }],
        }],
    })
}

fn tagging(manifest_id: &str, tags: &[Tag]) -> Value {
    let items: Vec<Value> = tags
        .iter()
        .map(|t| {
            let mut body = vec![json!({
                "type": "TextualBody",
                "value": t.label,
                "format": "text/plain",
            })];
            if let Some(gnd) = &t.gnd_uri {
                body.push(json!({ "type": "SpecificResource", "source": gnd }));
            }
            json!({
                "id": url_of(manifest_id, &["tags", &t.keyword_id]),
                "type": "Annotation",
                "motivation": "tagging",
                "body": body,
                "target": manifest_id,
            })
        })
        .collect();
    json!({
        "id": format!("{manifest_id}/tags"),
        "type": "AnnotationPage",
        "items": items,
    })
}

/// What a manifest is built from.
pub struct ManifestParts<'a> {
    /// The server's base URL (`--public-url` or the request's host).
    pub base: &'a str,
    pub ddb_id: &'a str,
    pub object: Option<&'a CatalogueObject>,
    /// The object's page on the portal.
    pub page_url: String,
    /// At least one.
    pub images: &'a [Image],
    pub tags: &'a [Tag],
    /// The portals whose collections list it.
    pub portals: &'a [String],
}

/// The manifest of an object.
pub fn manifest_document(p: &ManifestParts<'_>) -> Value {
    let id = url_of(p.base, &["iiif", "3", "manifest", p.ddb_id]);
    let title = p.object.map_or(p.ddb_id, |o| o.title.as_str());
    let mut metadata = vec![json!({
        "label": label_de_en("Objekt-ID (DDB)", "Object id (DDB)"),
        "value": none_label(p.ddb_id),
    })];
    let institution = p.object.and_then(|o| o.institution.as_deref());
    if let Some(i) = institution {
        metadata.push(json!({
            "label": label_de_en("Institution", "Institution"),
            "value": none_label(i),
        }));
    }
    if !p.tags.is_empty() {
        let labels: Vec<&str> = p.tags.iter().map(|t| t.label.as_str()).collect();
        metadata.push(json!({
            "label": label_de_en("Schlagwörter", "Keywords"),
            "value": { "none": labels },
        }));
    }
    let canvases: Vec<Value> = p
        .images
        .iter()
        .enumerate()
        .map(|(n, i)| canvas(p.base, &id, n + 1, i))
        .collect();
    let mut m = json!({
        "@context": PRESENTATION_CONTEXT,
        "id": id,
        "type": "Manifest",
        "label": none_label(title),
        "metadata": metadata,
        "homepage": [{
            "id": p.page_url,
            "type": "Text",
            "label": none_label(title),
            "format": "text/html",
        }],
        "items": canvases,
    });
    let o = m.as_object_mut().expect("a JSON object");
    if let Some(first) = p.images.first() {
        o.insert("thumbnail".into(), thumbnail(p.base, first));
    }
    if let Some(i) = institution {
        o.insert(
            "requiredStatement".into(),
            json!({
                "label": label_de_en("Bereitgestellt von", "Provided by"),
                "value": none_label(i),
            }),
        );
    }
    if !p.portals.is_empty() {
        let part_of: Vec<Value> = p
            .portals
            .iter()
            .map(|portal| json!({ "id": url_of(p.base, &["iiif", "3", "collection", portal]), "type": "Collection" }))
            .collect();
        o.insert("partOf".into(), Value::Array(part_of));
        // The vocabulary the keywords come from, as SKOS.
        let see_also: Vec<Value> = p
            .portals
            .iter()
            .map(|portal| {
                json!({
                    "id": url_of(p.base, &["skos", portal]),
                    "type": "Dataset",
                    "format": "text/turtle",
                    "profile": "http://www.w3.org/2004/02/skos/core",
                })
            })
            .collect();
        o.insert("seeAlso".into(), Value::Array(see_also));
    }
    if !p.tags.is_empty() {
        let page = tagging(&id, p.tags);
        o.insert("annotations".into(), json!([page]));
    }
    m
}

/// One page of a portal's collection: `items` are (ddb id, label) of
/// manifests; `next` the ddb id the next page starts after.
pub fn collection_document(
    base: &str,
    portal_id: &str,
    portal_label: &str,
    after: Option<&str>,
    items: &[(String, String)],
    next: Option<&str>,
) -> Value {
    let page = |after: Option<&str>| {
        let mut u = url_of(base, &["iiif", "3", "collection", portal_id]);
        if let Some(a) = after {
            let q: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("after", a)
                .finish();
            u = format!("{u}?{q}");
        }
        u
    };
    let mut listed: Vec<Value> = items
        .iter()
        .map(|(ddb_id, label)| {
            json!({
                "id": url_of(base, &["iiif", "3", "manifest", ddb_id]),
                "type": "Manifest",
                "label": none_label(label),
            })
        })
        .collect();
    if let Some(n) = next {
        listed.push(json!({
            "id": page(Some(n)),
            "type": "Collection",
            "label": label_de_en("Weitere Objekte", "More objects"),
        }));
    }
    let mut c = json!({
        "@context": PRESENTATION_CONTEXT,
        "id": page(after),
        "type": "Collection",
        "label": none_label(portal_label),
        "items": listed,
    });
    if after.is_some() {
        c.as_object_mut().expect("a JSON object").insert(
            "partOf".into(),
            json!([{ "id": page(None), "type": "Collection" }]),
        );
    }
    c
}

// ----- handlers -----

/// A document as JSON-LD with the Presentation context.
fn document(p: &Presentation, headers: &HeaderMap, body: &Value) -> Response {
    let wants_ld = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/ld+json"));
    let content_type = if wants_ld {
        format!("application/ld+json;profile=\"{PRESENTATION_CONTEXT}\"")
    } else {
        "application/json".to_owned()
    };
    vary_on_host(
        &p.binaries,
        ([(header::CONTENT_TYPE, content_type)], body.to_string()).into_response(),
    )
}

/// The OK images of an object (at most [`MAX_CANVASES`]), and whether any
/// other is still being fetched or scaled.
async fn images_of(
    b: &Binaries,
    ddb_id: &str,
    first: usize,
) -> Result<(Vec<Image>, bool), ApiError> {
    let refs = b.context_page(ddb_id, first, None).await?;
    let ids: Vec<String> = refs
        .items
        .iter()
        .map(|(_, e)| e.original_id.clone())
        .collect();
    let originals = b.originals(&ids).await?;
    let mut pending = false;
    let mut images = Vec::new();
    for ((_, entry), o) in refs.items.iter().zip(originals) {
        match o {
            Some(Original {
                status: Some(BinaryStatus::Ok),
                width: Some(w),
                height: Some(h),
                ..
            }) if w > 0 && h > 0 => images.push(Image {
                reference: entry.reference_id.clone(),
                width: w as u32,
                height: h as u32,
            }),
            Some(Original {
                status: Some(BinaryStatus::Processing | BinaryStatus::Retry),
                ..
            }) => pending = true,
            _ => {}
        }
    }
    Ok((images, pending))
}

/// `GET /iiif/3/manifest/{ddbId}`.
async fn manifest(
    State(p): State<Presentation>,
    Path(ddb_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, RestError> {
    crate::kernel::check_id("object", &ddb_id)?;
    let (object, assignments, (images, pending)) = futures::try_join!(
        p.objects.get(&ddb_id),
        p.assignments.of_object(&ddb_id, None),
        images_of(&p.binaries, &ddb_id, MAX_CANVASES),
    )?;
    if images.is_empty() {
        let known = object.is_some() || !assignments.is_empty() || pending;
        return Err(match (known, pending) {
            (false, _) => ApiError::NotFound(format!("object {ddb_id}")).into(),
            (true, true) => RestError {
                error: ApiError::NotFound(format!(
                    "object {ddb_id} has no image ready yet (still processing; try again later)"
                )),
                retry_after: true,
            },
            (true, false) => {
                ApiError::NotFound(format!("object {ddb_id} has no image to show")).into()
            }
        });
    }
    let mut keyword_ids: Vec<String> = Vec::new();
    let mut portals: Vec<String> = Vec::new();
    for a in assignments.iter().filter(|a| SHOWN.contains(&a.status)) {
        if !keyword_ids.contains(&a.key.keyword_id) {
            keyword_ids.push(a.key.keyword_id.clone());
        }
        if !portals.contains(&a.key.portal_id) {
            portals.push(a.key.portal_id.clone());
        }
    }
    let keywords = p.themes.keywords(&keyword_ids).await?;
    let tags: Vec<Tag> = keyword_ids
        .iter()
        .filter_map(|id| keywords.get(id))
        .map(|k| Tag {
            keyword_id: k.id.clone(),
            label: k.label.clone(),
            gnd_uri: k.primary_gnd_uri.clone(),
        })
        .collect();
    let base = base_url(&p.binaries, &headers);
    let doc = manifest_document(&ManifestParts {
        base: &base,
        ddb_id: &ddb_id,
        object: object.as_ref(),
        page_url: p
            .objects
            .page_url(&ddb_id, portals.first().map(String::as_str)),
        images: &images,
        tags: &tags,
        portals: &portals,
    });
    Ok(document(&p, &headers, &doc))
}

#[derive(serde::Deserialize)]
struct CollectionQuery {
    after: Option<String>,
}

/// `GET /iiif/3/collection/{portalId}[?after={ddbId}]`.
async fn collection(
    State(p): State<Presentation>,
    PortalId(portal_id): PortalId,
    Query(q): Query<CollectionQuery>,
    headers: HeaderMap,
) -> Result<Response, RestError> {
    if let Some(a) = &q.after {
        crate::kernel::check_id("object", a)?;
    }
    let portal = p.themes.portal(&portal_id).await?;
    let ids = p
        .assignments
        .objects_in(&portal_id, &SHOWN, COLLECTION_PAGE, q.after.as_deref())
        .await?;
    let next = (ids.len() == COLLECTION_PAGE)
        .then(|| ids.last().cloned())
        .flatten();
    let with_images: Vec<String> = futures::stream::iter(ids.iter().cloned())
        .map(|id| {
            let b = p.binaries.clone();
            async move {
                images_of(&b, &id, IMAGES_CHECKED)
                    .await
                    .map(|(i, _)| (!i.is_empty()).then_some(id))
            }
        })
        .buffered(CHECKS_AT_ONCE)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    let records: HashMap<String, CatalogueObject> = p.objects.get_many(&with_images).await?;
    let items: Vec<(String, String)> = with_images
        .into_iter()
        .map(|id| {
            let label = records
                .get(&id)
                .map_or_else(|| id.clone(), |o| o.title.clone());
            (id, label)
        })
        .collect();
    let base = base_url(&p.binaries, &headers);
    let doc = collection_document(
        &base,
        &portal_id,
        &portal.label,
        q.after.as_deref(),
        &items,
        next.as_deref(),
    );
    Ok(document(&p, &headers, &doc))
}

#[cfg(test)]
mod tests;
