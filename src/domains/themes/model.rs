//! The themes tables (seed 000 with the changes cql/README.md lists)
//! and the row structs the domain works with.

use crate::store::{Row, Table};
use crate::store::{record, table};

/// The constant partition of the small lookup tables (seed 002).
pub const PORTAL_TYPE: &str = "portal";
pub const GND_TYPE: &str = "gnd";

table! {
    pub CATEGORIES: Themes.categories
        partition(id: Text)
        columns(
            parent_id: Text, xtree_uri: Text, label: Text, notation: Text, ancestor_ids: TextList
        )
}

table! {
    /// Query table for the children of a category (the seed's view of the same name).
    pub CATEGORIES_PARENTS: Themes.categories_parents
        partition(parent_id: Text)
        clustering(id: Text Asc)
        columns(xtree_uri: Text, label: Text, notation: Text)
}

table! {
    /// The top-level categories, in one partition (`type = 'portal'`).
    pub PORTALS: Themes.portals
        partition(type: Text)
        clustering(id: Text Asc)
        columns(xtree_uri: Text, label: Text, notation: Text)
}

table! {
    pub KEYWORDS: Themes.keywords
        partition(id: Text)
        columns(
            created_at: Text, primary_gnd_uri: Text, related_gnd_uris: TextList,
            gnd_entity_id: Text, hierarchical_category_ids: TextList, category_ids: TextList,
            xtree_uri: Text, label: Text, synonyms: TextList, note: Text
        )
}

table! {
    /// The keywords directly in a category.
    pub KEYWORDS_CATEGORIES: Themes.keywords_categories
        partition(category_id: Text)
        clustering(keyword_id: Text Asc)
}

table! {
    /// The keywords in a category or anywhere below it (the seed's list column as rows).
    pub KEYWORDS_HIERARCHIES: Themes.keywords_hierarchies
        partition(category_id: Text)
        clustering(keyword_id: Text Asc)
}

table! {
    /// The search index: one row per indexed suffix of a normalised label or synonym,
    /// partitioned by portal and the suffix's first two characters.
    pub KEYWORDS_SEARCH: Themes.keywords_search
        partition(category_id: Text, bucket: Text)
        clustering(kind: Int Asc, search: Text Asc, keyword_id: Text Asc)
}

table! {
    /// GND entity types, in one partition (`type = 'gnd'`).
    pub GND_ENTITIES: Themes.gnd_entities
        partition(type: Text)
        clustering(id: Text Asc)
        columns(name: Text, description: Text)
}

pub static TABLES: &[&Table] = &[
    &CATEGORIES,
    &CATEGORIES_PARENTS,
    &PORTALS,
    &KEYWORDS,
    &KEYWORDS_CATEGORIES,
    &KEYWORDS_HIERARCHIES,
    &KEYWORDS_SEARCH,
    &GND_ENTITIES,
];

record! {
    #[derive(Clone, Debug, PartialEq)]
    pub struct Category in CATEGORIES {
        pub id: String,
        /// The category above it; none for a portal (a top-level category).
        pub parent_id: Option<String>,
        pub label: String,
        /// Its notation in the thesaurus (`1.2.3`), which orders the tree.
        pub notation: Option<String>,
        /// The concept's URI in xTree, where the vocabulary is kept.
        pub xtree_uri: Option<String>,
        /// Root first, without the category itself.
        pub ancestor_ids: Vec<String>,
    }
}

impl Category {
    /// The portal (top-level category) this category belongs to.
    pub fn portal_id(&self) -> &str {
        self.ancestor_ids.first().unwrap_or(&self.id)
    }

    /// Its row in the query table of its parent, or in the portals table.
    pub fn listing_row(&self) -> Row {
        let row = match &self.parent_id {
            Some(p) => Row::new(&CATEGORIES_PARENTS).set("parent_id", p),
            None => Row::new(&PORTALS).set("type", PORTAL_TYPE),
        };
        row.set("id", &self.id)
            .set("label", &self.label)
            .set_opt("notation", self.notation.clone())
            .set_opt("xtree_uri", self.xtree_uri.clone())
    }
}

record! {
    #[derive(Clone, Debug, PartialEq)]
    pub struct Keyword in KEYWORDS {
        pub id: String,
        /// The preferred label.
        pub label: String,
        /// Other labels a search finds it by (at most 100).
        pub synonyms: Vec<String>,
        /// A scope note for curators.
        pub note: Option<String>,
        /// When it was first written (RFC 3339); later writes keep it.
        pub created_at: String,
        /// The GND concept it stands for.
        pub primary_gnd_uri: Option<String>,
        /// Further GND concepts it relates to.
        pub related_gnd_uris: Vec<String>,
        /// Its GND entity type (a row of `gnd_entities`).
        pub gnd_entity_id: Option<String>,
        /// The concept's URI in xTree.
        pub xtree_uri: Option<String>,
        /// The categories it is directly in.
        pub category_ids: Vec<String>,
        /// Those and every category above them (derived on write; the
        /// hierarchy index is kept from it).
        pub hierarchical_category_ids: Vec<String>,
    }
}

record! {
    #[derive(Clone, Debug, PartialEq)]
    pub struct GndEntity in GND_ENTITIES where (type = GND_TYPE) {
        pub id: String,
        pub name: String,
        pub description: Option<String>,
    }
}
