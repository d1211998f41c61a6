//! GraphQL multipart requests (the GraphQL multipart request spec: an
//! `operations` field, a `map` field, then the files), read with a bound at
//! every field. `operations` and `map` may be no larger than the JSON body
//! limit; file parts are accepted only from an authenticated caller whose
//! operation declares an `Upload` variable, and only for the paths the map
//! names, each up to the upload limit. Anything else is refused before a
//! byte of a file is written.

use std::collections::HashMap;
use std::io::Seek;

use async_graphql::parser::types::BaseType;
use async_graphql::{Request, UploadValue};
use axum::body::Body;
use futures::TryStreamExt;
use tokio::io::AsyncWriteExt;

use crate::kernel::error::ApiError;
use crate::kernel::roles::{Principal, Role};

/// Files one request may carry, and paths in its `map`.
pub const MAX_FILES: usize = 4;

pub struct MultipartLimits {
    /// Bound of the `operations` and `map` fields (the JSON body limit).
    pub max_text_bytes: u64,
    /// Bound of each file.
    pub max_file_bytes: u64,
    /// Bound of the query text (`--max-query-bytes`), checked before it is parsed.
    pub max_query_bytes: usize,
}

fn too_large(what: &str, limit: u64) -> ApiError {
    ApiError::PayloadTooLarge(format!("{what} is larger than {limit} bytes"))
}

/// A multer failure in terms the client can act on.
fn field_error(e: multer::Error, limits: &MultipartLimits) -> ApiError {
    match e {
        multer::Error::FieldSizeExceeded { limit, field_name } => too_large(
            &format!("the field {}", field_name.as_deref().unwrap_or("(unnamed)")),
            limit,
        ),
        multer::Error::StreamSizeExceeded { limit } => too_large("the request body", limit),
        multer::Error::StreamReadFailed(e) => {
            crate::api::rest::body_error(e, limits.max_text_bytes)
        }
        other => ApiError::bad_input(format!("not a GraphQL multipart request: {other}")),
    }
}

/// Reads a GraphQL multipart request for `principal`.
pub async fn read(
    content_type: &str,
    body: Body,
    principal: &Principal,
    limits: &MultipartLimits,
) -> Result<Request, ApiError> {
    let boundary = multer::parse_boundary(content_type)
        .map_err(|e| ApiError::bad_input(format!("not a multipart body: {e}")))?;
    let whole = limits
        .max_text_bytes
        .saturating_mul(2)
        .saturating_add(limits.max_file_bytes.saturating_mul(MAX_FILES as u64))
        .saturating_add(64 << 10);
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(whole)
            .per_field(limits.max_file_bytes)
            .for_field("operations", limits.max_text_bytes)
            .for_field("map", limits.max_text_bytes),
    );
    let stream = body
        .into_data_stream()
        .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>);
    let mut form = multer::Multipart::with_constraints(stream, boundary, constraints);

    let Some(field) = next_field(&mut form, limits).await? else {
        return Err(ApiError::bad_input("the multipart body is empty"));
    };
    if field.name() != Some("operations") {
        return Err(ApiError::bad_input("the first field must be `operations`"));
    }
    let bytes = field.bytes().await.map_err(|e| field_error(e, limits))?;
    let mut request: Request = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_input(format!("`operations` is not JSON: {e}")))
        .and_then(super::graphql::request_from_json)?;
    drop(bytes);

    let map: HashMap<String, Vec<String>> = match next_field(&mut form, limits).await? {
        Some(field) if field.name() == Some("map") => {
            let bytes = field.bytes().await.map_err(|e| field_error(e, limits))?;
            serde_json::from_slice(&bytes).map_err(|e| {
                ApiError::bad_input(format!(
                    "`map` must be an object of file name -> paths: {e}"
                ))
            })?
        }
        Some(_) => return Err(ApiError::bad_input("the second field must be `map`")),
        None => HashMap::new(),
    };
    if map.is_empty() {
        return match next_field(&mut form, limits).await? {
            None => Ok(request),
            Some(_) => Err(ApiError::bad_input(
                "a file part that `map` does not name is refused",
            )),
        };
    }
    // Files are accepted only where they can be used, before any is read.
    if principal.sub.is_none() {
        return Err(ApiError::Unauthenticated);
    }
    // Only an uploader's files can be used (uploadBinary is the one
    // mutation that takes them): any other token would spool up to
    // MAX_FILES × the file bound to disk before its mutation is refused.
    principal.require_any(&[Role::Machine, Role::Admin])?;
    // Each path of a file holds a descriptor of its spool file: count the
    // paths, not only the files, or one file could name thousands.
    if map.len() > MAX_FILES || map.values().map(Vec::len).sum::<usize>() > MAX_FILES {
        return Err(ApiError::PayloadTooLarge(format!(
            "at most {MAX_FILES} files (and paths in `map`) per request"
        )));
    }
    let uploads = upload_variables(&mut request, limits.max_query_bytes)?;
    for paths in map.values() {
        for path in paths {
            let variable = path
                .strip_prefix("variables.")
                .and_then(|p| p.split('.').next())
                .unwrap_or_default();
            if !uploads.iter().any(|u| u == variable) {
                return Err(ApiError::bad_input(format!(
                    "{path:?} is not a variable of type Upload of the operation; its file is refused"
                )));
            }
        }
    }
    let mut received = 0;
    while let Some(mut field) = next_field(&mut form, limits).await? {
        let name = field.name().unwrap_or_default().to_owned();
        let Some(paths) = map.get(&name) else {
            return Err(ApiError::bad_input(format!(
                "the file part {name:?} is not named in `map`; it is refused"
            )));
        };
        let filename = field.file_name().unwrap_or_default().to_owned();
        let content_type = field.content_type().map(|m| m.to_string());
        let spool = tempfile::tempfile().map_err(|e| {
            tracing::error!(error = %e, "cannot create a temporary file for an upload");
            ApiError::Unavailable
        })?;
        let mut file = tokio::fs::File::from_std(spool);
        while let Some(piece) = field.chunk().await.map_err(|e| field_error(e, limits))? {
            file.write_all(&piece).await.map_err(|e| {
                tracing::error!(error = %e, "cannot spool an upload");
                ApiError::Unavailable
            })?;
        }
        file.flush().await.map_err(|_| ApiError::Unavailable)?;
        let file = file.into_std().await;
        for path in paths {
            let mut content = file.try_clone().map_err(|_| ApiError::Unavailable)?;
            content.rewind().map_err(|_| ApiError::Unavailable)?;
            request.set_upload(
                path,
                UploadValue {
                    filename: filename.clone(),
                    content_type: content_type.clone(),
                    content,
                },
            );
        }
        received += 1;
    }
    if received < map.len() {
        return Err(ApiError::bad_input(
            "`map` names files that the request does not carry",
        ));
    }
    Ok(request)
}

async fn next_field<'r>(
    form: &mut multer::Multipart<'r>,
    limits: &MultipartLimits,
) -> Result<Option<multer::Field<'r>>, ApiError> {
    form.next_field().await.map_err(|e| field_error(e, limits))
}

/// The variables of type `Upload` (or lists of it) that the request's operation declares.
fn upload_variables(
    request: &mut Request,
    max_query_bytes: usize,
) -> Result<Vec<String>, ApiError> {
    let op = super::graphql::chosen_operation(request, max_query_bytes)
        .map_err(|e| ApiError::bad_input(format!("the query does not parse: {}", e.message)))?;
    let Some(op) = op else {
        return Err(ApiError::bad_input(
            "name the operation (operationName) of a request that carries files",
        ));
    };
    fn is_upload(t: &BaseType) -> bool {
        match t {
            BaseType::Named(n) => n.as_str() == "Upload",
            BaseType::List(inner) => is_upload(&inner.base),
        }
    }
    Ok(op
        .variable_definitions
        .iter()
        .filter(|v| is_upload(&v.node.var_type.node.base))
        .map(|v| v.node.name.node.to_string())
        .collect())
}

#[cfg(test)]
mod tests;
