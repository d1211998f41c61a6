//! The themes tables (seed 000 with the changes cql/README.md lists)
//! and the row structs the domain works with.

use crate::store::ColumnType::{Int, Text, TextList};
use crate::store::{Keyspace, Order, Row, Table, col};

/// The constant partition of the small lookup tables (seed 002).
pub const PORTAL_TYPE: &str = "portal";
pub const GND_TYPE: &str = "gnd";

pub static CATEGORIES: Table = Table {
    keyspace: Keyspace::Themes,
    name: "categories",
    partition_key: &[col("id", Text)],
    clustering: &[],
    columns: &[
        col("parent_id", Text),
        col("xtree_uri", Text),
        col("label", Text),
        col("notation", Text),
        col("ancestor_ids", TextList),
    ],
};

/// Query table for the children of a category (the seed's view of the same name).
pub static CATEGORIES_PARENTS: Table = Table {
    keyspace: Keyspace::Themes,
    name: "categories_parents",
    partition_key: &[col("parent_id", Text)],
    clustering: &[(col("id", Text), Order::Asc)],
    columns: &[
        col("xtree_uri", Text),
        col("label", Text),
        col("notation", Text),
    ],
};

/// The top-level categories, in one partition (`type = 'portal'`).
pub static PORTALS: Table = Table {
    keyspace: Keyspace::Themes,
    name: "portals",
    partition_key: &[col("type", Text)],
    clustering: &[(col("id", Text), Order::Asc)],
    columns: &[
        col("xtree_uri", Text),
        col("label", Text),
        col("notation", Text),
    ],
};

pub static KEYWORDS: Table = Table {
    keyspace: Keyspace::Themes,
    name: "keywords",
    partition_key: &[col("id", Text)],
    clustering: &[],
    columns: &[
        col("created_at", Text),
        col("primary_gnd_uri", Text),
        col("related_gnd_uris", TextList),
        col("gnd_entity_id", Text),
        col("hierarchical_category_ids", TextList),
        col("category_ids", TextList),
        col("xtree_uri", Text),
        col("label", Text),
        col("synonyms", TextList),
        col("note", Text),
    ],
};

/// The keywords directly in a category.
pub static KEYWORDS_CATEGORIES: Table = Table {
    keyspace: Keyspace::Themes,
    name: "keywords_categories",
    partition_key: &[col("category_id", Text)],
    clustering: &[(col("keyword_id", Text), Order::Asc)],
    columns: &[],
};

/// The keywords in a category or anywhere below it (the seed's list column as rows).
pub static KEYWORDS_HIERARCHIES: Table = Table {
    keyspace: Keyspace::Themes,
    name: "keywords_hierarchies",
    partition_key: &[col("category_id", Text)],
    clustering: &[(col("keyword_id", Text), Order::Asc)],
    columns: &[],
};

/// The search index: one row per indexed suffix of a normalised label or synonym,
/// partitioned by portal and the suffix's first two characters.
pub static KEYWORDS_SEARCH: Table = Table {
    keyspace: Keyspace::Themes,
    name: "keywords_search",
    partition_key: &[col("category_id", Text), col("bucket", Text)],
    clustering: &[
        (col("kind", Int), Order::Asc),
        (col("search", Text), Order::Asc),
        (col("keyword_id", Text), Order::Asc),
    ],
    columns: &[],
};

/// GND entity types, in one partition (`type = 'gnd'`).
pub static GND_ENTITIES: Table = Table {
    keyspace: Keyspace::Themes,
    name: "gnd_entities",
    partition_key: &[col("type", Text)],
    clustering: &[(col("id", Text), Order::Asc)],
    columns: &[col("name", Text), col("description", Text)],
};

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
