//! Reading objects, importing them (with their images), and the link to an
//! object's page on the portal.

use std::collections::HashMap;
use std::sync::Arc;

use super::model::{CatalogueObject, MAX_INSTITUTION, MAX_TITLE, OBJECTS};
use crate::domains::binaries::service::Binaries;
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::kernel::{Clock, bounded, check_id};
use crate::store::{DynStore, Mutation, Value};

/// Where an object's page is when no pattern is configured: the Deutsche
/// Digitale Bibliothek's item page, which every ddb id has.
pub const DEFAULT_URL_PATTERN: &str = "https://www.deutsche-digitale-bibliothek.de/item/{ddbId}";

/// Keys of one store read in [`Objects::get_many`].
pub const MAX_IDS: usize = 500;

/// Image URLs registered at a time by an import chunk.
const REGISTER_CONCURRENCY: usize = 16;

#[derive(Clone)]
pub struct Objects {
    store: DynStore,
    clock: Clock,
    /// The link pattern: `{ddbId}` and `{portalId}` are replaced.
    url_pattern: Arc<str>,
}

/// One object as an import line gives it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectInput {
    pub ddb_id: String,
    pub title: String,
    pub institution: Option<String>,
    /// Registered as a binary under the ddb id; none leaves an image
    /// imported before as it is.
    pub image_url: Option<String>,
}

/// What an import did with one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Imported {
    Created,
    Updated,
    /// Already as the line says: nothing written.
    Unchanged,
}

impl Objects {
    pub fn new(store: DynStore) -> Self {
        Objects {
            store,
            clock: Clock::system(),
            url_pattern: DEFAULT_URL_PATTERN.into(),
        }
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The pattern of the link to an object's page (checked by
    /// [`check_url_pattern`]).
    pub fn with_url_pattern(mut self, pattern: &str) -> Self {
        self.url_pattern = pattern.into();
        self
    }

    /// The link to the object's page (in `portal_id`'s portal when the
    /// pattern names one; without a portal, `{portalId}` is left empty).
    pub fn page_url(&self, ddb_id: &str, portal_id: Option<&str>) -> String {
        page_url(&self.url_pattern, ddb_id, portal_id)
    }

    /// The object, if the catalogue has told us of it.
    pub async fn get(&self, ddb_id: &str) -> ApiResult<Option<CatalogueObject>> {
        check_id("ddb", ddb_id)?;
        let row = self.store.get(&OBJECTS, &[ddb_id.into()]).await?;
        Ok(row.as_ref().map(CatalogueObject::from_row))
    }

    /// The objects of `ids` that are known, by ddb id, read [`MAX_IDS`] at a
    /// time (ids that are not ids are simply not found).
    pub async fn get_many(&self, ids: &[String]) -> ApiResult<HashMap<String, CatalogueObject>> {
        let keys: Vec<Vec<Value>> = ids
            .iter()
            .filter(|id| check_id("ddb", id).is_ok())
            .map(|id| vec![id.as_str().into()])
            .collect();
        let mut found = HashMap::new();
        for chunk in keys.chunks(MAX_IDS) {
            let rows = self.store.get_many(&OBJECTS, chunk).await?;
            found.extend(
                rows.iter()
                    .flatten()
                    .map(CatalogueObject::from_row)
                    .map(|o| (o.ddb_id.clone(), o)),
            );
        }
        Ok(found)
    }

    /// Writes what `inputs` say of their objects (machine or admin): a new
    /// object is created, a known one updated where the line differs, an
    /// equal one left alone. A new image URL is registered with `binaries`
    /// under the ddb id (the crawler fetches it); one registered before is
    /// not registered again. One result per input, in order; the store
    /// failing is the whole call's error.
    pub async fn import_many(
        &self,
        who: &Principal,
        binaries: &Binaries,
        inputs: Vec<ObjectInput>,
    ) -> ApiResult<Vec<ApiResult<Imported>>> {
        who.require_any(&[Role::Machine, Role::Admin])?;
        let mut checked: Vec<ApiResult<ObjectInput>> = inputs.into_iter().map(checked).collect();
        // One object twice in a call: only its last line is imported (two
        // at once would each register its image).
        let mut seen = std::collections::HashSet::new();
        for c in checked.iter_mut().rev() {
            if let Ok(i) = c
                && !seen.insert(i.ddb_id.clone())
            {
                *c = Err(ApiError::bad_input(format!(
                    "{} comes again on a later line close by; only that line is imported",
                    i.ddb_id
                )));
            }
        }
        let ids: Vec<String> = checked
            .iter()
            .flatten()
            .map(|i| i.ddb_id.clone())
            .collect();
        let known = self.get_many(&ids).await?;
        let now = self.clock.rfc3339();
        let known = &known;
        let now = &now;
        let planned = bounded(checked, REGISTER_CONCURRENCY, |input| async move {
            let input = input?;
            let before = known.get(&input.ddb_id);
            let image_reference_id = match (&input.image_url, before) {
                // The same URL as registered before: nothing to do.
                (Some(url), Some(b))
                    if b.image_url.as_ref() == Some(url) && b.image_reference_id.is_some() =>
                {
                    b.image_reference_id.clone()
                }
                // Registered before without the row written (a failed or
                // killed import): that reference, not a second one.
                (Some(url), _) => match binaries.reference_of(&input.ddb_id, url).await? {
                    Some(r) => Some(r),
                    None => Some(
                        binaries
                            .register_url(who, url, &input.ddb_id, None)
                            .await?
                            .reference_id,
                    ),
                },
                (None, b) => b.and_then(|b| b.image_reference_id.clone()),
            };
            let object = CatalogueObject {
                ddb_id: input.ddb_id.clone(),
                title: input.title,
                institution: input.institution,
                image_url: input
                    .image_url
                    .or_else(|| before.and_then(|b| b.image_url.clone())),
                image_reference_id,
                updated_at: now.clone(),
            };
            Ok(match before {
                Some(b) if b.same_as(&object) => (Imported::Unchanged, None),
                Some(_) => (Imported::Updated, Some(object)),
                None => (Imported::Created, Some(object)),
            })
        })
        .await;
        let mut writes = Vec::new();
        let results = planned
            .into_iter()
            .map(|r| {
                r.map(|(what, object)| {
                    writes.extend(object.map(|o| Mutation::upsert(o.to_row())));
                    what
                })
            })
            .collect();
        if !writes.is_empty() {
            self.store.write_bulk(writes).await?;
        }
        Ok(results)
    }
}

/// An input as it is kept (trimmed), or why it is refused.
fn checked(mut input: ObjectInput) -> ApiResult<ObjectInput> {
    check_id("ddb", &input.ddb_id)?;
    input.title = input.title.trim().to_owned();
    if input.title.is_empty() || input.title.chars().count() > MAX_TITLE {
        return Err(ApiError::bad_input(format!(
            "title must be 1 to {MAX_TITLE} characters"
        )));
    }
    input.institution = input
        .institution
        .map(|i| i.trim().to_owned())
        .filter(|i| !i.is_empty());
    if input
        .institution
        .as_ref()
        .is_some_and(|i| i.chars().count() > MAX_INSTITUTION)
    {
        return Err(ApiError::bad_input(format!(
            "institution must be at most {MAX_INSTITUTION} characters"
        )));
    }
    if input.title.chars().chain(input.institution.iter().flat_map(|i| i.chars())).any(char::is_control) {
        return Err(ApiError::bad_input(
            "title and institution must not contain control characters",
        ));
    }
    // As registering keeps it: without a login, which readers of the
    // object would otherwise see.
    input.image_url = match input.image_url.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(u) => {
            let mut parsed = url::Url::parse(u)
                .map_err(|e| ApiError::bad_input(format!("imageUrl is not a URL: {e}")))?;
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            Some(parsed.to_string())
        }
    };
    Ok(input)
}

/// Checks a link pattern: an http(s) URL once `{ddbId}` is filled in, and
/// naming `{ddbId}`.
pub fn check_url_pattern(pattern: &str) -> Result<(), String> {
    if !pattern.contains("{ddbId}") {
        return Err(format!("the object URL pattern {pattern:?} must contain {{ddbId}}"));
    }
    let sample = pattern.replace("{ddbId}", "x").replace("{portalId}", "p");
    match url::Url::parse(&sample) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        _ => Err(format!(
            "the object URL pattern {pattern:?} is not an http(s) URL"
        )),
    }
}

/// `pattern` with `{ddbId}` and `{portalId}` (empty when none) filled in.
fn page_url(pattern: &str, ddb_id: &str, portal_id: Option<&str>) -> String {
    pattern
        .replace("{ddbId}", &escaped(ddb_id))
        .replace("{portalId}", &escaped(portal_id.unwrap_or_default()))
}

/// `s` with every byte but the unreserved ones of RFC 3986 percent-encoded
/// (an id is safe anywhere in a URL).
fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_url_escapes_the_id_and_names_the_portal() {
        let p = "https://example.org/{portalId}/item/{ddbId}?x=1";
        assert_eq!(
            page_url(p, "A B/ä", Some("c-musik")),
            "https://example.org/c-musik/item/A%20B%2F%C3%A4?x=1"
        );
        assert_eq!(page_url(p, "X1", None), "https://example.org//item/X1?x=1");
    }

    #[test]
    fn a_url_pattern_names_the_id_and_is_http() {
        assert!(check_url_pattern(DEFAULT_URL_PATTERN).is_ok());
        assert!(check_url_pattern("https://example.org/item").is_err());
        assert!(check_url_pattern("javascript:alert({ddbId})").is_err());
        assert!(check_url_pattern("{ddbId}").is_err());
    }

    #[test]
    fn an_input_is_trimmed_and_bounded() {
        let ok = checked(ObjectInput {
            ddb_id: "D1".into(),
            title: "  Ein Titel ".into(),
            institution: Some(" ".into()),
            image_url: Some(" https://example.org/a.jpg ".into()),
        })
        .unwrap();
        assert_eq!(ok.title, "Ein Titel");
        assert_eq!(ok.institution, None);
        assert_eq!(ok.image_url.as_deref(), Some("https://example.org/a.jpg"));
        let login = checked(ObjectInput {
            ddb_id: "D1".into(),
            title: "t".into(),
            image_url: Some("https://user:secret@example.org/a.jpg".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(login.image_url.as_deref(), Some("https://example.org/a.jpg"));
        for bad in [
            ObjectInput { ddb_id: "D1".into(), title: " ".into(), ..Default::default() },
            ObjectInput { ddb_id: "".into(), title: "t".into(), ..Default::default() },
            ObjectInput { ddb_id: "D1".into(), title: "x".repeat(MAX_TITLE + 1), ..Default::default() },
            ObjectInput { ddb_id: "D1".into(), title: "a\u{7}b".into(), ..Default::default() },
            ObjectInput {
                ddb_id: "D1".into(),
                title: "t".into(),
                image_url: Some("not a url".into()),
                ..Default::default()
            },
            ObjectInput {
                ddb_id: "D1".into(),
                title: "t".into(),
                institution: Some("i".repeat(MAX_INSTITUTION + 1)),
                ..Default::default()
            },
        ] {
            assert!(matches!(checked(bad), Err(ApiError::BadUserInput(_))));
        }
    }
}
