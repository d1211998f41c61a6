//! Reading assignments: a portal's by status and creator (buckets merged), an object's, a keyword's, and a portal's creators.

use super::*;

/// The query table that holds a portal's assignments with `status` and by
/// `creator` (either, both or neither) in key order, and the clustering prefix
/// that selects them.
fn filtered(
    status: Option<AssignmentStatus>,
    creator: Option<&str>,
) -> (&'static crate::store::Table, Vec<Value>) {
    match (status, creator) {
        (None, None) => (&OBJECTS_KEYWORDS, vec![]),
        (Some(s), None) => (&OBJECTS_KEYWORDS_STATUS, vec![s.as_str().into()]),
        (None, Some(c)) => (&OBJECTS_KEYWORDS_CREATOR, vec![c.into()]),
        (Some(s), Some(c)) => (
            &OBJECTS_KEYWORDS_CREATORS_WITH_STATUS,
            vec![s.as_str().into(), c.into()],
        ),
    }
}

/// What an export reads: a portal's assignments, of some statuses (none:
/// all), of one creator, of one keyword; narrowed, as the rows are read, to
/// one child category and a confidence range (bounds included; a row
/// without a confidence is outside any range).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExportFilter {
    pub portal_id: String,
    pub statuses: Vec<AssignmentStatus>,
    pub creator: Option<String>,
    pub keyword_id: Option<String>,
    pub child_category_id: Option<String>,
    pub min_confidence: Option<f64>,
    pub max_confidence: Option<f64>,
}

impl ExportFilter {
    fn keeps(&self, a: &Assignment) -> bool {
        let within = |bound: Option<f64>, ok: fn(f64, f64) -> bool| {
            bound.is_none_or(|b| a.confidence.is_some_and(|c| ok(c, b)))
        };
        (self.statuses.is_empty() || self.statuses.contains(&a.status))
            && self.creator.as_ref().is_none_or(|c| *c == a.key.creator)
            && self.keyword_id.as_ref().is_none_or(|k| *k == a.key.keyword_id)
            && self
                .child_category_id
                .as_ref()
                .is_none_or(|c| *c == a.child_category_id)
            && within(self.min_confidence, |c, b| c >= b)
            && within(self.max_confidence, |c, b| c <= b)
    }
}

/// The pages of the buckets of `base` in `table` under `prefix`, merged in
/// key order, `EXPORT_PAGE` rows each, each read when the stream asks.
fn pages_of(
    store: DynStore,
    table: &'static crate::store::Table,
    base: String,
    prefix: Vec<Value>,
) -> impl futures::Stream<Item = ApiResult<Vec<Assignment>>> + Send + 'static {
    let partitions = all_buckets(&[base.into()]);
    let template = Slice::partition(vec![]).prefix(prefix).limit(EXPORT_PAGE);
    futures::stream::try_unfold(Some(None), move |next: Option<Option<Cursor>>| {
        let (store, partitions, slice) = (store.clone(), partitions.clone(), template.clone());
        async move {
            let Some(after) = next else {
                return Ok(None);
            };
            let page = store.merged_slice(table, &partitions, &slice.after(after)).await?;
            let rows = page.rows.iter().filter_map(Assignment::from_row).collect();
            Ok(Some((rows, page.next.map(Some))))
        }
    })
}

impl Assignments {
    /// One assignment by its key.
    pub async fn get(&self, key: &AssignmentKey) -> ApiResult<Option<Assignment>> {
        Ok(Assignment::stored(&self.store, key).await?)
    }

    /// The assignment's status changes, oldest first (the latest
    /// `MAX_HISTORY`; its creation is its `created_at` and `creator`).
    pub async fn history(&self, key: &AssignmentKey) -> ApiResult<Vec<StatusChange>> {
        let partition = vec![
            key.portal_id.as_str().into(),
            key.ddb_id.as_str().into(),
            key.keyword_id.as_str().into(),
            key.creator.as_str().into(),
        ];
        let page = self
            .store
            .slice(
                &ASSIGNMENT_HISTORY,
                &Slice::partition(partition).limit(MAX_HISTORY).reverse(true),
            )
            .await?;
        let mut changes: Vec<StatusChange> = page.rows.iter().filter_map(StatusChange::from_row).collect();
        changes.reverse();
        Ok(changes)
    }

    /// A portal's assignments, filtered by status, creator or both, in key order.
    pub async fn list(
        &self,
        portal_id: &str,
        status: Option<AssignmentStatus>,
        creator: Option<&str>,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<AssignmentPage> {
        self.list_in_order(portal_id, status, creator, AssignmentOrder::Object, first, after)
            .await
    }

    /// As [`Assignments::list`], in `order`: by confidence or age only with
    /// a status and without a creator (BAD_USER_INPUT otherwise).
    pub async fn list_in_order(
        &self,
        portal_id: &str,
        status: Option<AssignmentStatus>,
        creator: Option<&str>,
        order: AssignmentOrder,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<AssignmentPage> {
        let (table, prefix) = match (order, status, creator) {
            (AssignmentOrder::Object, _, _) => filtered(status, creator),
            (AssignmentOrder::Confidence, Some(s), None) => {
                (&OBJECTS_KEYWORDS_STATUS_CONFIDENCE, vec![s.as_str().into()])
            }
            (AssignmentOrder::Oldest, Some(s), None) => {
                (&OBJECTS_KEYWORDS_STATUS_AGE, vec![s.as_str().into()])
            }
            _ => {
                return Err(ApiError::bad_input(
                    "orderBy CONFIDENCE or OLDEST takes a status and no creator",
                ));
            }
        };
        self.merged(table, portal_id, prefix, first, after).await
    }

    /// The assignments of `filter`, as a stream of pages of `EXPORT_PAGE`
    /// read one after another as the stream is polled (an export holds one
    /// page at a time): each status's in `list`'s order, one status after
    /// another; with a keyword, in `of_keyword`'s order. A portal that is
    /// not one is refused before anything is read.
    ///
    /// Not a snapshot: an assignment whose status changes while the stream
    /// runs may be missed or come twice when the stream is by status.
    pub async fn export(
        &self,
        filter: ExportFilter,
    ) -> ApiResult<impl futures::Stream<Item = ApiResult<Vec<Assignment>>> + Send + 'static> {
        use futures::{StreamExt, TryStreamExt};
        let portal = filter.portal_id.as_str();
        match self.is_portal(portal).await? {
            Some(true) => {}
            Some(false) => {
                return Err(ApiError::bad_input(format!(
                    "{portal:?} is a category inside a portal, not a portal"
                )));
            }
            None => return Err(ApiError::NotFound(format!("portal {portal:?}"))),
        }
        let creator = filter.creator.as_deref();
        let parts: Vec<(&'static crate::store::Table, String, Vec<Value>)> = match &filter.keyword_id {
            Some(k) => vec![(&OBJECTS_KEYWORDS_KEYWORD, k.clone(), vec![portal.into()])],
            None if filter.statuses.is_empty() => {
                let (table, prefix) = filtered(None, creator);
                vec![(table, portal.to_owned(), prefix)]
            }
            None => filter
                .statuses
                .iter()
                .map(|s| {
                    let (table, prefix) = filtered(Some(*s), creator);
                    (table, portal.to_owned(), prefix)
                })
                .collect(),
        };
        let store = self.store.clone();
        let pages = futures::stream::iter(parts)
            .map(move |(table, base, prefix)| pages_of(store.clone(), table, base, prefix))
            .flatten()
            .map_ok(move |rows| {
                rows.into_iter()
                    .filter(|a| filter.keeps(a))
                    .collect::<Vec<_>>()
            })
            .try_filter(|rows| std::future::ready(!rows.is_empty()));
        Ok(pages)
    }

    /// One page of the buckets of `base` in `table`, merged in key order.
    pub(super) async fn merged(
        &self,
        table: &'static crate::store::Table,
        base: &str,
        prefix: Vec<Value>,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<AssignmentPage> {
        let slice = Slice::partition(vec![])
            .prefix(prefix)
            .limit(first)
            .after(after);
        let page = self.store.merged_slice(table, &all_buckets(&[base.into()]), &slice).await?;
        Ok(page.listed(Assignment::from_owned))
    }

    /// The assignments of one object (optionally in one portal).
    pub async fn of_object(
        &self,
        ddb_id: &str,
        portal_id: Option<&str>,
    ) -> ApiResult<Vec<Assignment>> {
        let prefix: Vec<Value> = portal_id.map(Into::into).into_iter().collect();
        let page = self
            .store
            .slice(
                &OBJECTS_KEYWORDS_DDBID,
                &Slice::partition(vec![ddb_id.into()])
                    .prefix(prefix)
                    .limit(MAX_PER_OBJECT),
            )
            .await?;
        Ok(page.rows.iter().filter_map(Assignment::from_row).collect())
    }

    /// The assignments of one keyword (optionally in one portal), by portal and ddb id.
    pub async fn of_keyword(
        &self,
        keyword_id: &str,
        portal_id: Option<&str>,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<AssignmentPage> {
        let prefix: Vec<Value> = portal_id.map(Into::into).into_iter().collect();
        self.merged(&OBJECTS_KEYWORDS_KEYWORD, keyword_id, prefix, first, after)
            .await
    }

    /// The distinct creators of a portal's assignments with `status`, sorted.
    /// Each bucket is walked creator by creator (one single-row read per creator
    /// skips all of that creator's rows), all buckets at once.
    pub async fn creators(
        &self,
        portal_id: &str,
        status: AssignmentStatus,
    ) -> ApiResult<Vec<String>> {
        let walks = all_buckets(&[portal_id.into()])
            .into_iter()
            .map(|p| async move {
                let mut found: Vec<String> = Vec::new();
                while found.len() < MAX_CREATORS {
                    let mut slice = Slice::partition(p.clone())
                        .prefix(vec![status.as_str().into()])
                        .limit(1);
                    if let Some(last) = found.last() {
                        slice = slice.lower(Bound::Exclusive(last.as_str().into()));
                    }
                    let page = self
                        .store
                        .slice(&OBJECTS_KEYWORDS_CREATORS_WITH_STATUS, &slice)
                        .await?;
                    match page.rows.first() {
                        Some(r) => found.push(r.string("creator")),
                        None => break,
                    }
                }
                Ok::<_, ApiError>(found)
            });
        let found = futures::future::try_join_all(walks).await?;
        Ok(first_distinct(found, MAX_CREATORS))
    }
}

/// What walks found, merged, distinct and sorted: the first `n`.
fn first_distinct(found: Vec<Vec<String>>, n: usize) -> Vec<String> {
    let all: BTreeSet<String> = found.into_iter().flatten().collect();
    all.into_iter().take(n).collect()
}

impl Assignments {
    /// The distinct ddb ids of a portal's objects that have an assignment in
    /// one of `statuses`, sorted, the first `first` after `after`. Each
    /// status's bucket is walked with pages of rows that skip past the
    /// last id seen, so an object with many assignments costs one read.
    pub async fn objects_in(
        &self,
        portal_id: &str,
        statuses: &[AssignmentStatus],
        first: usize,
        after: Option<&str>,
    ) -> ApiResult<Vec<String>> {
        let limit = (first * 2).clamp(16, 1_000);
        let walks = all_buckets(&[portal_id.into()])
            .into_iter()
            .flat_map(|p| statuses.iter().map(move |s| (p.clone(), *s)))
            .map(|(p, status)| async move {
                let mut found: Vec<String> = Vec::new();
                let mut last = after.map(str::to_owned);
                while found.len() < first {
                    let mut slice = Slice::partition(p.clone())
                        .prefix(vec![status.as_str().into()])
                        .limit(limit);
                    if let Some(l) = &last {
                        slice = slice.lower(Bound::Exclusive(l.as_str().into()));
                    }
                    let page = self.store.slice(&OBJECTS_KEYWORDS_STATUS, &slice).await?;
                    for r in &page.rows {
                        let id = r.string("ddb_id");
                        if found.last() != Some(&id) {
                            found.push(id);
                        }
                    }
                    if page.rows.len() < limit {
                        break;
                    }
                    last = found.last().cloned();
                }
                Ok::<_, ApiError>(found)
            });
        let found = futures::future::try_join_all(walks).await?;
        Ok(first_distinct(found, first))
    }
}
