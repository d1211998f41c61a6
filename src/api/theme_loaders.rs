//! The themes domain's loaders: every relation (a keyword's categories, its
//! GND entity, a category's parent and children, an assignment's keyword) is batched into
//! one multi-key read per resolver level, so a page of 50 costs the same
//! round trips as a page of 5 (see `graphql::loader`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use crate::api::graphql::batch::Batches;
use crate::api::graphql::loader::BatchLoader;
use crate::domains::themes::model::{Category, GndEntity, Keyword};
use crate::domains::themes::service::Themes;
use crate::kernel::error::ApiResult;

/// The loaders of one request (their caches live as long as the request).
pub struct ThemeLoaders {
    pub categories: BatchLoader<Category>,
    /// The children of a category by its id (their ancestors left empty).
    pub children: BatchLoader<Vec<Category>>,
    pub keywords: BatchLoader<Keyword>,
    pub gnd_entities: BatchLoader<GndEntity>,
}

impl ThemeLoaders {
    /// The loaders of one request. With a zero `window` their fetches go to
    /// `batches` and start when the request yields (see `graphql::batch`);
    /// otherwise each batch waits `window` for keys.
    pub fn new(themes: &Themes, window: Duration, batches: &Batches) -> Self {
        let reads = Reads {
            themes,
            window,
            batches,
        };
        ThemeLoaders {
            categories: reads.loader(|t, ids| async move { t.categories(&ids).await }),
            children: reads.loader(|t, ids| async move { t.children_of(&ids).await }),
            keywords: reads.loader(|t, ids| async move { t.keywords(&ids).await }),
            gnd_entities: reads.loader(|t, ids| async move { t.gnd_entities_by_id(&ids).await }),
        }
    }
}

/// What every loader of a request shares: the service it reads and how its
/// batches start.
struct Reads<'a> {
    themes: &'a Themes,
    window: Duration,
    batches: &'a Batches,
}

impl Reads<'_> {
    /// A loader whose batch of ids is one call of `read` on the service.
    fn loader<V, F, Fut>(&self, read: F) -> BatchLoader<V>
    where
        V: Clone + Send + Sync + 'static,
        F: Fn(Themes, Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ApiResult<HashMap<String, V>>> + Send + 'static,
    {
        let themes = self.themes.clone();
        let fetch = Arc::new(move |ids: Vec<String>| {
            let batch = read(themes.clone(), ids);
            async move { Ok(batch.await?) }.boxed()
        });
        BatchLoader::new(fetch, self.window, self.batches)
    }
}
