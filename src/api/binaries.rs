//! GraphQL types and root fields of the binaries domain.

use async_graphql::{Context, ID, Object, Result, SimpleObject, Upload};

use crate::api::caller::caller;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::connection::{self, Page, connection};
use crate::api::graphql::cost;
use crate::domains::binaries::model::{BinaryStatus, DERIVATIVES, Original, Reference};
use crate::domains::binaries::service::{Binaries, CHUNK, Registered};
use crate::kernel::error::ApiError;
use crate::kernel::roles::Role;

/// What a binary's crawl history or log is weighed as (a log keeps up to
/// 1,000 lines; the answer's size budget bounds a long one).
const HISTORY_WEIGHT: usize = 20;

fn binaries<'a>(ctx: &Context<'a>) -> &'a Binaries {
    ctx.data_unchecked::<Binaries>()
}

/// A stored derivative: the original scaled to fit a box, as JPEG.
#[derive(SimpleObject)]
pub struct Derivative {
    /// The box, in the IIIF size syntax of the URL (`!800,600`).
    size: String,
    url: String,
}

#[derive(SimpleObject)]
pub struct LogLine {
    /// RFC 3339, UTC.
    timestamp: String,
    message: String,
}

/// A reference to a stored binary (an image), within a context.
pub struct Binary {
    reference: Reference,
    original: Original,
}

#[Object]
impl Binary {
    async fn reference_id(&self) -> ID {
        ID(self.reference.id.clone())
    }
    async fn context(&self) -> &str {
        &self.reference.context
    }
    async fn original_id(&self) -> ID {
        ID(self.original.id.clone())
    }
    async fn status(&self) -> BinaryStatus {
        self.original.status.unwrap_or(BinaryStatus::Processing)
    }
    /// The MIME type sniffed from the bytes.
    async fn mime(&self) -> Option<&str> {
        self.original.mime.as_deref()
    }
    /// Bytes.
    async fn size(&self) -> Option<f64> {
        self.original.size.map(|s| s as f64)
    }
    /// SHA-256 of the bytes, hex.
    async fn checksum(&self) -> Option<&str> {
        self.original.checksum.as_deref()
    }
    async fn width(&self) -> Option<i32> {
        self.original.width
    }
    async fn height(&self) -> Option<i32> {
        self.original.height
    }
    /// When the reference was made (RFC 3339, UTC).
    async fn created(&self) -> &str {
        &self.reference.created
    }
    /// When the original was last fetched or checked.
    async fn last_checked(&self) -> Option<&str> {
        self.original.last_checked.as_deref()
    }
    /// The URL it was fetched from (none for uploads).
    async fn url(&self) -> Option<&str> {
        self.original.url.as_deref()
    }
    /// Why the last attempt failed (for ERROR and RETRY).
    async fn error(&self) -> Option<&str> {
        match self.original.status {
            Some(BinaryStatus::Error | BinaryStatus::Retry) => self.original.error.as_deref(),
            _ => None,
        }
    }
    /// Where the original is served (relative to this server).
    async fn original_url(&self) -> String {
        format!("/binary/{}", self.reference.id)
    }
    /// The IIIF Image API 3.0 description of this image (relative to this server).
    async fn iiif_info_url(&self) -> String {
        format!("/iiif/3/{}/info.json", self.reference.id)
    }
    /// The four stored sizes (served once the status is OK).
    #[graphql(complexity = "cost::list(DERIVATIVES.len(), child_complexity)")]
    async fn derivatives(&self) -> Vec<Metered<Derivative>> {
        DERIVATIVES
            .iter()
            .map(|(w, h, _)| {
                Metered(Derivative {
                    size: format!("!{w},{h}"),
                    url: format!("/binary/{}/full/!{w},{h}/default.jpg", self.reference.id),
                })
            })
            .collect()
    }
    /// The crawl history of its URL, oldest first (none for an upload).
    #[graphql(complexity = "cost::list(HISTORY_WEIGHT, child_complexity)")]
    async fn crawls(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Vec<Metered<crate::api::crawl::CrawlLinkFetch>>> {
        match &self.original.url {
            Some(url) => crate::api::crawl::crawls_of(ctx, url).await,
            None => Ok(Vec::new()),
        }
    }

    /// Every step and failure, oldest first.
    #[graphql(complexity = "cost::list(HISTORY_WEIGHT, child_complexity)")]
    async fn logs(&self, ctx: &Context<'_>) -> Result<Vec<Metered<LogLine>>> {
        Ok(binaries(ctx)
            .logs(&self.reference.id)
            .await?
            .into_iter()
            .map(|(t, m)| {
                Metered(LogLine {
                    timestamp: t.split('#').next().unwrap_or_default().to_owned(),
                    message: m,
                })
            })
            .collect())
    }
}

/// A binary by reference id (the root field and the federation lookup).
pub async fn load(ctx: &Context<'_>, reference_id: &str) -> Result<Option<Metered<Binary>>> {
    Ok(binaries(ctx)
        .resolve(reference_id)
        .await?
        .map(|(reference, original)| {
            Metered(Binary {
                reference,
                original,
            })
        }))
}

async fn registered(ctx: &Context<'_>, r: Registered) -> Result<Metered<Binary>> {
    load(ctx, &r.reference_id)
        .await?
        .ok_or_else(|| ApiError::Unavailable.into())
}

#[derive(Default)]
pub struct BinariesQuery;

#[Object]
impl BinariesQuery {
    /// One binary by its reference id.
    async fn binary(&self, ctx: &Context<'_>, reference_id: ID) -> Result<Option<Metered<Binary>>> {
        load(ctx, &reference_id).await
    }

    /// The binaries of a context, by reference id.
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    async fn binaries(
        &self,
        ctx: &Context<'_>,
        context: String,
        first: Option<i32>,
        after: Option<String>,
    ) -> Result<Page<Metered<Binary>>> {
        let (first, after, has_previous) = connection::window(first, after)?;
        let page = binaries(ctx).context_page(&context, first, after).await?;
        let ids: Vec<String> = page
            .items
            .iter()
            .map(|(_, e)| e.reference_id.clone())
            .collect();
        let refs = binaries(ctx).references(&ids).await?;
        let original_ids: Vec<String> = refs
            .iter()
            .map(|r| {
                r.as_ref()
                    .map(|r| r.original_id.clone())
                    .unwrap_or_default()
            })
            .collect();
        let originals = binaries(ctx).originals(&original_ids).await?;
        // Read in the page's order; a reference deleted meanwhile is left out.
        let mut found = refs.into_iter().zip(originals);
        let listed = page.filter_map(|_| match found.next()? {
            (Some(reference), Some(original)) => Some(Metered(Binary {
                reference,
                original,
            })),
            _ => None,
        });
        Ok(connection(listed, has_previous))
    }
}

#[derive(Default)]
pub struct BinariesMutation;

#[Object]
impl BinariesMutation {
    /// Registers an image URL under a context (machine or admin). Answers at
    /// once; the download runs in the background (status PROCESSING, then OK,
    /// ERROR or RETRY). A URL registered before reuses its original.
    async fn register_binary(
        &self,
        ctx: &Context<'_>,
        url: String,
        context: String,
        mime: Option<String>,
    ) -> Result<Metered<Binary>> {
        let r = binaries(ctx)
            .register_url(caller(ctx), &url, &context, mime)
            .await?;
        registered(ctx, r).await
    }

    /// Uploads an image (GraphQL multipart request) under a context (machine or admin).
    async fn upload_binary(
        &self,
        ctx: &Context<'_>,
        file: Upload,
        context: String,
    ) -> Result<Metered<Binary>> {
        // The role first: a caller who may not upload learns nothing about the file.
        caller(ctx).require_any(&[Role::Machine, Role::Admin])?;
        let value = file
            .value(ctx)
            .map_err(|e| ApiError::bad_input(format!("no such upload: {e}")))?;
        let stream = file_chunks(value.content);
        let r = binaries(ctx).upload(caller(ctx), &context, stream).await?;
        registered(ctx, r).await
    }

    /// Deletes one reference and its logs (admin). The original goes once
    /// nothing references it.
    async fn delete_binary(&self, ctx: &Context<'_>, reference_id: ID) -> Result<ID> {
        binaries(ctx)
            .delete_reference(caller(ctx), &reference_id)
            .await?;
        Ok(reference_id)
    }

    /// Deletes every reference of a context (admin); returns how many.
    async fn delete_binaries(&self, ctx: &Context<'_>, context: String) -> Result<i32> {
        let n = binaries(ctx).delete_context(caller(ctx), &context).await?;
        Ok(i32::try_from(n).unwrap_or(i32::MAX))
    }
}

/// A spooled upload file as a stream of chunks of at most [`CHUNK`] bytes.
fn file_chunks(
    file: std::fs::File,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    futures::stream::unfold(Some(file), |state| async move {
        let mut file = state?;
        let read = tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut buf = vec![0u8; CHUNK];
            let mut filled = 0;
            while filled < CHUNK {
                match file.read(&mut buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) => return (Err(e), file),
                }
            }
            buf.truncate(filled);
            (Ok(buf), file)
        })
        .await;
        match read {
            Ok((Ok(buf), _)) if buf.is_empty() => None,
            Ok((Ok(buf), file)) => Some((Ok(bytes::Bytes::from(buf)), Some(file))),
            Ok((Err(e), _)) => Some((Err(e), None)),
            Err(e) => Some((Err(std::io::Error::other(e)), None)),
        }
    })
}
