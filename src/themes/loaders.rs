//! DataLoaders for the themes domain: every relation (a keyword's categories,
//! its GND entity, a category's parent) is batched into one multi-key read per
//! resolver level, so a page of 50 costs the same round trips as a page of 5.

use std::collections::HashMap;
use std::time::Duration;

use async_graphql::dataloader::{DataLoader, Loader};

use super::model::{Category, GndEntity, Keyword};
use super::service::Themes;
use crate::graphql::batch::Batches;

pub struct CategoryLoader(pub Themes);
pub struct KeywordLoader(pub Themes);
pub struct GndEntityLoader(pub Themes);

impl Loader<String> for CategoryLoader {
    type Value = Category;
    type Error = async_graphql::Error;
    async fn load(&self, keys: &[String]) -> Result<HashMap<String, Category>, Self::Error> {
        Ok(self.0.categories(keys).await?)
    }
}

impl Loader<String> for KeywordLoader {
    type Value = Keyword;
    type Error = async_graphql::Error;
    async fn load(&self, keys: &[String]) -> Result<HashMap<String, Keyword>, Self::Error> {
        Ok(self.0.keywords(keys).await?)
    }
}

impl Loader<String> for GndEntityLoader {
    type Value = GndEntity;
    type Error = async_graphql::Error;
    async fn load(&self, keys: &[String]) -> Result<HashMap<String, GndEntity>, Self::Error> {
        Ok(self.0.gnd_entities_by_id(keys).await?)
    }
}

/// The loaders of one request (their caches live as long as the request).
pub struct ThemeLoaders {
    pub categories: DataLoader<CategoryLoader>,
    pub keywords: DataLoader<KeywordLoader>,
    pub gnd_entities: DataLoader<GndEntityLoader>,
}

impl ThemeLoaders {
    /// The loaders of one request. With a zero `window` their fetches go to
    /// `batches` and start when the request yields (see `graphql::batch`);
    /// otherwise each batch waits `window` for keys.
    pub fn new(themes: &Themes, window: Duration, batches: &Batches) -> Self {
        fn loader<L>(l: L, window: Duration, batches: &Batches) -> DataLoader<L>
        where
            L: Loader<String> + Send + Sync + 'static,
        {
            if window.is_zero() {
                DataLoader::new(l, batches.spawner()).delay(Duration::ZERO)
            } else {
                DataLoader::new(l, tokio::spawn).delay(window)
            }
        }
        ThemeLoaders {
            categories: loader(CategoryLoader(themes.clone()), window, batches),
            keywords: loader(KeywordLoader(themes.clone()), window, batches),
            gnd_entities: loader(GndEntityLoader(themes.clone()), window, batches),
        }
    }
}
