//! Writing keywords: one through the API under a compare-and-set, many by the importer in chunks, and the index rows (hierarchies, search) that follow from a keyword's categories.

use super::*;
use crate::store::Contention;

/// A keyword of an import chunk that changes: its input, the row it was
/// derived from, and its index writes.
pub(super) struct Draft {
    slot: usize,
    input: KeywordInput,
    current: Option<Row>,
    keyword: Keyword,
    delta: Vec<Mutation>,
}

/// A row's table and full contents, to compare index rows by value.
pub(super) fn row_identity(row: &Row) -> Option<Vec<u8>> {
    let mut id = row.table.name.as_bytes().to_vec();
    id.push(0);
    serde_json::to_writer(&mut id, &row.values).ok()?;
    Some(id)
}

/// The portals a keyword is indexed under, from its categories in `categories`.
/// A category missing there (deleted since) still left index rows: its root is
/// the first of the keyword's hierarchical ids.
pub(super) fn portals_of(k: &Keyword, categories: &HashMap<String, Category>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for c in &k.category_ids {
        let portal = match categories.get(c) {
            Some(cat) => Some(cat.portal_id().to_owned()),
            None => k.hierarchical_category_ids.first().cloned(),
        };
        out.extend(portal);
    }
    out
}

/// The writes that take a keyword's index rows from `old`'s to `new`'s:
/// deletes of the rows only `old` has, upserts of every row of `new`.
pub(super) fn index_delta(
    old: Option<&Keyword>,
    new: Option<&Keyword>,
    categories: &HashMap<String, Category>,
) -> ApiResult<Vec<Mutation>> {
    let new_rows = new.map_or_else(Vec::new, |k| index_rows(k, &portals_of(k, categories)));
    let mut out = Vec::new();
    if let Some(old) = old {
        let keep: std::collections::HashSet<Vec<u8>> =
            new_rows.iter().filter_map(row_identity).collect();
        for row in index_rows(old, &portals_of(old, categories)) {
            if row_identity(&row).is_none_or(|id| !keep.contains(&id)) {
                out.push(Mutation::delete(row.table, row.key()?));
            }
        }
    }
    out.extend(new_rows.into_iter().map(Mutation::upsert));
    Ok(out)
}

/// The same kind of failure again, for every keyword of a chunk that one
/// store failure stopped (the failure itself is logged once).
pub(super) fn same_kind(e: &ApiError) -> ApiError {
    match e {
        ApiError::Unavailable => ApiError::Unavailable,
        ApiError::StorageFull => ApiError::StorageFull,
        _ => ApiError::Internal,
    }
}

/// Every index row derived from a keyword.
pub(super) fn index_rows(k: &Keyword, portals: &BTreeSet<String>) -> Vec<Row> {
    let mut rows = Vec::new();
    for c in &k.category_ids {
        rows.push(
            Row::new(&KEYWORDS_CATEGORIES)
                .set("category_id", c)
                .set("keyword_id", &k.id),
        );
    }
    for c in &k.hierarchical_category_ids {
        rows.push(
            Row::new(&KEYWORDS_HIERARCHIES)
                .set("category_id", c)
                .set("keyword_id", &k.id),
        );
    }
    let mut seen = BTreeSet::new();
    for label in std::iter::once(&k.label).chain(k.synonyms.iter()) {
        for (bucket, kind, text) in search::entries(&search::normalize(label)) {
            for p in portals {
                if seen.insert((p.clone(), bucket.clone(), kind, text.clone())) {
                    rows.push(
                        Row::new(&KEYWORDS_SEARCH)
                            .set("category_id", p)
                            .set("bucket", &bucket)
                            .set("kind", kind)
                            .set("search", &text)
                            .set("keyword_id", &k.id),
                    );
                }
            }
        }
    }
    rows
}

impl Themes {
    /// Creates or replaces a keyword (admin).
    ///
    /// The keyword's base row is the point where concurrent writers are
    /// ordered: it is written under a compare-and-set against the row this
    /// write was derived from. A writer that loses derives its keyword again
    /// from the row that won and tries again (an upsert replaces the whole
    /// keyword, so the later write wins whole, as if the two had come one
    /// after the other); after [`KEYWORD_TRIES`] lost rounds it is CONFLICT.
    pub async fn upsert_keyword(&self, who: &Principal, input: KeywordInput) -> ApiResult<Keyword> {
        who.require(Role::Admin)?;
        check_id("keyword", &input.id)?;
        let current = self
            .store
            .get(&KEYWORDS, &[input.id.as_str().into()])
            .await?;
        let gnd: Vec<String> = input
            .gnd_entity_id
            .iter()
            .map(|g| g.trim().to_owned())
            .filter(|g| !g.is_empty())
            .collect();
        let gnd = self.gnd_entities_by_id(&gnd).await?;
        self.write_keyword(input, current, HashMap::new(), &gnd)
            .await
    }

    /// Writes many keywords (admin), for importers: the same rules and
    /// outcomes as [`Themes::upsert_keyword`] one by one, in far fewer round
    /// trips. The old keywords, their categories and GND entity types are
    /// read in one call each; the chunk's index rows (and deletes of old
    /// ones) are written first, as one [`crate::store::Store::write_bulk`]
    /// (unlogged per partition on Cassandra); then the keyword rows: the new
    /// ones through [`crate::store::Store::insert_new`], the changed ones each
    /// under its compare-and-set, many in flight (the embedded store commits
    /// them together). A keyword row that is stored and equal means its index
    /// rows were written; an import killed between the two finds the old row
    /// on its rerun and writes them again.
    pub async fn import_keywords(
        &self,
        who: &Principal,
        inputs: Vec<KeywordInput>,
    ) -> ApiResult<Vec<ApiResult<Keyword>>> {
        who.require(Role::Admin)?;
        // One id twice: the later one is written after the earlier, in a
        // later round, as if the file were read in order.
        let mut out: Vec<Option<ApiResult<Keyword>>> = inputs.iter().map(|_| None).collect();
        let mut pending: Vec<(usize, KeywordInput)> = inputs.into_iter().enumerate().collect();
        while !pending.is_empty() {
            let mut seen = std::collections::HashSet::new();
            let (round, later): (Vec<_>, Vec<_>) = pending
                .into_iter()
                .partition(|(_, i)| seen.insert(i.id.clone()));
            for (slot, r) in self.import_distinct(round).await? {
                out[slot] = Some(r);
            }
            pending = later;
        }
        Ok(out
            .into_iter()
            .map(|r| r.unwrap_or(Err(ApiError::Internal)))
            .collect())
    }

    pub(super) async fn import_distinct(
        &self,
        inputs: Vec<(usize, KeywordInput)>,
    ) -> ApiResult<Vec<(usize, ApiResult<Keyword>)>> {
        let readable: Vec<String> = inputs
            .iter()
            .map(|(_, i)| i.id.clone())
            .filter(|i| check_id("keyword", i).is_ok())
            .collect();
        let keys: Vec<Vec<Value>> = readable.iter().map(|i| vec![i.into()]).collect();
        let mut stored: HashMap<String, Row> = readable
            .into_iter()
            .zip(self.store.get_many(&KEYWORDS, &keys).await?)
            .filter_map(|(id, row)| Some((id, row?)))
            .collect();
        let mut wanted = BTreeSet::new();
        let mut gnd = BTreeSet::new();
        for (_, i) in &inputs {
            wanted.extend(i.category_ids.iter().map(|c| c.trim().to_owned()));
            if let Some(g) = &i.gnd_entity_id {
                gnd.insert(g.trim().to_owned());
            }
        }
        for row in stored.values() {
            wanted.extend(row.text_list("category_ids"));
        }
        let wanted: Vec<String> = wanted.into_iter().filter(|c| !c.is_empty()).collect();
        let gnd: Vec<String> = gnd.into_iter().filter(|g| !g.is_empty()).collect();
        let (categories, gnd) =
            futures::try_join!(self.categories(&wanted), self.gnd_entities_by_id(&gnd))?;

        let mut out = Vec::new();
        let mut drafts = Vec::new();
        for (slot, input) in inputs {
            let current = stored.remove(&input.id);
            let old = current.as_ref().map(Keyword::from_row);
            match self.derive_keyword(input.clone(), old.as_ref(), &categories, &gnd) {
                Err(e) => out.push((slot, Err(e))),
                Ok(k) if old.as_ref() == Some(&k) => out.push((slot, Ok(k))),
                Ok(keyword) => match index_delta(old.as_ref(), Some(&keyword), &categories) {
                    Err(e) => out.push((slot, Err(e))),
                    Ok(delta) => drafts.push(Draft {
                        slot,
                        input,
                        current,
                        keyword,
                        delta,
                    }),
                },
            }
        }
        if drafts.is_empty() {
            return Ok(out);
        }
        let slots: Vec<usize> = drafts.iter().map(|d| d.slot).collect();
        match self.commit_drafts(drafts, &categories, &gnd).await {
            Ok(written) => out.extend(written),
            Err(e) => out.extend(slots.into_iter().map(|slot| (slot, Err(same_kind(&e))))),
        }
        Ok(out)
    }

    /// Index rows first, keyword rows last (see [`Themes::import_keywords`]).
    pub(super) async fn commit_drafts(
        &self,
        drafts: Vec<Draft>,
        categories: &HashMap<String, Category>,
        gnd: &HashMap<String, GndEntity>,
    ) -> ApiResult<Vec<(usize, ApiResult<Keyword>)>> {
        let (mut fresh, changed): (Vec<Draft>, Vec<Draft>) =
            drafts.into_iter().partition(|d| d.current.is_none());
        // A new keyword's index rows are written once; a changed one's again
        // after its compare-and-set.
        let mut index: Vec<Mutation> = fresh.iter_mut().flat_map(|d| d.delta.drain(..)).collect();
        index.extend(changed.iter().flat_map(|d| d.delta.iter().cloned()));
        self.store.write_bulk(index).await?;
        let mut won = Vec::new();
        let mut lost = Vec::new();
        let mut out = Vec::new();
        if !fresh.is_empty() {
            // A row found was written since the read: its index rows are its
            // writer's, so nothing to heal here; this keyword is written
            // over it like a changed one.
            let heal: crate::store::Heal = std::sync::Arc::new(|_: &Row| Vec::new());
            let inserts = fresh
                .iter()
                .map(|d| (d.keyword.to_row(), Vec::new()))
                .collect();
            let found = self.store.insert_new(inserts, heal).await?;
            for (d, f) in fresh.into_iter().zip(found) {
                match f {
                    None => won.push(d),
                    Some(row) => lost.push((d, Some(row))),
                }
            }
        }
        let tried = crate::kernel::bounded(changed, BULK_WRITES, |d| async move {
            let r = self
                .swap_keyword(&d.keyword, d.current.as_ref(), d.delta.clone())
                .await;
            (d, r)
        })
        .await;
        for (d, r) in tried {
            match r {
                Ok(None) => won.push(d),
                Ok(Some(now)) => lost.push((d, now)),
                Err(e) => out.push((d.slot, Err(e))),
            }
        }
        self.settle(
            won.iter().map(|d| d.keyword.clone()).collect(),
            categories.clone(),
        )
        .await?;
        out.extend(won.into_iter().map(|d| (d.slot, Ok(d.keyword))));
        let retried = crate::kernel::bounded(lost, BULK_WRITES, |(d, now)| async move {
            let r = self
                .write_keyword(d.input, now, categories.clone(), gnd)
                .await;
            (d.slot, r)
        })
        .await;
        out.extend(retried);
        Ok(out)
    }

    /// Writes `input` over the stored row `current` (derives the keyword
    /// from it, writes the index rows that change, then the keyword row
    /// under a compare-and-set against `current`), and again over whatever
    /// row beat it, at most [`KEYWORD_TRIES`] times.
    pub(super) async fn write_keyword(
        &self,
        input: KeywordInput,
        mut current: Option<Row>,
        mut categories: HashMap<String, Category>,
        gnd: &HashMap<String, GndEntity>,
    ) -> ApiResult<Keyword> {
        let mut contention = Contention::new(KEYWORD_TRIES);
        let written = loop {
            let old = current.as_ref().map(Keyword::from_row);
            // One past the most a keyword may name: enough for the refusal.
            let mut ids: Vec<String> = input
                .category_ids
                .iter()
                .take(MAX_LIST + 1)
                .map(|c| c.trim().to_owned())
                .collect();
            ids.extend(old.iter().flat_map(|o| o.category_ids.iter().cloned()));
            self.load_categories(ids, &mut categories).await?;
            let keyword = self.derive_keyword(input.clone(), old.as_ref(), &categories, gnd)?;
            if old.as_ref() == Some(&keyword) {
                return Ok(keyword);
            }
            let delta = index_delta(old.as_ref(), Some(&keyword), &categories)?;
            // Index rows first: a crash before the keyword row leaves rows
            // that the same write, made again, finds and finishes.
            self.store.apply(delta.clone()).await?;
            match self.swap_keyword(&keyword, current.as_ref(), delta).await? {
                None => {
                    self.settle(vec![keyword.clone()], categories).await?;
                    return Ok(keyword);
                }
                Some(now) => current = now,
            }
            if !contention.lost().await {
                break keyword;
            }
        };
        // The index rows last written are this write's: put back the winner's.
        self.settle(vec![written], categories).await?;
        Err(ApiError::Conflict {
            message: format!(
                "keyword {} was changed by other writes {KEYWORD_TRIES} times while this one was tried; send it again",
                input.id
            ),
            current: None,
        })
    }

    /// The keyword row `keyword` written over `current` (none: over no row)
    /// under a compare-and-set, with `delta` (its index rows) after it (one
    /// transaction on the embedded engine). `None` when it applied, else the
    /// row that beat it.
    pub(super) async fn swap_keyword(
        &self,
        keyword: &Keyword,
        current: Option<&Row>,
        delta: Vec<Mutation>,
    ) -> ApiResult<Option<Option<Row>>> {
        let condition = match current {
            None => Condition::NotExists,
            Some(row) => Condition::Replaces(
                (KEYWORDS.key_len()..KEYWORDS.width())
                    .map(|i| (KEYWORDS.column(i).name, row.values[i].clone()))
                    .collect(),
            ),
        };
        let then: crate::store::Heal = std::sync::Arc::new(move |_: &Row| delta.clone());
        let outcome = self
            .store
            .cas_then(
                Cas {
                    row: keyword.to_row(),
                    condition,
                    ttl: None,
                },
                then,
            )
            .await?;
        Ok((!outcome.applied).then_some(outcome.current))
    }

    /// After `written` keywords and their index rows were written: while a
    /// later writer has changed a keyword row since, writes the index rows
    /// from what is there now. On Cassandra a compare-and-set and the writes
    /// after it are not one write, so a slower writer's index rows can land
    /// after a later writer's; the one that reads last puts them right.
    pub(super) async fn settle(
        &self,
        mut written: Vec<Keyword>,
        mut categories: HashMap<String, Category>,
    ) -> ApiResult<()> {
        for _ in 0..KEYWORD_TRIES {
            if written.is_empty() {
                break;
            }
            let ids: Vec<String> = written.iter().map(|k| k.id.clone()).collect();
            let now = self.keywords(&ids).await?;
            let moved: Vec<(Keyword, Option<Keyword>)> = written
                .into_iter()
                .filter_map(|k| {
                    let cur = now.get(&k.id).cloned();
                    (cur.as_ref() != Some(&k)).then_some((k, cur))
                })
                .collect();
            let ids = moved
                .iter()
                .filter_map(|(_, cur)| cur.as_ref())
                .flat_map(|c| c.category_ids.iter().cloned())
                .collect();
            self.load_categories(ids, &mut categories).await?;
            let mut writes = Vec::new();
            for (k, cur) in &moved {
                writes.extend(index_delta(Some(k), cur.as_ref(), &categories)?);
            }
            if !writes.is_empty() {
                self.store.write_bulk(writes).await?;
            }
            written = moved.into_iter().filter_map(|(_, cur)| cur).collect();
        }
        Ok(())
    }

    /// The keyword `input` makes over `old` (the stored one, if any).
    pub(super) fn derive_keyword(
        &self,
        input: KeywordInput,
        old: Option<&Keyword>,
        categories: &HashMap<String, Category>,
        gnd: &HashMap<String, GndEntity>,
    ) -> ApiResult<Keyword> {
        check_id("keyword", &input.id)?;
        let label = clean_label("keyword", &input.label)?;
        let category_ids = clean_list("categoryIds", input.category_ids, false)?;
        if category_ids.is_empty() {
            return Err(ApiError::bad_input("a keyword needs at least one category"));
        }
        if let Some(missing) = category_ids.iter().find(|c| !categories.contains_key(*c)) {
            return Err(ApiError::bad_input(format!("unknown category {missing}")));
        }
        let gnd_entity_id = clean_opt("gndEntityId", input.gnd_entity_id)?;
        if let Some(g) = &gnd_entity_id
            && !gnd.contains_key(g)
        {
            return Err(ApiError::bad_input(format!("unknown GND entity {g}")));
        }
        let mut hierarchical: Vec<String> = Vec::new();
        for c in &category_ids {
            let cat = &categories[c];
            for id in cat.ancestor_ids.iter().chain(std::iter::once(&cat.id)) {
                if !hierarchical.contains(id) {
                    hierarchical.push(id.clone());
                }
            }
        }
        let created_at = match &input.created_at {
            Some(t) => {
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .map_err(|_| {
                        ApiError::bad_input(format!("createdAt {t:?} is not an RFC 3339 time"))
                    })?;
                Some(t.clone())
            }
            None => None,
        };
        Ok(Keyword {
            created_at: created_at
                .or_else(|| old.map(|o| o.created_at.clone()))
                .unwrap_or_else(|| self.clock.rfc3339()),
            id: input.id,
            label,
            synonyms: clean_list("synonyms", input.synonyms, true)?,
            note: clean_opt("note", input.note)?,
            primary_gnd_uri: clean_opt("primaryGndUri", input.primary_gnd_uri)?,
            related_gnd_uris: clean_list("relatedGndUris", input.related_gnd_uris, false)?,
            gnd_entity_id,
            xtree_uri: clean_opt("xtreeUri", input.xtree_uri)?,
            category_ids,
            hierarchical_category_ids: hierarchical,
        })
    }

    /// Deletes a keyword and its index rows (admin).
    pub async fn delete_keyword(&self, who: &Principal, id: &str) -> ApiResult<String> {
        who.require(Role::Admin)?;
        let old = self
            .store
            .get(&KEYWORDS, &[id.into()])
            .await?
            .map(|r| Keyword::from_row(&r))
            .ok_or_else(|| ApiError::NotFound(format!("keyword {id}")))?;
        let categories = self.categories(&old.category_ids).await?;
        let mut batch = vec![Mutation::delete(&KEYWORDS, vec![id.into()])];
        batch.extend(index_delta(Some(&old), None, &categories)?);
        self.store.apply(batch).await?;
        Ok(id.to_owned())
    }
}
