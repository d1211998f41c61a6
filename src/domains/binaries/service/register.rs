//! Registering URLs and uploads: references, deduplication by URL and by
//! content, and streaming an upload into chunks.

use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::*;
use crate::domains::binaries::imaging;
use crate::domains::binaries::model::*;
use crate::domains::web::{check_host_now, check_url, strip_credentials};
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::kernel::{check_id, random_id};
use crate::store::Contention;
use crate::store::{Cas, Condition, Mutation, Row};

impl Binaries {
    // ----- registering -----

    /// The reference `url` (as registering normalises it: credentials
    /// stripped) was registered as under `context`, if it was: the one
    /// pointing at the URL's original among the context's first 1,000.
    pub async fn reference_of(&self, context: &str, url: &str) -> ApiResult<Option<String>> {
        let mut parsed = match reqwest::Url::parse(url.trim()) {
            Ok(u) => u,
            Err(_) => return Ok(None),
        };
        strip_credentials(&mut parsed);
        let mapped = self
            .store()
            .get(&URLS, &[parsed.as_str().into()])
            .await?;
        let Some(original) = url_target(mapped.as_ref()) else {
            return Ok(None);
        };
        let page = self.context_page(context, 1_000, None).await?;
        Ok(page
            .items
            .into_iter()
            .find(|(_, e)| e.original_id == original)
            .map(|(_, e)| e.reference_id))
    }

    /// Registers a URL under a context: reuses the URL's original, or gives
    /// the URL to the crawl frontier (while its original waits for a body,
    /// every registration hands it over again, which heals a hand-over lost
    /// to a failure). Answers at once.
    pub async fn register_url(
        &self,
        who: &Principal,
        url: &str,
        context: &str,
        mime: Option<String>,
    ) -> ApiResult<Registered> {
        who.require_any(&[Role::Machine, Role::Admin])?;
        check_id("context", context)?;
        let policy = &self.inner.policy;
        let mut parsed = check_url(policy, url.trim()).map_err(ApiError::BadUserInput)?;
        // Stripped, not refused: the URL names the same image without them,
        // and a batch of URLs copied with a login in them still registers.
        // Kept, they would reach every reader (`Binary.url`, the logs, the
        // crawl history); the fetch goes without them.
        let had_credentials = strip_credentials(&mut parsed);
        check_host_now(policy, &parsed)
            .await
            .map_err(ApiError::BadUserInput)?;
        let url = parsed.to_string();
        let mime = mime.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
        let reference = Reference {
            id: random_id(16),
            original_id: String::new(),
            context: context.to_owned(),
            created: self.now(),
        };
        let mut contention = Contention::new(8);
        loop {
            let mapped = self.store().get(&URLS, &[url.as_str().into()]).await?;
            let original_id = match url_target(mapped.as_ref()) {
                Some(o) => o,
                None => {
                    // No row, or the collector's empty one: taken from
                    // exactly what was read, so one registration wins.
                    let found = mapped.as_ref().and_then(|r| r.get("original_id").cloned());
                    // Made before the URL points at it: a registration that
                    // reads the new mapping must find the original, or it
                    // would take it for collected and move the URL on, and
                    // this registration's reference would wait for a body the
                    // crawler never brings. A losing attempt leaves an
                    // original nobody references, which the collector takes.
                    let o = random_id(22);
                    self.create_url_original(&o, &url, mime.clone()).await?;
                    let won = self
                        .store()
                        .cas(Cas {
                            row: Row::new(&URLS).set("url", &url).set("original_id", &o),
                            condition: Condition::Equals(vec![("original_id", found)]),
                            ttl: None,
                        })
                        .await?
                        .applied;
                    if !won {
                        if contention.lost().await {
                            continue;
                        }
                        break;
                    }
                    o
                }
            };
            let r = Reference {
                original_id: original_id.clone(),
                ..reference.clone()
            };
            if let Some(o) = self.attach(&r).await? {
                self.log(
                    std::slice::from_ref(&r.id),
                    &format!("registered {url} in context {context}"),
                )
                .await?;
                if had_credentials {
                    self.log(
                        std::slice::from_ref(&r.id),
                        "the URL's credentials (user:password@) were dropped: they are never stored nor sent",
                    )
                    .await?;
                }
                if o.status == Some(BinaryStatus::Ok) {
                    self.log(
                        std::slice::from_ref(&r.id),
                        "the URL was fetched before; its original is reused",
                    )
                    .await?;
                }
                if matches!(
                    o.status,
                    None | Some(BinaryStatus::Processing | BinaryStatus::Retry)
                ) && o.parts.is_none()
                {
                    self.inner.frontier.want(&url).await?;
                }
                return Ok(Registered {
                    reference_id: r.id,
                    original_id,
                    status: o.status.unwrap_or(BinaryStatus::Processing).as_str(),
                });
            }
            // The URL's original is gone or being collected: give the URL a
            // new one (made first, as above).
            let fresh = random_id(22);
            self.create_url_original(&fresh, &url, mime.clone()).await?;
            self.store()
                .cas(Cas {
                    row: Row::new(&URLS).set("url", &url).set("original_id", &fresh),
                    condition: Condition::Equals(vec![(
                        "original_id",
                        Some(original_id.as_str().into()),
                    )]),
                    ttl: None,
                })
                .await?;
            if !contention.lost().await {
                break;
            }
        }
        Err(ApiError::Unavailable)
    }

    pub(super) async fn create_url_original(
        &self,
        id: &str,
        url: &str,
        mime: Option<String>,
    ) -> ApiResult<()> {
        let o = Original {
            id: id.to_owned(),
            status: Some(BinaryStatus::Processing),
            url: Some(url.to_owned()),
            mime,
            created: Some(self.now()),
            touched: Some(self.touch_token()),
            next_attempt: Some(self.now()),
            ..Default::default()
        };
        let created = self
            .store()
            .cas(Cas {
                row: o.to_row(),
                condition: Condition::NotExists,
                ttl: None,
            })
            .await?
            .applied;
        if created {
            self.list_url(id, url).await?;
        }
        Ok(())
    }

    /// Lists `url` under the original it leads to (the query table `urls_original`).
    pub(super) async fn list_url(&self, original_id: &str, url: &str) -> ApiResult<()> {
        let row = Row::new(&URLS_ORIGINAL)
            .set("original_id", original_id)
            .set("url", url);
        self.store().apply(vec![Mutation::upsert(row)]).await?;
        Ok(())
    }

    /// Writes the reference, then proves its original alive (see the module
    /// comment). `None` (and the reference removed again) when the original is
    /// gone or being collected.
    pub(super) async fn attach(&self, r: &Reference) -> ApiResult<Option<Original>> {
        self.store()
            .apply(r.rows().into_iter().map(Mutation::upsert).collect())
            .await?;
        let mut contention = Contention::new(8);
        loop {
            let o = self.original(&r.original_id).await?;
            let status = o.as_ref().and_then(|o| o.status);
            let Some(status) = status.filter(|s| *s != BinaryStatus::Deleting) else {
                self.remove_reference_rows(r).await?;
                return Ok(None);
            };
            let outcome = self
                .store()
                .cas(Cas {
                    row: original_update(&r.original_id).set("touched", self.touch_token()),
                    condition: Condition::Equals(vec![("status", Some(status.as_str().into()))]),
                    ttl: None,
                })
                .await?;
            if outcome.applied {
                return Ok(outcome.current.as_ref().map(Original::from_row).or(o));
            }
            if !contention.lost().await {
                return Err(ApiError::Unavailable);
            }
        }
    }

    pub(super) async fn remove_reference_rows(&self, r: &Reference) -> ApiResult<()> {
        self.store()
            .apply(vec![
                Mutation::delete(&BINARY_REFS, vec![r.id.as_str().into()]),
                Mutation::delete(
                    &BINARY_REFS_CONTEXT,
                    vec![r.context.as_str().into(), r.id.as_str().into()],
                ),
                Mutation::delete(
                    &BINARY_REFS_ORIGINAL,
                    vec![r.original_id.as_str().into(), r.id.as_str().into()],
                ),
                Mutation::delete(&LOGS, vec![r.id.as_str().into()]),
            ])
            .await?;
        Ok(())
    }

    /// Stores an uploaded body under a context. The body streams into chunks;
    /// identical content already stored is reused (the new chunks are dropped).
    pub async fn upload<S, E>(
        &self,
        who: &Principal,
        context: &str,
        body: S,
    ) -> ApiResult<Registered>
    where
        S: Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        who.require_any(&[Role::Machine, Role::Admin])?;
        check_id("context", context)?;
        let id = random_id(22);
        let mut lease = self.later(UPLOAD_LEASE);
        let mut leased_at = self.inner.clock.now();
        let o = Original {
            id: id.clone(),
            status: Some(BinaryStatus::Processing),
            created: Some(self.now()),
            touched: Some(self.touch_token()),
            // The upload's lease: the collector leaves it alone meanwhile.
            next_attempt: Some(lease.clone()),
            ..Default::default()
        };
        self.store()
            .cas(Cas {
                row: o.to_row(),
                condition: Condition::NotExists,
                ttl: None,
            })
            .await?;
        let mut writer = ChunkWriter::new(self, &id);
        let mut body = std::pin::pin!(body);
        let mut failure: Option<ApiError> = None;
        while let Some(piece) = body.next().await {
            let piece = match piece {
                Ok(p) => p,
                Err(e) => {
                    failure = Some(ApiError::bad_input(format!("the upload broke off: {e}")));
                    break;
                }
            };
            if self.inner.clock.now() - leased_at >= UPLOAD_RENEW {
                // Renewed only while the lease is still the one written: if
                // the collector has taken the original meanwhile (the body
                // stalled past the lease), no chunk is written after its
                // sweep; the upload fails and what it wrote is dropped.
                match self.renew_upload_lease(&id, &lease).await {
                    Ok(Some(next)) => {
                        lease = next;
                        leased_at = self.inner.clock.now();
                    }
                    Ok(None) => {
                        failure = Some(ApiError::Timeout(
                            "the upload took longer than its lease, and its bytes were collected"
                                .into(),
                        ));
                        break;
                    }
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            match writer.push(&piece).await {
                Ok(()) => {}
                Err(WriteError::TooLarge) => {
                    failure = Some(ApiError::PayloadTooLarge(format!(
                        "the file is larger than {} bytes",
                        self.inner.config.max_bytes
                    )));
                    break;
                }
                Err(WriteError::NotAnImage) => {
                    failure = Some(ApiError::bad_input(NOT_AN_IMAGE));
                    break;
                }
                Err(WriteError::Store(e)) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let written = writer.parts;
        let received = match failure {
            None => match writer.finish().await {
                Ok(r) => Some(r),
                Err(WriteError::Store(e)) => {
                    failure = Some(e);
                    None
                }
                Err(WriteError::TooLarge | WriteError::NotAnImage) => None,
            },
            Some(_) => None,
        };
        let received = match (received, failure) {
            (Some(r), None) if r.size > 0 => r,
            (Some(r), None) => {
                self.drop_original(&id, r.parts).await;
                return Err(ApiError::bad_input("the file is empty"));
            }
            (_, failure) => {
                self.drop_original(&id, written + 1).await;
                return Err(failure.unwrap_or(ApiError::Internal));
            }
        };
        let Some(mime) = imaging::sniff(&received.head) else {
            self.drop_original(&id, received.parts).await;
            return Err(ApiError::bad_input(NOT_AN_IMAGE));
        };
        let reference = Reference {
            id: random_id(16),
            original_id: id.clone(),
            context: context.to_owned(),
            created: self.now(),
        };
        // Identical bytes stored before: reference those instead.
        if let Some(existing) = self.by_checksum(&received.checksum).await?
            && existing != id
        {
            let r = Reference {
                original_id: existing.clone(),
                ..reference.clone()
            };
            if let Some(o) = self.attach(&r).await? {
                self.drop_original(&id, received.parts).await;
                self.log(std::slice::from_ref(&r.id), &format!(
                    "uploaded {} bytes into context {context}; identical content was stored before and is reused",
                    received.size
                ))
                .await?;
                return Ok(Registered {
                    reference_id: r.id,
                    original_id: existing,
                    status: o.status.unwrap_or(BinaryStatus::Processing).as_str(),
                });
            }
        }
        self.store()
            .apply(vec![super::settle::checksum_index(&received.checksum, &id)])
            .await?;
        // The upload is complete: record it and queue it for the worker
        // before any reference points at it, so that a process killed at any
        // point leaves either an unreferenced original (the collector's, once
        // its grace has passed) or a referenced one on its way to OK, never a
        // reference to an original nobody will finish. The original's recent
        // `touched` keeps the collector away until the reference is attached.
        let now = self.now();
        let stored = self
            .store()
            .cas(Cas {
                row: original_update(&id)
                    .set("size", received.size as i64)
                    .set("parts", received.parts)
                    .set("checksum", &received.checksum)
                    .set("mime", mime)
                    .set("next_attempt", &now),
                condition: Condition::Equals(vec![(
                    "status",
                    Some(BinaryStatus::Processing.as_str().into()),
                )]),
                ttl: None,
            })
            .await?;
        if !stored.applied {
            return Err(ApiError::Unavailable);
        }
        self.store()
            .apply(vec![Mutation::upsert(pending_row(&id, &now))])
            .await?;
        let Some(o) = self.attach(&reference).await? else {
            return Err(ApiError::Unavailable);
        };
        self.log(
            std::slice::from_ref(&reference.id),
            &format!(
                "uploaded {} bytes ({mime}) into context {context}",
                received.size
            ),
        )
        .await?;
        // The worker may have taken the original (queued above) and failed
        // it before this reference was attached, logging the reason to the
        // references it found then: none. The reference gets it here.
        if o.status == Some(BinaryStatus::Error) {
            let why = o.error.as_deref().unwrap_or("processing failed");
            self.log(std::slice::from_ref(&reference.id), &format!("ERROR: {why}"))
                .await?;
        }
        self.inner.wake.notify_one();
        Ok(Registered {
            reference_id: reference.id,
            original_id: id,
            status: o.status.unwrap_or(BinaryStatus::Processing).as_str(),
        })
    }

    /// Moves an upload's lease on, if it is still `lease` on an original
    /// PROCESSING; the new lease, or None when the collector has it.
    async fn renew_upload_lease(&self, id: &str, lease: &str) -> ApiResult<Option<String>> {
        let next = self.later(UPLOAD_LEASE);
        let renewed = self
            .store()
            .cas(Cas {
                row: original_update(id).set("next_attempt", &next),
                condition: Condition::Equals(vec![
                    ("status", Some(BinaryStatus::Processing.as_str().into())),
                    ("next_attempt", Some(lease.into())),
                ]),
                ttl: None,
            })
            .await?;
        Ok(renewed.applied.then_some(next))
    }

    pub(super) async fn by_checksum(&self, checksum: &str) -> ApiResult<Option<String>> {
        let Some(row) = self
            .store()
            .get(&ORIGINALS_CHECKSUM, &[checksum.into()])
            .await?
        else {
            return Ok(None);
        };
        let id = row.string("original_id");
        // Only content that is really there (or on its way) counts. On its
        // way: all of it received (`parts` recorded) and queued; an original
        // whose upload died before that is not, and its pending row is
        // written again in case the process died just before it.
        match self.original(&id).await? {
            Some(o) if o.status == Some(BinaryStatus::Ok) => Ok(Some(id)),
            Some(o) if o.status == Some(BinaryStatus::Processing) && o.parts.is_some() => {
                let due = o.next_attempt.clone().unwrap_or_else(|| self.now());
                self.store()
                    .apply(vec![Mutation::upsert(pending_row(&id, &due))])
                    .await?;
                Ok(Some(id))
            }
            _ => Ok(None),
        }
    }

    /// Best-effort removal of an original nobody ever referenced (a failed
    /// upload); anything left over is the collector's.
    pub(super) async fn drop_original(&self, id: &str, parts: i32) {
        let mut batch: Vec<Mutation> = (0..parts.max(0))
            .map(|p| Mutation::delete(&ORIGINALS_DATA, vec![id.into(), p.into()]))
            .collect();
        batch.push(Mutation::delete(&ORIGINALS, vec![id.into()]));
        for m in batch {
            if let Err(e) = self.store().apply(vec![m]).await {
                tracing::warn!(original_id = id, error = %e, "could not drop an unused original");
                return;
            }
        }
    }
}

/// The original a `urls` row points at; none for no row, or for the empty
/// one the collector leaves when it takes the URL's original (it never
/// deletes the row: a delete cannot be conditional, and a blind one could
/// drop a mapping a registration had just moved to a new original).
pub(super) fn url_target(row: Option<&Row>) -> Option<String> {
    row.and_then(|r| r.text("original_id"))
        .filter(|o| !o.is_empty())
        .map(str::to_owned)
}
