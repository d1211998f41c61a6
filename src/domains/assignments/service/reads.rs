//! Reading assignments: a portal's by status and creator (buckets merged), an object's, a keyword's, and a portal's creators.

use super::*;

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
        let (table, prefix): (_, Vec<Value>) = match (status, creator) {
            (None, None) => (&OBJECTS_KEYWORDS, vec![]),
            (Some(s), None) => (&OBJECTS_KEYWORDS_STATUS, vec![s.as_str().into()]),
            (None, Some(c)) => (&OBJECTS_KEYWORDS_CREATOR, vec![c.into()]),
            (Some(s), Some(c)) => (
                &OBJECTS_KEYWORDS_CREATORS_WITH_STATUS,
                vec![s.as_str().into(), c.into()],
            ),
        };
        self.merged(table, portal_id, prefix, first, after).await
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
        let page = merged_slice(&*self.store, table, &all_buckets(&[base.into()]), &slice).await?;
        Ok(page.listed(Assignment::from_row))
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
        let all: BTreeSet<String> = futures::future::try_join_all(walks)
            .await?
            .into_iter()
            .flatten()
            .collect();
        Ok(all.into_iter().take(MAX_CREATORS).collect())
    }
}
