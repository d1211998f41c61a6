//! A wiki's datasets: an import begins one, writes its rows and keys, publishes it with one switch of the current pointer (or fails it); rollbacks and purges of dead, failed and surplus ones.

use super::*;

/// Keys read per page while purging.
pub(super) const PURGE_PAGE: usize = 500;

pub(super) fn key_row(wiki: &str, dataset: &str, kind: i32, key: &str, bucket: i32) -> Mutation {
    Mutation::upsert(
        Row::new(&DATASET_KEYS)
            .set("wiki", wiki)
            .set("id", dataset)
            .set("bucket", bucket)
            .set("kind", kind)
            .set("item", key),
    )
}

impl Suggestions {
    /// Starts a dataset for `wiki` (machine or admin): registered as IMPORTING,
    /// invisible until [`Suggestions::publish`]. Dead imports are purged first.
    pub async fn begin(
        &self,
        who: &Principal,
        wiki: &str,
        source: Option<String>,
    ) -> ApiResult<Dataset> {
        who.require_any(&[Role::Machine, Role::Admin])?;
        check_wiki(wiki)?;
        self.purge_dead(wiki).await?;
        let now = self.clock.precise();
        let ds = Dataset {
            wiki: wiki.to_owned(),
            id: time_uuid(self.clock.now()),
            state: DatasetState::Importing,
            rows: 0,
            bad_lines: 0,
            started: now.clone(),
            finished: None,
            heartbeat: Some(now),
            source,
        };
        self.store
            .apply(vec![Mutation::upsert(ds.to_row())])
            .await?;
        Ok(ds)
    }

    /// Tells later imports that this one is alive.
    pub async fn heartbeat(&self, ds: &Dataset) -> ApiResult<()> {
        let row = Row::new(&DATASETS)
            .set("wiki", &ds.wiki)
            .set("id", &ds.id)
            .set("heartbeat", self.clock.precise());
        self.store
            .cas(Cas {
                row,
                condition: Condition::Equals(vec![(
                    "state",
                    Some(DatasetState::Importing.as_str().into()),
                )]),
                ttl: None,
            })
            .await?;
        Ok(())
    }

    /// Writes records into the (still invisible) dataset `ds`.
    pub async fn write(&self, ds: &Dataset, records: Vec<Record>) -> ApiResult<usize> {
        let (wiki, id) = (ds.wiki.as_str(), ds.id.as_str());
        let mut batch = Vec::with_capacity(records.len() * 2);
        let mut keys: BTreeSet<(i32, String, i32)> = BTreeSet::new();
        let n = records.len();
        for r in records {
            match r {
                Record::Suggestion(mut s) => {
                    s.wiki = wiki.to_owned();
                    s.id = id.to_owned();
                    keys.insert((0, s.page_id.to_string(), bucket(s.page_id)));
                    batch.push(Mutation::upsert(s.to_row()));
                }
                Record::Title {
                    title,
                    page_id,
                    page_rev,
                } => {
                    keys.insert((1, title.clone(), bucket(page_id)));
                    batch.push(Mutation::upsert(
                        Row::new(&TITLE_CACHE)
                            .set("wiki", wiki)
                            .set("title", title)
                            .set("id", id)
                            .set("page_id", page_id)
                            .set_opt("page_rev", page_rev),
                    ));
                }
                Record::InstanceOf {
                    page_id,
                    page_rev,
                    instance_of,
                } => {
                    keys.insert((0, page_id.to_string(), bucket(page_id)));
                    batch.push(Mutation::upsert(
                        Row::new(&INSTANCEOF_CACHE)
                            .set("wiki", wiki)
                            .set("page_id", page_id)
                            .set("id", id)
                            .set_opt("page_rev", page_rev)
                            .set("instance_of", instance_of),
                    ));
                }
            }
        }
        // The keys first: a dataset's rows are always findable to purge it.
        let key_rows = keys
            .iter()
            .map(|(kind, key, b)| key_row(wiki, id, *kind, key, *b))
            .collect();
        self.store.write_bulk(key_rows).await?;
        self.store.write_bulk(batch).await?;
        Ok(n)
    }

    /// Completes `ds` and makes it current (one compare-and-set of the pointer),
    /// then purges complete datasets beyond the newest `keep` before it.
    pub async fn publish(
        &self,
        ds: &Dataset,
        rows: i64,
        bad_lines: i64,
        keep: usize,
    ) -> ApiResult<Dataset> {
        let done = Dataset {
            state: DatasetState::Complete,
            rows,
            bad_lines,
            finished: Some(self.clock.precise()),
            ..ds.clone()
        };
        self.store
            .apply(vec![Mutation::upsert(done.to_row())])
            .await?;
        self.switch(&ds.wiki, &ds.id).await?;
        crate::kernel::metrics::suggestion_switch(&ds.wiki);
        self.purge_beyond(&ds.wiki, keep).await?;
        Ok(done)
    }

    /// Points `wiki` at `id` (whatever it pointed at: the last import to finish
    /// wins; each switch is one write).
    pub(super) async fn switch(&self, wiki: &str, id: &str) -> ApiResult<()> {
        for _ in 0..16 {
            let now = self.current(wiki).await?;
            let outcome = self
                .store
                .cas(Cas {
                    row: Row::new(&CURRENT)
                        .set("wiki", wiki)
                        .set("id", id)
                        .set("switched", self.clock.precise()),
                    condition: Condition::Equals(vec![("id", now.map(Value::from))]),
                    ttl: None,
                })
                .await?;
            if outcome.applied {
                return Ok(());
            }
        }
        Err(ApiError::Conflict {
            message: "the current dataset kept changing; try again".into(),
            current: None,
        })
    }

    /// Marks `ds` FAILED and removes its rows; it was never visible.
    pub async fn fail(&self, ds: &Dataset, rows: i64, bad_lines: i64) -> ApiResult<()> {
        let failed = Dataset {
            state: DatasetState::Failed,
            rows,
            bad_lines,
            finished: Some(self.clock.precise()),
            ..ds.clone()
        };
        self.store
            .apply(vec![Mutation::upsert(failed.to_row())])
            .await?;
        self.purge_dataset(&failed).await
    }

    /// Makes the newest complete dataset before the current one current again
    /// (machine or admin). The one it replaces stays in the registry.
    pub async fn rollback(&self, who: &Principal, wiki: &str) -> ApiResult<Dataset> {
        who.require_any(&[Role::Machine, Role::Admin])?;
        let Some(current) = self.current(wiki).await? else {
            return Err(ApiError::NotFound(format!("a current dataset of {wiki}")));
        };
        let all = self.datasets(wiki).await?;
        let Some(cur) = all.iter().find(|d| d.id == current) else {
            return Err(ApiError::Internal);
        };
        let Some(previous) = all
            .iter()
            .find(|d| d.state == DatasetState::Complete && d.started < cur.started)
        else {
            return Err(ApiError::NotFound(format!(
                "a complete dataset of {wiki} before {current}"
            )));
        };
        let outcome = self
            .store
            .cas(Cas {
                row: Row::new(&CURRENT)
                    .set("wiki", wiki)
                    .set("id", &previous.id)
                    .set("switched", self.clock.precise()),
                condition: Condition::Equals(vec![("id", Some(current.as_str().into()))]),
                ttl: None,
            })
            .await?;
        if !outcome.applied {
            return Err(ApiError::Conflict {
                message: "the current dataset changed meanwhile".into(),
                current: outcome
                    .current
                    .and_then(|r| r.text("id").map(str::to_owned)),
            });
        }
        crate::kernel::metrics::suggestion_switch(wiki);
        Ok(previous.clone())
    }

    /// Removes dead or failed imports and complete datasets beyond the newest
    /// `keep` before the current one (machine or admin). Returns the ids purged.
    pub async fn purge(&self, who: &Principal, wiki: &str, keep: usize) -> ApiResult<Vec<String>> {
        who.require_any(&[Role::Machine, Role::Admin])?;
        let mut purged = self.purge_dead(wiki).await?;
        purged.extend(self.purge_beyond(wiki, keep).await?);
        Ok(purged)
    }

    pub(super) async fn purge_dead(&self, wiki: &str) -> ApiResult<Vec<String>> {
        let now = self.clock.now();
        let dead = |d: &Dataset| match d.state {
            DatasetState::Failed => true,
            DatasetState::Importing => d
                .heartbeat
                .as_deref()
                .and_then(|h| {
                    time::OffsetDateTime::parse(h, &time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .is_none_or(|h| (now - h).whole_seconds() >= self.dead_after),
            _ => false,
        };
        let mut purged = Vec::new();
        for d in self.datasets(wiki).await?.into_iter().filter(dead) {
            self.purge_dataset(&d).await?;
            purged.push(d.id);
        }
        Ok(purged)
    }

    pub(super) async fn purge_beyond(&self, wiki: &str, keep: usize) -> ApiResult<Vec<String>> {
        let current = self.current(wiki).await?;
        let all = self.datasets(wiki).await?;
        let Some(cur) = all.iter().find(|d| Some(&d.id) == current.as_ref()) else {
            return Ok(Vec::new());
        };
        let older: Vec<&Dataset> = all
            .iter()
            .filter(|d| d.state == DatasetState::Complete && d.started < cur.started)
            .collect();
        let mut purged = Vec::new();
        for d in older.into_iter().skip(keep) {
            self.purge_dataset(d).await?;
            purged.push(d.id.clone());
        }
        Ok(purged)
    }

    /// Deletes every row of `ds` (walking its key list), then marks it PURGED.
    pub(super) async fn purge_dataset(&self, ds: &Dataset) -> ApiResult<()> {
        let (wiki, id) = (ds.wiki.as_str(), ds.id.as_str());
        for b in 0..KEY_BUCKETS {
            let partition = vec![Value::from(wiki), Value::from(id), Value::Int(b)];
            let keys = Slice::partition(partition.clone()).limit(PURGE_PAGE);
            let mut pages = std::pin::pin!(pages(self.store.as_ref(), &DATASET_KEYS, keys));
            while let Some(page) = pages.try_next().await? {
                let mut deletes = Vec::new();
                for r in &page.rows {
                    let key = r.string("item");
                    if r.int("kind") == Some(1) {
                        deletes.push(Mutation::delete(
                            &TITLE_CACHE,
                            vec![wiki.into(), key.as_str().into(), id.into()],
                        ));
                    } else if let Ok(p) = key.parse::<i32>() {
                        for t in [&SUGGESTIONS, &INSTANCEOF_CACHE] {
                            deletes.push(Mutation::delete(
                                t,
                                vec![wiki.into(), Value::Int(p), id.into()],
                            ));
                        }
                    }
                }
                self.store.write_bulk(deletes).await?;
            }
            self.store
                .apply(vec![Mutation::delete(&DATASET_KEYS, partition)])
                .await?;
        }
        let purged = Dataset {
            state: DatasetState::Purged,
            ..ds.clone()
        };
        self.store
            .apply(vec![Mutation::upsert(purged.to_row())])
            .await?;
        Ok(())
    }
}
