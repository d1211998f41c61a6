//! Settling a piece of work on an original: what scaling made is stored
//! with the OK status (in one call), or the original is failed for good
//! (ERROR) or for now (RETRY), and it leaves the queue.

use super::*;
use crate::domains::binaries::model::*;
use crate::domains::web::{FetchError, Validators};
use crate::kernel::error::ApiResult;
use crate::store::buckets::bucket_of;
use crate::store::{BulkThenCasError, Cas, Condition, Mutation, Row};

/// What scaling an original found out and made, for `settle` to store.
pub(super) struct Finished {
    pub(super) original: Original,
    pub(super) width: i32,
    pub(super) height: i32,
    pub(super) validators: Option<Validators>,
    /// The derivatives, what a fetched body brings, and the log lines up to
    /// "derivatives made": written before the status, in its call.
    pub(super) bulk: Vec<Mutation>,
    /// Those log lines, again for the log should the bulk not be stored.
    pub(super) lines: Vec<(String, String)>,
    /// The references the log lines go to (the "OK" line follows).
    pub(super) refs: Vec<String>,
    /// The checksum's index row, written with the status.
    pub(super) index: Option<Mutation>,
}

impl Finished {
    /// The checksum's index row goes with the status (a re-crawl's
    /// replacement, whose content no original had).
    pub(super) fn indexed(mut self) -> Self {
        if let Some(checksum) = &self.original.checksum {
            self.index = Some(checksum_index(checksum, &self.original.id));
        }
        self
    }
}

/// The checksum's index row: the original stored with this content.
pub(super) fn checksum_index(checksum: &str, original_id: &str) -> Mutation {
    Mutation::upsert(
        Row::new(&ORIGINALS_CHECKSUM)
            .set("checksum", checksum)
            .set("original_id", original_id),
    )
}

impl Binaries {
    /// Records the outcome of a claimed piece of work; `true` when its status
    /// was written (the original was still as claimed).
    pub(super) async fn settle(
        &self,
        o: &Original,
        status: BinaryStatus,
        outcome: Result<Finished, FetchError>,
    ) -> ApiResult<bool> {
        let id = o.id.as_str();
        let expect = Condition::Equals(vec![("status", Some(status.as_str().into()))]);
        match outcome {
            Ok(f) => {
                let now = self.now();
                let mut row = original_update(id)
                    .set("status", BinaryStatus::Ok.as_str())
                    .set("width", f.width)
                    .set("height", f.height)
                    .set("last_checked", &now)
                    .set("next_attempt", &now);
                if let (Some(size), Some(parts), Some(checksum), Some(mime)) = (
                    f.original.size,
                    f.original.parts,
                    f.original.checksum.clone(),
                    f.original.mime.clone(),
                ) {
                    row = row
                        .set("size", size)
                        .set("parts", parts)
                        .set("checksum", &checksum)
                        .set("mime", mime);
                }
                if let Some(v) = &f.validators {
                    row = row
                        .set_opt("e_tag", v.e_tag.clone())
                        .set_opt("last_modified", v.last_modified.clone());
                }
                // With the status (in its transaction on the embedded store,
                // right after it on Cassandra): the "OK" line, the checksum's
                // index row, out of the queue. Before it, in the same call
                // (one transaction on the embedded store): what scaling made.
                let mut then = log_rows(&f.refs, &[(self.now(), "OK".to_owned())]);
                then.extend(f.index);
                then.push(unqueue_row(id));
                let cas = Cas {
                    row,
                    condition: expect,
                    ttl: None,
                };
                let then: crate::store::Heal = std::sync::Arc::new(move |_| then.clone());
                match self.store().write_bulk_then_cas(f.bulk, cas, then).await {
                    Ok(written) => Ok(written.applied),
                    // The derivatives are stored; the status may or may not
                    // be (a timed-out compare-and-set): as any failed
                    // compare-and-set, the caller is told, and the original's
                    // lease brings it back to the worker.
                    Err(BulkThenCasError {
                        error,
                        bulk_stored: true,
                    }) => Err(error.into()),
                    Err(BulkThenCasError { error: e, .. }) => {
                        // The text goes into the public log: the store's own
                        // message (a driver's) stays in ours.
                        tracing::warn!(error = %e, original = id, "storing the derivatives failed");
                        if let Err(e) = self.write_lines(&f.refs, &f.lines).await {
                            tracing::warn!(original = id, error = e.message(), "could not write the log lines");
                        }
                        Box::pin(self.settle(
                            o,
                            status,
                            Err(FetchError::Temporary(
                                "the store did not take the derivatives".into(),
                            )),
                        ))
                        .await
                    }
                }
            }
            Err(FetchError::Permanent(e)) => {
                let message = format!("ERROR: {e}");
                let logged = self.log_original(id, &message).await;
                let failed = self
                    .store()
                    .cas(Cas {
                        row: original_update(id)
                            .set("status", BinaryStatus::Error.as_str())
                            .set("error", &e),
                        condition: expect,
                        ttl: None,
                    })
                    .await?;
                // A reference attached meanwhile (an upload's, attached after
                // its original was queued) gets the reason too; one attached
                // from now on sees ERROR and logs it itself.
                if failed.applied {
                    self.log_original_except(id, &message, &logged).await;
                }
                self.unqueue(id).await?;
                Ok(failed.applied)
            }
            Err(FetchError::Temporary(e)) => {
                let attempts = o.attempts + 1;
                if attempts >= self.inner.config.max_attempts {
                    return Box::pin(self.settle(
                        &Original {
                            attempts,
                            ..o.clone()
                        },
                        status,
                        Err(FetchError::Permanent(format!(
                            "{e} (gave up after {attempts} attempts)"
                        ))),
                    ))
                    .await;
                }
                let delay = self.inner.config.retry_base * 2u32.saturating_pow(attempts as u32 - 1);
                let due = self.later(delay);
                self.log_original(
                    id,
                    &format!("RETRY: {e} (attempt {attempts}; next at {due})"),
                )
                .await;
                let retried = self
                    .store()
                    .cas(Cas {
                        row: original_update(id)
                            .set("status", BinaryStatus::Retry.as_str())
                            .set("attempts", attempts)
                            .set("next_attempt", &due)
                            .set("error", &e),
                        condition: expect,
                        ttl: None,
                    })
                    .await?;
                // Stored bytes are retried by the worker; a URL's body by
                // the crawler, which re-queues the link for `due`.
                if o.parts.is_some() || o.url.is_none() {
                    self.store()
                        .apply(vec![Mutation::upsert(pending_row(id, &due))])
                        .await?;
                }
                Ok(retried.applied)
            }
        }
    }

    pub(super) async fn unqueue(&self, id: &str) -> ApiResult<()> {
        self.store().apply(vec![unqueue_row(id)]).await?;
        Ok(())
    }
}

fn unqueue_row(id: &str) -> Mutation {
    Mutation::delete(&PENDING_ORIGINALS, vec![bucket_of(id).into(), id.into()])
}
