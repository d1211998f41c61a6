//! The themes tables (seed 000 with the changes cql/README.md lists)
//! and the row structs the domain works with.

use crate::store::table;
use crate::store::{Row, Table};

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

#[derive(Clone, Debug, PartialEq)]
pub struct Category {
    pub id: String,
    pub parent_id: Option<String>,
    pub label: String,
    pub notation: Option<String>,
    pub xtree_uri: Option<String>,
    /// Root first, without the category itself.
    pub ancestor_ids: Vec<String>,
}

impl Category {
    pub fn from_row(r: &Row) -> Self {
        Category {
            id: r.string("id"),
            parent_id: r.text("parent_id").map(str::to_owned),
            label: r.string("label"),
            notation: r.text("notation").map(str::to_owned),
            xtree_uri: r.text("xtree_uri").map(str::to_owned),
            ancestor_ids: r.text_list("ancestor_ids"),
        }
    }

    /// The portal (top-level category) this category belongs to.
    pub fn portal_id(&self) -> &str {
        self.ancestor_ids.first().unwrap_or(&self.id)
    }

    pub fn to_row(&self) -> Row {
        Row::new(&CATEGORIES)
            .set("id", &self.id)
            .set_opt("parent_id", self.parent_id.clone())
            .set("label", &self.label)
            .set_opt("notation", self.notation.clone())
            .set_opt("xtree_uri", self.xtree_uri.clone())
            .set("ancestor_ids", self.ancestor_ids.clone())
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

#[derive(Clone, Debug, PartialEq)]
pub struct Keyword {
    pub id: String,
    pub label: String,
    pub synonyms: Vec<String>,
    pub note: Option<String>,
    pub created_at: String,
    pub primary_gnd_uri: Option<String>,
    pub related_gnd_uris: Vec<String>,
    pub gnd_entity_id: Option<String>,
    pub xtree_uri: Option<String>,
    pub category_ids: Vec<String>,
    pub hierarchical_category_ids: Vec<String>,
}

impl Keyword {
    pub fn from_row(r: &Row) -> Self {
        Keyword {
            id: r.string("id"),
            label: r.string("label"),
            synonyms: r.text_list("synonyms"),
            note: r.text("note").map(str::to_owned),
            created_at: r.string("created_at"),
            primary_gnd_uri: r.text("primary_gnd_uri").map(str::to_owned),
            related_gnd_uris: r.text_list("related_gnd_uris"),
            gnd_entity_id: r.text("gnd_entity_id").map(str::to_owned),
            xtree_uri: r.text("xtree_uri").map(str::to_owned),
            category_ids: r.text_list("category_ids"),
            hierarchical_category_ids: r.text_list("hierarchical_category_ids"),
        }
    }

    pub fn to_row(&self) -> Row {
        Row::new(&KEYWORDS)
            .set("id", &self.id)
            .set("label", &self.label)
            .set("synonyms", self.synonyms.clone())
            .set_opt("note", self.note.clone())
            .set("created_at", &self.created_at)
            .set_opt("primary_gnd_uri", self.primary_gnd_uri.clone())
            .set("related_gnd_uris", self.related_gnd_uris.clone())
            .set_opt("gnd_entity_id", self.gnd_entity_id.clone())
            .set_opt("xtree_uri", self.xtree_uri.clone())
            .set("category_ids", self.category_ids.clone())
            .set(
                "hierarchical_category_ids",
                self.hierarchical_category_ids.clone(),
            )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GndEntity {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

impl GndEntity {
    pub fn from_row(r: &Row) -> Self {
        GndEntity {
            id: r.string("id"),
            name: r.string("name"),
            description: r.text("description").map(str::to_owned),
        }
    }

    pub fn to_row(&self) -> Row {
        Row::new(&GND_ENTITIES)
            .set("type", GND_TYPE)
            .set("id", &self.id)
            .set("name", &self.name)
            .set_opt("description", self.description.clone())
    }
}
