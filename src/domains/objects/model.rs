//! The objects table and an object's row.

use crate::store::{Table, record, table};

table! {
    /// A catalogue object's context by its ddb id: one row of at most a few
    /// KiB (a title of `MAX_TITLE` characters, an institution of
    /// `MAX_INSTITUTION`, one URL) per object.
    pub OBJECTS: Target.objects
        partition(ddb_id: Text)
        columns(
            title: Text,
            institution: Text,
            image_url: Text,
            image_reference_id: Text,
            updated_at: Text,
        )
}

pub static TABLES: &[&Table] = &[&OBJECTS];

/// The longest title kept, in characters.
pub const MAX_TITLE: usize = 1_000;
/// The longest institution name kept, in characters.
pub const MAX_INSTITUTION: usize = 500;

record! {
    /// What the catalogue says of one object.
    #[derive(Clone, Debug, PartialEq)]
    pub struct CatalogueObject in OBJECTS {
        pub ddb_id: String,
        /// Its title, as the catalogue gives it.
        pub title: String,
        /// The institution that holds it.
        pub institution: Option<String>,
        /// The URL of its image, as imported (registered as a binary).
        pub image_url: Option<String>,
        /// The binary reference that URL was registered as (context: the ddb id).
        pub image_reference_id: Option<String>,
        /// When an import last changed the row (RFC 3339).
        pub updated_at: String,
    }
}

impl CatalogueObject {
    /// The same object, its time of change set aside (to tell whether an
    /// import changes anything).
    pub fn same_as(&self, other: &CatalogueObject) -> bool {
        CatalogueObject {
            updated_at: String::new(),
            ..self.clone()
        } == CatalogueObject {
            updated_at: String::new(),
            ..other.clone()
        }
    }
}
