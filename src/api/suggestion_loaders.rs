//! The DataLoader of the suggestions domain: every page asked for in one
//! request (several `imageSuggestions` fields, or one
//! `imageSuggestionsForPages`) is read in one [`Suggestions::pages`] call per
//! wiki: the pointer and the pages' feedback in one wave, their suggestions
//! in a second, each a set of concurrent single-partition reads.

use std::collections::HashMap;
use std::time::Duration;

use async_graphql::dataloader::{DataLoader, Loader};

use crate::api::graphql::batch::Batches;
use crate::domains::suggestions::service::{MAX_PAGES, ReadOptions, Reviewed, Suggestions};

/// One page's suggestions, with or without the reviewed ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PageKey {
    pub wiki: String,
    pub page_id: i32,
    pub include_reviewed: bool,
}

pub struct PageLoader(pub Suggestions);

impl Loader<PageKey> for PageLoader {
    type Value = Vec<Reviewed>;
    type Error = async_graphql::Error;
    async fn load(&self, keys: &[PageKey]) -> Result<HashMap<PageKey, Vec<Reviewed>>, Self::Error> {
        let mut groups: HashMap<(&str, bool), Vec<i32>> = HashMap::new();
        for k in keys {
            groups
                .entry((k.wiki.as_str(), k.include_reviewed))
                .or_default()
                .push(k.page_id);
        }
        let reads = groups
            .into_iter()
            .flat_map(|((wiki, include_reviewed), ids)| {
                ids.chunks(MAX_PAGES)
                    .map(|c| (wiki, include_reviewed, c.to_vec()))
                    .collect::<Vec<_>>()
            });
        let results =
            futures::future::try_join_all(reads.map(|(wiki, include_reviewed, ids)| async move {
                let opts = ReadOptions {
                    min_confidence: None,
                    include_reviewed,
                };
                let pages = self.0.pages(wiki, &ids, opts).await?;
                Ok::<_, crate::kernel::error::ApiError>(
                    ids.into_iter()
                        .zip(pages)
                        .map(|(page_id, p)| {
                            (
                                PageKey {
                                    wiki: wiki.to_owned(),
                                    page_id,
                                    include_reviewed,
                                },
                                p,
                            )
                        })
                        .collect::<Vec<_>>(),
                )
            }))
            .await?;
        Ok(results.into_iter().flatten().collect())
    }
}

/// The loader of one request (see `themes::loaders` for `window`).
pub fn page_loader(s: &Suggestions, window: Duration, batches: &Batches) -> DataLoader<PageLoader> {
    if window.is_zero() {
        DataLoader::new(PageLoader(s.clone()), batches.spawner()).delay(Duration::ZERO)
    } else {
        DataLoader::new(PageLoader(s.clone()), tokio::spawn).delay(window)
    }
}
