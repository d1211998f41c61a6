//! Release runs and the reindexer's queue: a run publishes a portal's
//! ACCEPTED assignments (each a compare-and-set, so nothing is published
//! twice, that queues its ddb id with its query rows); the reindexer reads
//! the queue and acknowledges what it has reindexed.

use super::*;

impl Assignments {
    /// The ddb ids waiting for the reindexer, in id order.
    pub async fn release_queue(
        &self,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<Listed<String>> {
        let slice = Slice::partition(vec![]).limit(first).after(after);
        let page = self.store.merged_slice(&RELEASE_DDBIDS, &all_buckets(&[]), &slice).await?;
        Ok(page.listed(|r| Some(r.string("id"))))
    }

    /// The portal's last successful and last failed run (successful first).
    pub async fn release_runs(&self, portal_id: &str) -> ApiResult<Vec<ReleaseRun>> {
        let page = self
            .store
            .slice(
                &RELEASE_RUNS,
                &Slice::partition(vec![portal_id.into()])
                    .limit(2)
                    .reverse(true),
            )
            .await?;
        Ok(page.rows.iter().map(ReleaseRun::from_row).collect())
    }

    /// The portal's recorded release runs, newest first (`first` of them),
    /// with who ran each.
    pub async fn release_log(&self, portal_id: &str, first: usize) -> ApiResult<Vec<ReleaseRun>> {
        let page = self
            .store
            .slice(
                &RELEASE_LOG,
                &Slice::partition(vec![portal_id.into()]).limit(first),
            )
            .await?;
        Ok(page.rows.iter().map(ReleaseRun::from_row).collect())
    }

    /// Publishes the portal's ACCEPTED assignments and enqueues the ddb ids of
    /// those it published. Safe to run again after a crash, and concurrently:
    /// every publication is an LWT from ACCEPTED, and the queue is a set.
    /// A portal that needs a second editor's approval refuses a run
    /// (APPROVAL_REQUIRED): `request_release` and `approve_release` then.
    pub async fn run_release(&self, who: &Principal, portal_id: &str) -> ApiResult<ReleaseRun> {
        who.require(Role::Editor)?;
        self.check_portal(portal_id).await?;
        if self.release_approval(portal_id).await?.required {
            return Err(ApiError::Refused {
                code: "APPROVAL_REQUIRED",
                message: format!(
                    "a release of portal {portal_id} needs a second editor: ask for it with requestRelease, another editor runs it with approveRelease"
                ),
            });
        }
        self.release(who, portal_id, None).await
    }

    /// The portal is one (a top-level category), or BAD_USER_INPUT.
    pub(super) async fn check_portal(&self, portal_id: &str) -> ApiResult<()> {
        match self.is_portal(portal_id).await? {
            Some(true) => Ok(()),
            _ => Err(ApiError::bad_input(format!("unknown portal {portal_id}"))),
        }
    }

    /// Whether `id` names a portal (`Some(true)`), a category inside one
    /// (`Some(false)`) or nothing (`None`).
    pub(super) async fn is_portal(&self, id: &str) -> ApiResult<Option<bool>> {
        Ok(self
            .themes
            .category(id)
            .await?
            .map(|c| c.parent_id.is_none()))
    }

    /// Publishes and records the run as `who`'s, with `note` in its message.
    pub(super) async fn release(
        &self,
        who: &Principal,
        portal_id: &str,
        note: Option<String>,
    ) -> ApiResult<ReleaseRun> {
        let nothing = || ApiError::Refused {
            code: "NOTHING_TO_RELEASE",
            message: format!(
                "nothing in portal {portal_id} is ACCEPTED, so there is nothing to release; the last run stays as it was"
            ),
        };
        match self.publish_accepted(portal_id).await {
            // Nothing was ACCEPTED, or another run published it first: not
            // a run of its own, so the last one stays.
            Ok(0) => Err(nothing()),
            Ok(published) => {
                let run = ReleaseRun {
                    portal_id: portal_id.to_owned(),
                    successful: true,
                    time: self.clock.rfc3339(),
                    published,
                    message: note,
                    actor: who.sub.clone(),
                };
                self.record(who, &run).await?;
                Ok(run)
            }
            Err(e) => {
                let run = ReleaseRun {
                    portal_id: portal_id.to_owned(),
                    successful: false,
                    time: self.clock.rfc3339(),
                    published: 0,
                    message: Some(format!("{}: {}", e.code(), e.message())),
                    actor: who.sub.clone(),
                };
                if let Err(record) = self.record(who, &run).await {
                    tracing::error!(
                        error = record.message(),
                        "could not record a failed release run"
                    );
                }
                Err(e)
            }
        }
    }

    /// Records a run and its event, as one batch: a run is on the feed
    /// exactly when it is recorded.
    async fn record(&self, who: &Principal, run: &ReleaseRun) -> ApiResult<()> {
        let change = Change::Release(run.clone());
        let mut writes = vec![
            Mutation::upsert(run.row_in(&RELEASE_RUNS)),
            Mutation::Upsert {
                row: run.row_in(&RELEASE_LOG),
                ttl: Some(RELEASE_LOG_DAYS * 24 * 3600),
            },
        ];
        writes.extend(self.events.writes(who.sub.as_deref(), vec![change.clone()]));
        let began = self.events.now_ms();
        self.store.apply(writes).await?;
        self.events
            .committed(began, who.sub.as_deref(), change)
            .await;
        Ok(())
    }

    async fn publish_accepted(&self, portal_id: &str) -> ApiResult<i64> {
        let mut published = 0;
        let mut after = None;
        loop {
            let page = self
                .list(
                    portal_id,
                    Some(AssignmentStatus::Accepted),
                    None,
                    RELEASE_PAGE,
                    after,
                )
                .await?;
            let keys: Vec<AssignmentKey> = page.items.iter().map(|(_, a)| a.key.clone()).collect();
            let results = bounded(keys, WRITE_CONCURRENCY, |k| async move {
                self.change_status(
                    &k,
                    AssignmentStatus::Accepted,
                    AssignmentStatus::Published,
                    Feed::Silent,
                    None,
                )
                .await
            })
            .await;
            for r in results {
                match r {
                    Ok(_) => published += 1,
                    // Rejected or published by someone else meanwhile: not ours to publish.
                    Err(ApiError::Conflict { .. } | ApiError::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            if !page.has_next {
                return Ok(published);
            }
            after = page.items.last().map(|(c, _)| c.clone());
        }
    }

    /// Removes ids from the release queue; returns how many were in it.
    pub async fn acknowledge(&self, who: &Principal, ids: Vec<String>) -> ApiResult<i32> {
        who.require(Role::Machine)?;
        if ids.len() > MAX_ACK {
            return Err(ApiError::bad_input(format!(
                "at most {MAX_ACK} ids per call"
            )));
        }
        let ids: Vec<String> = ids
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for id in &ids {
            check_id("ddb", id)?;
        }
        let keys: Vec<Vec<Value>> = ids.iter().map(|i| queue_key(i)).collect();
        let found = self.store.get_many(&RELEASE_DDBIDS, &keys).await?;
        let present: Vec<Vec<Value>> = keys
            .into_iter()
            .zip(found)
            .filter_map(|(k, r)| r.map(|_| k))
            .collect();
        for chunk in present.chunks(QUEUE_BATCH) {
            self.store
                .apply(
                    chunk
                        .iter()
                        .map(|k| Mutation::delete(&RELEASE_DDBIDS, k.clone()))
                        .collect(),
                )
                .await?;
        }
        Ok(present.len() as i32)
    }
}
