//! DataLoaders for the themes domain: every relation (a keyword's categories,
//! its GND entity, a category's parent) is batched into one multi-key read per
//! resolver level, so a page of 50 costs the same round trips as a page of 5.

use std::collections::HashMap;
use std::time::Duration;

use async_graphql::dataloader::{DataLoader, Loader};

use super::model::{Category, GndEntity, Keyword};
use super::service::Themes;

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
    pub fn new(themes: &Themes, window: Duration) -> Self {
        ThemeLoaders {
            categories: DataLoader::new(CategoryLoader(themes.clone()), tokio::spawn).delay(window),
            keywords: DataLoader::new(KeywordLoader(themes.clone()), tokio::spawn).delay(window),
            gnd_entities: DataLoader::new(GndEntityLoader(themes.clone()), tokio::spawn)
                .delay(window),
        }
    }
}
