//! Status changes: one or many, each a compare-and-set from the expected status, then its query rows, event and queue row; and how a lost or crashed change is healed.

use super::*;

impl Assignments {
    /// Changes one assignment's status if it is `expected` now.
    pub async fn transition(
        &self,
        who: &Principal,
        key: &AssignmentKey,
        expected: AssignmentStatus,
        to: AssignmentStatus,
    ) -> ApiResult<Assignment> {
        check_transition(who, expected, to)?;
        check_key(key)?;
        self.change_status(key, expected, to, Feed::By(who.sub.as_deref()), None)
            .await
    }

    /// One result per key, in the order given: never all-or-nothing.
    pub async fn transition_many(
        &self,
        who: &Principal,
        keys: Vec<AssignmentKey>,
        expected: AssignmentStatus,
        to: AssignmentStatus,
    ) -> ApiResult<Vec<(AssignmentKey, ApiResult<Assignment>)>> {
        check_transition(who, expected, to)?;
        let feed = Feed::By(who.sub.as_deref());
        each_key(keys, |k| async move {
            self.change_status(&k, expected, to, feed, None).await
        })
        .await
    }

    /// Takes back the caller's own latest change of each key, made within
    /// [`UNDO_WINDOW`], if the assignment is still `expected` as that change
    /// left it: a compare-and-set back to the status before, recorded in the
    /// history and on the change feed like any change. One result per key,
    /// in the order given.
    pub async fn undo_many(
        &self,
        who: &Principal,
        keys: Vec<AssignmentKey>,
        expected: AssignmentStatus,
    ) -> ApiResult<Vec<(AssignmentKey, ApiResult<Assignment>)>> {
        if who.sub.is_none() {
            return Err(ApiError::Unauthenticated);
        }
        each_key(keys, |k| async move { self.undo(who, &k, expected).await })
            .await
    }

    async fn undo(
        &self,
        who: &Principal,
        key: &AssignmentKey,
        expected: AssignmentStatus,
    ) -> ApiResult<Assignment> {
        let actor = who.sub.as_deref().ok_or(ApiError::Unauthenticated)?;
        let Some(current) = self.get(key).await? else {
            return Err(ApiError::NotFound("assignment".into()));
        };
        if current.status != expected {
            return Err(conflict(
                &current,
                &format!("the assignment was not {}", expected.as_str()),
            ));
        }
        let latest = self.history(key).await?.pop();
        let Some(change) = latest.filter(|c| c.to == expected && c.at == current.modified_at) else {
            return Err(ApiError::InvalidTransition(format!(
                "no change made this assignment {}: only a change can be undone (make the opposite change instead)",
                expected.as_str()
            )));
        };
        if change.actor.as_deref() != Some(actor) {
            return Err(ApiError::InvalidTransition(
                "only who made a change can undo it; make the opposite change instead".into(),
            ));
        }
        let made = time::OffsetDateTime::parse(
            &change.at,
            &time::format_description::well_known::Rfc3339,
        )
        .map_err(|_| ApiError::Internal)?;
        if self.clock.now() - made > UNDO_WINDOW {
            return Err(ApiError::InvalidTransition(format!(
                "a change can be undone for {} minutes after it was made; make the opposite change instead",
                UNDO_WINDOW.as_secs() / 60
            )));
        }
        // Only a change the caller may still make.
        check_transition(who, change.from, expected)?;
        self.change_status(
            key,
            expected,
            change.from,
            Feed::By(Some(actor)),
            Some(&change.at),
        )
        .await
    }

    /// Moves `key` from `expected` to `to`; `feed` says whether the change
    /// is reported on the change feed (with its own event) and as whose.
    /// `undoing`: the change being taken back (its time, which the
    /// assignment must still carry); its ddb id is queued when either status
    /// is one the search index sees.
    pub(super) async fn change_status(
        &self,
        key: &AssignmentKey,
        expected: AssignmentStatus,
        to: AssignmentStatus,
        feed: Feed<'_>,
        undoing: Option<&str>,
    ) -> ApiResult<Assignment> {
        // To the nanosecond: this proposal's own value, so that a
        // compare-and-set of unknown outcome is settled by a serial read
        // without taking a concurrent identical transition for this one
        // (`CqlStore::settle_unknown_cas`), and a drain of the outbox tells
        // whether this change applied.
        let modified_at = self.clock.precise();
        let intent = match feed {
            Feed::By(actor) => {
                Some(
                    self.events
                        .intend(actor, key, to, Some(expected), &modified_at),
                )
            }
            Feed::Silent => None,
        };
        if let Some(i) = &intent {
            self.store.apply(vec![i.write()]).await?;
        }
        // A change the search index must see queues its ddb id with its
        // query rows, so that only a change that applied is queued.
        let queued = (to.reindexes() || (undoing.is_some() && expected.reindexes()))
            .then(|| queue_row(&key.ddb_id, &self.clock.rfc3339()));
        // The change in the assignment's history, with its query rows.
        let changed = StatusChange {
            at: modified_at.clone(),
            actor: match feed {
                Feed::By(actor) => actor.map(str::to_owned),
                Feed::Silent => None,
            },
            from: expected,
            to,
        };
        let extra: Vec<Mutation> = queued
            .into_iter()
            .chain([changed.row(key)])
            .map(Mutation::upsert)
            .chain(count_moves(key, Some(expected), to))
            .collect();
        let mut row = Row::new(&OBJECTS_KEYWORDS);
        row.values[..OBJECTS_KEYWORDS.key_len()].clone_from_slice(
            &key.base_key()
                .into_iter()
                .map(Some)
                .collect::<Vec<Option<Value>>>(),
        );
        let row = row
            .set("status", to.as_str())
            .set("modified_at", &modified_at);
        let then = match &intent {
            Some(i) => self.events.with_event(views_of(extra), i),
            None => views_of(extra),
        };
        let mut condition = vec![("status", Some(expected.as_str().into()))];
        if let Some(at) = undoing {
            condition.push(("modified_at", Some(at.into())));
        }
        let began = self.events.now_ms();
        let outcome = self
            .store
            .cas_then(
                Cas {
                    row,
                    condition: Condition::Equals(condition),
                    ttl: None,
                },
                then,
            )
            .await?;
        let current = outcome.current.as_ref().and_then(Assignment::from_row);
        if !outcome.applied
            && let Some(i) = &intent
        {
            self.events.abandon(i).await;
        }
        match (outcome.applied, current) {
            (true, Some(a)) => {
                if let Feed::By(actor) = feed {
                    let change = Change::Assignment {
                        assignment: a.clone(),
                        previous: Some(expected),
                    };
                    self.events.committed(began, actor, change).await;
                }
                self.settle_views(a.clone()).await?;
                Ok(a)
            }
            (true, None) => Err(ApiError::Internal),
            (false, None) => Err(ApiError::NotFound("assignment".into())),
            (false, Some(c)) => {
                // Heals a change whose writes after its compare-and-set were
                // lost (a crash, on Cassandra), whichever change finds it.
                self.sync_views(c.clone()).await?;
                Err(conflict(
                    &c,
                    &format!("the assignment was not {}", expected.as_str()),
                ))
            }
        }
    }

    /// After `a`'s query rows were written with it ([`views_of`]): re-reads
    /// the base row and writes them again while a concurrent writer has
    /// changed it in between (on Cassandra, where the two are not one write).
    pub(super) async fn settle_views(&self, a: Assignment) -> ApiResult<()> {
        match self.changed_since(&a).await? {
            Some(cur) => self.sync_views(cur).await,
            None => Ok(()),
        }
    }

    /// Writes the query tables for `a`, then re-reads the base row and writes
    /// them again while a concurrent writer has changed it in between.
    ///
    /// `a` may be another change's, whose own writes after its
    /// compare-and-set are still under way or were lost (a crash, on
    /// Cassandra), and its release-queue row with them. So when the index
    /// may be behind ([`Self::index_behind`]), its ddb id is queued in the
    /// same batch: once the query rows show `a`, nothing else would find the
    /// missing queue row (a release lists by them). An id queued twice is
    /// read twice by the reindexer; one never queued would leave the index
    /// behind.
    pub(super) async fn sync_views(&self, mut a: Assignment) -> ApiResult<()> {
        for _ in 0..8 {
            let mut writes = a.view_batch();
            if self.index_behind(&a).await? {
                let queued_at = self.clock.rfc3339();
                writes.push(Mutation::upsert(queue_row(&a.key.ddb_id, &queued_at)));
            }
            self.store.apply(writes).await?;
            match self.changed_since(&a).await? {
                Some(cur) => a = cur,
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Whether the search index may not have heard of `a`'s last change:
    /// `a` has a status the index sees and the query rows do not show it yet,
    /// or the query rows still show it under such a status (a change out of
    /// PUBLISHED or DELETED, an undo, whose writes were lost).
    async fn index_behind(&self, a: &Assignment) -> ApiResult<bool> {
        if a.status.reindexes() {
            return Ok(!self.views_written(a).await?);
        }
        let keys = [AssignmentStatus::Published, AssignmentStatus::Deleted]
            .into_iter()
            .map(|status| {
                Assignment {
                    status,
                    ..a.clone()
                }
                .row(&OBJECTS_KEYWORDS_STATUS)
                .key()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let found = self.store.get_many(&OBJECTS_KEYWORDS_STATUS, &keys).await?;
        Ok(found.iter().any(Option::is_some))
    }

    /// Does the status query table hold `a`'s row as it is (written by the
    /// same batch as the release-queue row of the change that made it)?
    pub(super) async fn views_written(&self, a: &Assignment) -> ApiResult<bool> {
        let row = a.row(&OBJECTS_KEYWORDS_STATUS);
        let found = self
            .store
            .get(&OBJECTS_KEYWORDS_STATUS, &row.key()?)
            .await?;
        Ok(found.as_ref() == Some(&row))
    }

    /// The base row of `a` as stored now, if it differs from `a`.
    pub(super) async fn changed_since(&self, a: &Assignment) -> ApiResult<Option<Assignment>> {
        let now = Assignment::stored(&self.store, &a.key).await?;
        Ok(now.filter(|cur| cur != a))
    }
}

/// A bulk change: at most [`MAX_KEYS`] keys, each checked, then `change`d
/// [`WRITE_CONCURRENCY`] at a time; one result per key, in the order given,
/// never all-or-nothing.
async fn each_key<F, Fut>(
    keys: Vec<AssignmentKey>,
    change: F,
) -> ApiResult<Vec<(AssignmentKey, ApiResult<Assignment>)>>
where
    F: Fn(AssignmentKey) -> Fut,
    Fut: std::future::Future<Output = ApiResult<Assignment>>,
{
    use futures::future::{Either, ready};
    if keys.len() > MAX_KEYS {
        return Err(ApiError::bad_input(format!(
            "at most {MAX_KEYS} keys per call"
        )));
    }
    let results = bounded(keys, WRITE_CONCURRENCY, |k| {
        let done = match check_key(&k) {
            Ok(()) => Either::Left(change(k.clone())),
            Err(e) => Either::Right(ready(Err(e))),
        };
        async move { (k, done.await) }
    })
    .await;
    Ok(results)
}
