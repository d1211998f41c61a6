//! Table declarations and their rows: keyspaces, column types, the one
//! declaration of each table, cell values and rows in declaration order, and
//! the type checks every engine applies to keys and rows.

use serde::{Deserialize, Serialize};

use super::{Scalar, StoreError};

/// The keyspace families (cql/*.cql); the cluster name is `<family>_<env>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keyspace {
    Themes,
    Target,
    Binaries,
    Suggestions,
    Crawl,
}

impl Keyspace {
    pub fn prefix(self) -> &'static str {
        match self {
            Keyspace::Themes => "themes",
            Keyspace::Target => "target",
            Keyspace::Binaries => "binaries",
            Keyspace::Suggestions => "suggestions",
            Keyspace::Crawl => "crawl",
        }
    }
}

/// Column types the seam supports (a deliberately small subset of CQL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    Int,
    BigInt,
    Double,
    Boolean,
    Blob,
    TextList,
    /// A 64-bit count changed only by [`crate::store::Mutation::Add`] (a
    /// CQL `counter`); its values are `Value::BigInt`. A table with one
    /// holds only key columns and counters, and takes no upsert.
    Counter,
}

impl ColumnType {
    pub fn cql(self) -> &'static str {
        match self {
            ColumnType::Text => "text",
            ColumnType::Int => "int",
            ColumnType::BigInt => "bigint",
            ColumnType::Double => "double",
            ColumnType::Boolean => "boolean",
            ColumnType::Blob => "blob",
            ColumnType::TextList => "list<text>",
            ColumnType::Counter => "counter",
        }
    }
}

#[derive(Debug)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
}

pub const fn col(name: &'static str, ty: ColumnType) -> Column {
    Column { name, ty }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// Declares a table in a few lines that read like its CQL:
///
/// ```ignore
/// table!(pub CATEGORIES_PARENTS: Themes.categories_parents
///     partition(parent_id: Text)
///     clustering(id: Text Asc)
///     columns(xtree_uri: Text, label: Text, notation: Text));
/// ```
///
/// `clustering = CONST` and `columns = EXPR` take a list built elsewhere
/// (several tables sharing their clustering or value columns).
macro_rules! table {
    ($(#[$meta:meta])* $vis:vis $name:ident: $ks:ident.$table:tt
     partition($($pk:tt: $pkt:ident),+ $(,)?)
     $(clustering($($ck:tt: $ckt:ident $ord:ident),* $(,)?))?
     $(clustering = $clus:ident)?
     $(columns($($c:tt: $ct:ident),* $(,)?))?
     $(columns = $cols:expr)?
    ) => {
        $(#[$meta])*
        $vis static $name: $crate::store::Table = $crate::store::Table {
            keyspace: $crate::store::Keyspace::$ks,
            name: stringify!($table),
            partition_key: &[$($crate::store::col(
                stringify!($pk),
                $crate::store::ColumnType::$pkt,
            )),+],
            clustering: $crate::store::table!(@list
                $([$((
                    $crate::store::col(stringify!($ck), $crate::store::ColumnType::$ckt),
                    $crate::store::Order::$ord,
                )),*])?
                $($clus)?),
            columns: $crate::store::table!(@list
                $([$($crate::store::col(stringify!($c), $crate::store::ColumnType::$ct)),*])?
                $($cols)?),
        };
    };
    (@list) => { &[] };
    (@list [$($c:expr),*]) => { &[$($c),*] };
    (@list $list:expr) => { $list };
}
pub(crate) use table;

/// One table, declared once. Row values are always laid out in this order:
/// partition key columns, clustering columns, then the other columns.
#[derive(Debug)]
pub struct Table {
    pub keyspace: Keyspace,
    pub name: &'static str,
    pub partition_key: &'static [Column],
    pub clustering: &'static [(Column, Order)],
    pub columns: &'static [Column],
}

impl Table {
    pub fn key_len(&self) -> usize {
        self.partition_key.len() + self.clustering.len()
    }

    pub fn width(&self) -> usize {
        self.key_len() + self.columns.len()
    }

    /// Whether a row may carry a large value: a blob column (binary chunks,
    /// derivatives). Reads of such tables never run on the runtime's threads.
    pub fn has_blobs(&self) -> bool {
        self.columns.iter().any(|c| c.ty == ColumnType::Blob)
    }

    /// Whether its columns are counters (changed by `Mutation::Add` only).
    pub fn is_counter(&self) -> bool {
        self.columns.iter().any(|c| c.ty == ColumnType::Counter)
    }

    /// Every column in row order.
    pub fn all_columns(&self) -> impl Iterator<Item = &'static Column> + use<> {
        let t: &'static [Column] = self.partition_key;
        let c: &'static [(Column, Order)] = self.clustering;
        let r: &'static [Column] = self.columns;
        t.iter().chain(c.iter().map(|(c, _)| c)).chain(r.iter())
    }

    pub fn column(&self, i: usize) -> &'static Column {
        let pk: &'static [Column] = self.partition_key;
        let ck: &'static [(Column, Order)] = self.clustering;
        let rc: &'static [Column] = self.columns;
        if i < pk.len() {
            &pk[i]
        } else if i < pk.len() + ck.len() {
            &ck[i - pk.len()].0
        } else {
            &rc[i - pk.len() - ck.len()]
        }
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.all_columns().position(|c| c.name == name)
    }

    /// Where the column `name` stands in a row. Panics on a name the table
    /// does not declare: a programming error, caught by the first test
    /// that reads or writes the row.
    pub fn position(&self, name: &str) -> usize {
        self.index_of(name)
            .unwrap_or_else(|| panic!("table {} has no column {name}", self.name))
    }

    pub fn qualified(&self) -> String {
        format!("{}.{}", self.keyspace.prefix(), self.name)
    }
}

/// One cell value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Text(String),
    Int(i32),
    BigInt(i64),
    Double(f64),
    Boolean(bool),
    Blob(#[serde(with = "blob_text")] Vec<u8>),
    /// An empty list is stored as null and reads back as `None` on both
    /// engines (Cassandra has no empty collection); `Row::text_list` gives
    /// an empty `Vec` for either.
    TextList(Vec<String>),
}

/// Blobs serialise as base64 text (the embedded engine stores rows as JSON;
/// a list of numbers would quadruple every chunk).
mod blob_text {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

impl Value {
    pub fn column_type(&self) -> ColumnType {
        match self {
            Value::Text(_) => ColumnType::Text,
            Value::Int(_) => ColumnType::Int,
            Value::BigInt(_) => ColumnType::BigInt,
            Value::Double(_) => ColumnType::Double,
            Value::Boolean(_) => ColumnType::Boolean,
            Value::Blob(_) => ColumnType::Blob,
            Value::TextList(_) => ColumnType::TextList,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}
impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Text(s.clone())
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}

/// A row of one table: values in [`Table`] row order, `None` for null.
#[derive(Clone, Debug)]
pub struct Row {
    pub table: &'static Table,
    pub values: Vec<Option<Value>>,
}

impl PartialEq for Row {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.table, other.table) && self.values == other.values
    }
}

impl Row {
    pub fn new(table: &'static Table) -> Self {
        Row {
            table,
            values: vec![None; table.width()],
        }
    }

    /// Sets a column by name. Panics on a name the table does not declare:
    /// that is a programming error, caught by the first test that writes the row.
    pub fn set(mut self, name: &str, value: impl Into<Value>) -> Self {
        let i = self.idx(name);
        self.values[i] = Some(value.into());
        self
    }

    pub fn set_opt(mut self, name: &str, value: Option<impl Into<Value>>) -> Self {
        let i = self.idx(name);
        self.values[i] = value.map(Into::into);
        self
    }

    fn idx(&self, name: &str) -> usize {
        self.table.position(name)
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values[self.idx(name)].as_ref()
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(Value::Text(s)) => Some(s),
            _ => None,
        }
    }

    pub fn string(&self, name: &str) -> String {
        self.text(name).unwrap_or_default().to_owned()
    }

    /// Takes a cell out of the row (leaving null): a row read by value
    /// hands its texts on without copying them.
    pub fn take(&mut self, name: &str) -> Option<Value> {
        let i = self.idx(name);
        self.values[i].take()
    }

    /// Takes a text cell out of the row; `None` when it is null or not text.
    pub fn take_text(&mut self, name: &str) -> Option<String> {
        match self.take(name) {
            Some(Value::Text(s)) => Some(s),
            _ => None,
        }
    }

    pub fn text_list(&self, name: &str) -> Vec<String> {
        self.scalar(name).unwrap_or_default()
    }

    /// A cell of type `T`; `None` when it is null or of another type.
    pub fn scalar<T: Scalar>(&self, name: &str) -> Option<T> {
        self.get(name).and_then(T::from_value)
    }

    pub fn int(&self, name: &str) -> Option<i32> {
        self.scalar(name)
    }

    pub fn bigint(&self, name: &str) -> Option<i64> {
        self.scalar(name)
    }

    pub fn double(&self, name: &str) -> Option<f64> {
        self.scalar(name)
    }

    pub fn boolean(&self, name: &str) -> Option<bool> {
        self.scalar(name)
    }

    /// The primary key values (partition key then clustering).
    pub fn key(&self) -> Result<Vec<Value>, StoreError> {
        self.key_from(0)
    }

    /// The clustering part of the primary key (what a cursor continues after).
    pub fn clustering_key(&self) -> Result<Vec<Value>, StoreError> {
        self.key_from(self.table.partition_key.len())
    }

    /// The key columns from `start` on; an error when one is null.
    fn key_from(&self, start: usize) -> Result<Vec<Value>, StoreError> {
        self.values[start..self.table.key_len()]
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.clone().ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "{}: key column {} is null",
                        self.table.name,
                        self.table.column(start + i).name
                    ))
                })
            })
            .collect()
    }

    /// Checks that every key column is set and every value has its column's type.
    pub fn validate(&self) -> Result<(), StoreError> {
        self.key()?;
        check_types(self.table, 0, self.values.iter().map(Option::as_ref))
    }
}

pub(crate) fn check_types<'a>(
    table: &'static Table,
    start: usize,
    values: impl Iterator<Item = Option<&'a Value>>,
) -> Result<(), StoreError> {
    for (i, v) in values.enumerate() {
        let c = table.column(start + i);
        let counted =
            c.ty == ColumnType::Counter && v.map(Value::column_type) == Some(ColumnType::BigInt);
        if let Some(v) = v
            && v.column_type() != c.ty
            && !counted
        {
            return Err(StoreError::Invalid(format!(
                "{}.{}: expected {:?}, got {:?}",
                table.name,
                c.name,
                c.ty,
                v.column_type()
            )));
        }
    }
    Ok(())
}

/// Checks that `key` is a typed prefix of the table's primary key that contains
/// at least the whole partition key.
pub(crate) fn check_key(
    table: &'static Table,
    key: &[Value],
    full: bool,
) -> Result<(), StoreError> {
    if key.len() < table.partition_key.len() || key.len() > table.key_len() {
        return Err(StoreError::Invalid(format!(
            "{}: a key needs {}..={} values, got {}",
            table.name,
            table.partition_key.len(),
            table.key_len(),
            key.len()
        )));
    }
    if full && key.len() != table.key_len() {
        return Err(StoreError::Invalid(format!(
            "{}: full primary key required",
            table.name
        )));
    }
    check_types(table, 0, key.iter().map(Some))
}
