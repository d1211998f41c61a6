//! Where a body arrives: the crawler hands a fetched URL's answer to link_fetched, an upload's bytes come in, and either ends in a scaled original (or a retry, or an error) that every reference waiting for it sees.

use super::*;
use crate::domains::binaries::imaging;
use crate::domains::binaries::model::*;
use crate::domains::web::{Download, FetchError, Validators};
use crate::kernel::error::{ApiError, ApiResult};
use crate::store::{Cas, Condition, Mutation, Row};

use super::settle::{Finished, checksum_index};

/// What a body the crawler fetched brings to scaling besides its original:
/// written together with the derivatives, before the status and in its call.
pub(super) struct Fetched {
    validators: Validators,
    /// The body, when it fit one chunk and is not written yet.
    unwritten: Option<Vec<u8>>,
    /// No original is known by its checksum yet: the index row is written.
    index_checksum: bool,
    /// The download's log line, with its time.
    downloaded: (String, String),
}

/// Held while a fetched body with these bytes (by checksum) is stored and
/// settled in this process: a body with the same bytes waits for it, then
/// finds its original and folds into it, so that two URLs serving one file,
/// fetched side by side (the crawler records a site's fetches beside its
/// next requests), end on one original.
struct SameBytes {
    binaries: Binaries,
    checksum: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    _held: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for SameBytes {
    fn drop(&mut self) {
        let mut settling = self
            .binaries
            .inner
            .settling
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if settling
            .get(&self.checksum)
            .is_some_and(|l| Arc::ptr_eq(l, &self.lock))
        {
            settling.remove(&self.checksum);
        }
    }
}

impl Binaries {
    /// Waits until no other body with this checksum is being settled in this
    /// process, and holds that until the returned value is dropped.
    async fn same_bytes(&self, checksum: &str) -> SameBytes {
        let lock = self
            .inner
            .settling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(checksum.to_owned())
            .or_default()
            .clone();
        SameBytes {
            binaries: self.clone(),
            checksum: checksum.to_owned(),
            _held: lock.clone().lock_owned().await,
            lock,
        }
    }

    /// What the crawler fetched for `url`: a body is stored and scaled for the
    /// URL's original waiting for one (PROCESSING or RETRY), or revalidates
    /// an OK one (a re-crawl: unchanged content only updates `last_checked`,
    /// changed content becomes a new original the references move to); a
    /// failure settles the waiting original as RETRY or ERROR.
    pub async fn link_fetched(&self, url: &str, arrival: Arrival) -> ApiResult<Settled> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(Settled::default());
        };
        let Some(o) = self.original(&id).await? else {
            return Ok(Settled::default());
        };
        match o.status {
            Some(status @ (BinaryStatus::Processing | BinaryStatus::Retry))
                if o.parts.is_none() =>
            {
                if !self.claim(&o, status).await? {
                    return self.settled(url, &id).await;
                }
                self.inner
                    .in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.clone());
                let mut same_bytes = None;
                let outcome = match arrival {
                    Arrival::Body {
                        body,
                        mime,
                        validators,
                    } => match self.receive_unwritten(&id, body, mime.as_deref()).await {
                        Ok((received, unwritten)) => {
                            same_bytes = Some(self.same_bytes(&received.checksum).await);
                            let fetched = (validators, unwritten);
                            self.body_arrived(&o, url, received, mime, fetched).await
                        }
                        Err(e) => Err(e),
                    },
                    Arrival::NotModified => Err(FetchError::Temporary(
                        "the server answered 304 to an unconditional request".into(),
                    )),
                    Arrival::Failed(e) => Err(e),
                };
                let checksum = match &outcome {
                    Ok(f) => f.original.checksum.clone(),
                    Err(_) => None,
                };
                let settled = self.settle(&o, status, outcome).await;
                drop(same_bytes);
                self.inner
                    .in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                match (settled?, checksum) {
                    // Settled OK by this call: nothing is read again. Should
                    // a registration have given the URL a new original
                    // meanwhile, the crawler's `url_waits`, after it recorded
                    // the fetch, finds that it waits.
                    (true, Some(checksum)) => {
                        Ok(Settled {
                            status: Some(BinaryStatus::Ok),
                            retry_at: None,
                            checksum: Some(checksum),
                            waiting: false,
                            ok_original: Some(id),
                        })
                    }
                    _ => self.settled(url, &id).await,
                }
            }
            Some(BinaryStatus::Ok) => {
                if let Err(e) = self.refetched(&o, arrival).await {
                    self.log_original(&id, &format!("re-crawl failed: {}", e.message()))
                        .await;
                }
                self.settled(url, &id).await
            }
            _ => self.settled(url, &id).await,
        }
    }

    /// The state of the URL's original after a fetch, for the crawler, read
    /// again through the URL: `fetched_for` is the original the body went
    /// to; the URL may have a new one by now, which still waits for a body.
    pub(super) async fn settled(&self, url: &str, fetched_for: &str) -> ApiResult<Settled> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(Settled::default());
        };
        let o = self.original(&id).await?;
        Ok(match o {
            None => Settled::default(),
            Some(o) => Settled {
                retry_at: (o.status == Some(BinaryStatus::Retry))
                    .then(|| o.next_attempt.clone())
                    .flatten(),
                checksum: o.checksum.clone(),
                waiting: o.parts.is_none()
                    && (o.status == Some(BinaryStatus::Retry)
                        || (o.status == Some(BinaryStatus::Processing) && o.id != fetched_for)),
                ok_original: (o.status == Some(BinaryStatus::Ok)).then(|| o.id.clone()),
                status: o.status,
            },
        })
    }

    /// Whether the URL's original waits for a body nobody has given it: a
    /// new original, made for the URL after a fetch of it had looked. An
    /// original that was OK (`ok_original`) never waits again: when the URL
    /// still points at it, it is not read.
    pub async fn url_waits(&self, url: &str, ok_original: Option<&str>) -> ApiResult<bool> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(false);
        };
        if ok_original == Some(id.as_str()) {
            return Ok(false);
        }
        Ok(matches!(
            self.original(&id).await?,
            Some(o) if o.parts.is_none() && o.status == Some(BinaryStatus::Processing)
        ))
    }

    /// The original a URL points at now.
    pub(super) async fn url_original(&self, url: &str) -> ApiResult<Option<String>> {
        let row = self.store().get(&URLS, &[url.into()]).await?;
        Ok(super::register::url_target(row.as_ref()))
    }

    /// Makes the URL's original wait for a body again when it ended in ERROR
    /// (an admin asked for a re-crawl); `true` when it did.
    pub async fn retry_url(&self, url: &str) -> ApiResult<bool> {
        let Some(id) = self.url_original(url).await? else {
            return Ok(false);
        };
        let Some(o) = self.original(&id).await? else {
            return Ok(false);
        };
        if o.status != Some(BinaryStatus::Error) || o.parts.is_some() {
            return Ok(false);
        }
        let reset = self
            .store()
            .cas(Cas {
                row: original_update(&id)
                    .set("status", BinaryStatus::Processing.as_str())
                    .set("attempts", 0)
                    .set("next_attempt", self.now()),
                condition: Condition::Equals(vec![(
                    "status",
                    Some(BinaryStatus::Error.as_str().into()),
                )]),
                ttl: None,
            })
            .await?;
        if reset.applied {
            self.log_original(&id, "an admin asked for a re-crawl")
                .await;
        }
        Ok(reset.applied)
    }

    /// THE SEAM where a fetched body enters the pipeline: its chunks are
    /// stored under `o`; this checks that it is an image, moves the
    /// references to an identical original stored before, or scales it.
    /// (The crawler reaches it through [`Binaries::link_fetched`].)
    pub(super) async fn body_arrived(
        &self,
        o: &Original,
        url: &str,
        received: Received,
        mime: Option<String>,
        (validators, unwritten): (Validators, Option<Vec<u8>>),
    ) -> Result<Finished, FetchError> {
        let sniffed = imaging::sniff(&received.head).ok_or_else(|| {
            FetchError::Permanent(format!(
                "not an image in a supported format (the server said {})",
                mime.as_deref().unwrap_or("nothing")
            ))
        })?;
        let known = self
            .by_checksum(&received.checksum)
            .await
            .map_err(|e| FetchError::Temporary(e.message()))?;
        if let Some(other) = known.clone()
            && other != o.id
        {
            self.log_original(
                &o.id,
                &format!(
                    "identical content is stored as original {other}; the references move there"
                ),
            )
            .await;
            self.move_references(&o.id, &other, url)
                .await
                .map_err(|e| FetchError::Temporary(e.message()))?;
            return Err(FetchError::Permanent(format!(
                "duplicate of original {other}"
            )));
        }
        let o = Original {
            size: Some(received.size as i64),
            parts: Some(received.parts),
            checksum: Some(received.checksum),
            mime: Some(sniffed.to_owned()),
            ..o.clone()
        };
        let downloaded = (
            self.now(),
            format!("downloaded {} bytes ({sniffed})", received.size),
        );
        let fetched = Fetched {
            validators,
            unwritten,
            index_checksum: known.is_none(),
            downloaded: downloaded.clone(),
        };
        let id = o.id.clone();
        let scaled = match self.scale_slot().await {
            Ok(slot) => self.scale(o, Some(fetched), slot).await,
            Err(e) => Err(e),
        };
        if scaled.is_err() {
            // Scaling wrote nothing: the download's line goes before the
            // failure's.
            self.log_lines(&id, &[downloaded], &[]).await;
        }
        scaled
    }

    /// Makes the derivatives of an original (stored, or just fetched),
    /// within a scaling slot and the decode budget. The derivatives, what a
    /// fetched body brings and the log lines up to "derivatives made" are
    /// not written here: `settle` writes them before the status, in the same
    /// call (one transaction on the embedded store).
    pub(super) async fn scale(
        &self,
        o: Original,
        mut fetched: Option<Fetched>,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Finished, FetchError> {
        let unwritten = fetched.as_mut().and_then(|f| f.unwritten.take());
        let in_memory = unwritten.is_some();
        let bytes = match unwritten {
            Some(bytes) => bytes,
            None => self
                .read_all(&o)
                .await
                .map_err(|e| FetchError::Temporary(e.message()))?,
        };
        let limits = self.inner.config.imaging;
        // The largest derivative is scaled from the whole image, each smaller
        // one from the previous result: the first resize holds the most.
        let cost = imaging::decode_cost(&bytes, 0, |w, h| {
            let tallest = DERIVATIVES
                .iter()
                .map(|(bw, bh, _)| imaging::fit(w, h, *bw, *bh).1)
                .max()
                .unwrap_or(0);
            imaging::resize_scratch(w, tallest)
        })
        .map_err(FetchError::Permanent)?;
        let memory = self
            .inner
            .decode_budget
            .reserve(cost)
            .await
            .map_err(FetchError::Permanent)?;
        let boxes: Vec<(u32, u32)> = DERIVATIVES.iter().map(|(w, h, _)| (*w, *h)).collect();
        let (made, bytes) = tokio::task::spawn_blocking(move || {
            let made = imaging::derivatives_of(&bytes, &boxes, &limits);
            drop(memory);
            (made, bytes)
        })
        .await
        .map_err(|e| FetchError::Permanent(format!("scaling failed: {e}")))?;
        let made = made.map_err(FetchError::Permanent)?;
        drop(slot);
        let (w, h, scaled) = (made.width, made.height, made.derivatives);
        let mut writes: Vec<Mutation> = DERIVATIVES
            .iter()
            .zip(scaled)
            .map(|((_, _, table), (_, _, jpeg))| {
                Mutation::upsert(Row::new(table).set("original_id", &o.id).set("data", jpeg))
            })
            .collect();
        if in_memory {
            writes.push(Mutation::upsert(
                Row::new(&ORIGINALS_DATA)
                    .set("original_id", &o.id)
                    .set("part", 0)
                    .set("data", bytes),
            ));
        }
        let mut lines = Vec::new();
        let mut validators = None;
        let mut index = None;
        if let Some(f) = fetched {
            // Written with the status, so it names only an OK original.
            if f.index_checksum
                && let Some(checksum) = &o.checksum
            {
                index = Some(checksum_index(checksum, &o.id));
            }
            lines.push(f.downloaded);
            validators = Some(f.validators);
        }
        lines.push((self.now(), format!("{w}×{h} pixels; 4 derivatives made")));
        let refs = self.refs_of(&o.id).await.unwrap_or_else(|e| {
            tracing::warn!(original = %o.id, error = e.message(), "could not write the log lines");
            Vec::new()
        });
        writes.extend(log_rows(&refs, &lines));
        Ok(Finished {
            original: o,
            width: w as i32,
            height: h as i32,
            validators,
            bulk: writes,
            lines,
            refs,
            index,
        })
    }

    /// Points every reference of `from` (and the URL) at `to`.
    pub(super) async fn move_references(&self, from: &str, to: &str, url: &str) -> ApiResult<()> {
        for id in self.refs_of(from).await? {
            let Some(r) = self.reference(&id).await? else {
                continue;
            };
            let moved = Reference {
                original_id: to.to_owned(),
                ..r.clone()
            };
            if self.attach(&moved).await?.is_none() {
                return Err(ApiError::Unavailable);
            }
            self.store()
                .apply(vec![Mutation::delete(
                    &BINARY_REFS_ORIGINAL,
                    vec![from.into(), id.as_str().into()],
                )])
                .await?;
        }
        self.store()
            .cas(Cas {
                row: Row::new(&URLS).set("url", url).set("original_id", to),
                condition: Condition::Equals(vec![("original_id", Some(from.into()))]),
                ttl: None,
            })
            .await?;
        self.list_url(to, url).await
    }

    /// Streams a fetched body into chunk rows of `id`.
    pub(super) async fn receive(
        &self,
        id: &str,
        body: Download,
        mime: Option<&str>,
    ) -> Result<Received, FetchError> {
        let writer = self.receive_into(id, body, mime).await?;
        Self::received(writer.finish().await)
    }

    /// As [`Self::receive`], but a body that fits one chunk comes back
    /// unwritten (see [`ChunkWriter::finish_unwritten`]).
    async fn receive_unwritten(
        &self,
        id: &str,
        body: Download,
        mime: Option<&str>,
    ) -> Result<(Received, Option<Vec<u8>>), FetchError> {
        let writer = self.receive_into(id, body, mime).await?;
        let (received, unwritten) = match writer.finish_unwritten().await {
            Ok((r, u)) => (Ok(r), u),
            Err(e) => (Err(e), None),
        };
        Ok((Self::received(received)?, unwritten))
    }

    async fn receive_into<'a>(
        &'a self,
        id: &str,
        mut body: Download,
        mime: Option<&str>,
    ) -> Result<ChunkWriter<'a>, FetchError> {
        let mut writer = ChunkWriter::new(self, id);
        while let Some(piece) = body.next_chunk().await? {
            match writer.push(&piece).await {
                Ok(()) => {}
                Err(WriteError::TooLarge) => {
                    return Err(FetchError::Permanent(format!(
                        "the file is larger than the limit of {} bytes",
                        self.inner.config.max_bytes
                    )));
                }
                Err(WriteError::NotAnImage) => {
                    return Err(FetchError::Permanent(format!(
                        "{NOT_AN_IMAGE} (the server said {})",
                        mime.unwrap_or("nothing")
                    )));
                }
                Err(WriteError::Store(e)) => return Err(FetchError::Temporary(e.message())),
            }
        }
        Ok(writer)
    }

    fn received(finished: Result<Received, WriteError>) -> Result<Received, FetchError> {
        match finished {
            Ok(r) if r.size == 0 => Err(FetchError::Permanent("the server sent no bytes".into())),
            Ok(r) => Ok(r),
            Err(WriteError::TooLarge | WriteError::NotAnImage) => {
                Err(FetchError::Permanent("too large".into()))
            }
            Err(WriteError::Store(e)) => Err(FetchError::Temporary(e.message())),
        }
    }
}
