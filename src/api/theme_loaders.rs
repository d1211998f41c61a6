//! The themes domain's loaders: every relation (a keyword's categories, its
//! GND entity, a category's parent and children, an assignment's keyword) is batched into
//! one multi-key read per resolver level, so a page of 50 costs the same
//! round trips as a page of 5 (see `graphql::loader`).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use crate::api::graphql::batch::Batches;
use crate::api::graphql::loader::BatchLoader;
use crate::domains::themes::model::{Category, GndEntity, Keyword};
use crate::domains::themes::service::Themes;

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
        let t = themes.clone();
        let categories = Arc::new(move |ids: Vec<String>| {
            let t = t.clone();
            async move { Ok(t.categories(&ids).await?) }.boxed()
        });
        let t = themes.clone();
        let children = Arc::new(move |ids: Vec<String>| {
            let t = t.clone();
            async move { Ok(t.children_of(&ids).await?) }.boxed()
        });
        let t = themes.clone();
        let keywords = Arc::new(move |ids: Vec<String>| {
            let t = t.clone();
            async move { Ok(t.keywords(&ids).await?) }.boxed()
        });
        let t = themes.clone();
        let gnd_entities = Arc::new(move |ids: Vec<String>| {
            let t = t.clone();
            async move { Ok(t.gnd_entities_by_id(&ids).await?) }.boxed()
        });
        ThemeLoaders {
            categories: BatchLoader::new(categories, window, batches),
            children: BatchLoader::new(children, window, batches),
            keywords: BatchLoader::new(keywords, window, batches),
            gnd_entities: BatchLoader::new(gnd_entities, window, batches),
        }
    }
}
