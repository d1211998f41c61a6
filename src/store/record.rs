//! Row types declared once: a [`Cell`] says how one field reads from and
//! writes to its column, with the lenient rules every row mapping shares, and
//! [`record!`] declares a struct bound to its [`Table`](super::Table) together
//! with its `from_row`, `from_owned` and `to_row`, so no mapping is written
//! out by hand.

use super::Value;

/// A non-null value of one column type, as Rust holds it.
pub trait Scalar: Sized {
    /// `None` when the value is of another column type.
    fn from_value(v: &Value) -> Option<Self>;
    /// The same, taking the value: a text or list moves instead of being copied.
    fn from_owned(v: Value) -> Option<Self> {
        Self::from_value(&v)
    }
    fn to_value(&self) -> Value;
}

/// How a record field reads from and writes to its cell.
pub trait Cell: Sized {
    /// The field from its cell (`None` for null). `None` back means the row
    /// is not a readable record: only a text enum that is null or unknown
    /// does that; the other types read a null as their default.
    fn read(v: Option<&Value>) -> Option<Self>;
    /// The same, taking the cell (a row read by value: nothing copied).
    fn take(v: Option<Value>) -> Option<Self> {
        Self::read(v.as_ref())
    }
    /// The cell to store (`None` writes null).
    fn write(&self) -> Option<Value>;
}

macro_rules! scalar {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl Scalar for $t {
            fn from_value(v: &Value) -> Option<Self> {
                match v {
                    Value::$variant(x) => Some(x.clone()),
                    _ => None,
                }
            }
            fn from_owned(v: Value) -> Option<Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn to_value(&self) -> Value {
                Value::$variant(self.clone())
            }
        }

        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::$variant(v)
            }
        }

        /// A null (or mistyped) cell reads as the type's default.
        impl Cell for $t {
            fn read(v: Option<&Value>) -> Option<Self> {
                Some(v.and_then(Self::from_value).unwrap_or_default())
            }
            fn take(v: Option<Value>) -> Option<Self> {
                Some(v.and_then(Self::from_owned).unwrap_or_default())
            }
            fn write(&self) -> Option<Value> {
                Some(self.to_value())
            }
        }
    )*};
}
scalar!(
    String => Text,
    i32 => Int,
    i64 => BigInt,
    f64 => Double,
    bool => Boolean,
    Vec<String> => TextList,
);

impl<T: Scalar> Cell for Option<T> {
    fn read(v: Option<&Value>) -> Option<Self> {
        Some(v.and_then(T::from_value))
    }
    fn take(v: Option<Value>) -> Option<Self> {
        Some(v.and_then(T::from_owned))
    }
    fn write(&self) -> Option<Value> {
        self.as_ref().map(T::to_value)
    }
}

/// Makes a field-less enum with `as_str` and `parse` a text cell: stored by
/// its spelling; a row whose cell is null or unknown is not readable, unless
/// the field is an `Option` (then it reads as `None`).
macro_rules! text_cell {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::store::Scalar for $t {
            fn from_value(v: &$crate::store::Value) -> Option<Self> {
                match v {
                    $crate::store::Value::Text(s) => Self::parse(s),
                    _ => None,
                }
            }
            fn to_value(&self) -> $crate::store::Value {
                self.as_str().into()
            }
        }

        impl $crate::store::Cell for $t {
            fn read(v: Option<&$crate::store::Value>) -> Option<Self> {
                v.and_then(<Self as $crate::store::Scalar>::from_value)
            }
            fn write(&self) -> Option<$crate::store::Value> {
                Some($crate::store::Scalar::to_value(self))
            }
        }
    )*};
}
pub(crate) use text_cell;

/// Where a record's fields stand in a row, in field order: the positions
/// `record!` looked up once for its own table, or, for a row of another
/// table with the same column names, looked up by name.
pub enum Positions {
    Known(std::slice::Iter<'static, usize>),
    ByName(std::vec::IntoIter<usize>),
}

impl Positions {
    pub fn of(
        row: &super::Row,
        table: &'static super::Table,
        cells: &'static [usize],
        names: &[&str],
    ) -> Self {
        if std::ptr::eq(row.table, table) {
            Positions::Known(cells.iter())
        } else {
            Positions::ByName(
                names
                    .iter()
                    .map(|n| row.table.position(n))
                    .collect::<Vec<_>>()
                    .into_iter(),
            )
        }
    }

    /// The next field's position.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> usize {
        match self {
            Positions::Known(i) => i.next().copied(),
            Positions::ByName(i) => i.next(),
        }
        .expect("a position for every field")
    }
}

/// Declares a record: a struct whose fields are columns of one table, with
///
/// - `from_row(&Row) -> Self`: each field read by its [`Cell`], a null cell
///   as the field type's `Default` (so a field without one, a required text
///   enum, does not compile here);
/// - or, declared `(from_row -> Option)`, `from_row(&Row) -> Option<Self>`:
///   `None` when a field cannot be read (see [`Cell::read`]);
/// - `from_owned(Row)`, the same taking the row: its texts and lists move
///   into the record instead of being copied (for reads that own their rows);
/// - `to_row(&self) -> Row`: a row of the table with every field's cell.
///
/// The fields' columns are found in the table once per record, not by name
/// for every row read.
///
/// ```ignore
/// record! {
///     /// A GND entity type.
///     #[derive(Clone, Debug, PartialEq)]
///     pub struct GndEntity in GND_ENTITIES where (type = GND_TYPE) {
///         pub id: String,
///         pub name: String = "label",
///         pub description: Option<String>,
///     }
/// }
/// ```
///
/// A field is stored under its own name unless `= "column"` names the column.
/// `where (column = CONST, …)` are key cells every row of this record has
/// (a constant partition); they are written and not read.
macro_rules! record {
    ($(#[$meta:meta])* $vis:vis struct $name:ident in $table:ident $(($($read:tt)+))?
     $(where ($($kc:tt = $kv:path),+ $(,)?))?
     {$($(#[$fmeta:meta])* $fvis:vis $field:ident: $fty:ty $(= $col:literal)?),* $(,)?}
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $fty,)*
        }

        impl $name {
            /// This record as a row of its table.
            pub fn to_row(&self) -> $crate::store::Row {
                $crate::store::Row::new(&$table)
                    $($(.set(stringify!($kc), $kv))+)?
                    $(.set_opt(
                        $crate::store::record!(@col $field $($col)?),
                        $crate::store::Cell::write(&self.$field),
                    ))*
            }
        }

        $crate::store::record!(@from_row [$($($read)+)?] $name $table {$($field $($col)?),*});

        impl $name {
            /// The fields' columns, in the order of the fields.
            const COLUMNS: &'static [&'static str] =
                &[$($crate::store::record!(@col $field $($col)?)),*];

            /// The cells of `r` in the order of the fields: by positions
            /// looked up once when `r` is a row of the record's table, else
            /// by name.
            fn positions(r: &$crate::store::Row) -> $crate::store::Positions {
                static AT: std::sync::LazyLock<Vec<usize>> = std::sync::LazyLock::new(|| {
                    $name::COLUMNS.iter().map(|c| $table.position(c)).collect()
                });
                $crate::store::Positions::of(r, &$table, &AT, Self::COLUMNS)
            }
        }
    };
    (@from_row [from_row -> Option] $name:ident $table:ident {$($field:ident $($col:literal)?),*}) => {
        impl $name {
            /// This record from a row of its table; `None` when a field the
            /// record cannot do without is unreadable.
            pub fn from_row(r: &$crate::store::Row) -> Option<Self> {
                let mut at = Self::positions(r);
                Some($name {
                    $($field: $crate::store::Cell::read(r.values[at.next()].as_ref())?,)*
                })
            }

            /// The same, taking the row: its texts and lists move into the
            /// record instead of being copied.
            pub fn from_owned(mut r: $crate::store::Row) -> Option<Self> {
                let mut at = Self::positions(&r);
                Some($name {
                    $($field: $crate::store::Cell::take(r.values[at.next()].take())?,)*
                })
            }
        }
    };
    (@from_row [] $name:ident $table:ident {$($field:ident $($col:literal)?),*}) => {
        impl $name {
            /// This record from a row of its table (a null cell reads as the
            /// field's default).
            pub fn from_row(r: &$crate::store::Row) -> Self {
                let mut at = Self::positions(r);
                $name {
                    $($field: $crate::store::Cell::read(r.values[at.next()].as_ref())
                        .unwrap_or_default(),)*
                }
            }

            /// The same, taking the row: its texts and lists move into the
            /// record instead of being copied.
            pub fn from_owned(mut r: $crate::store::Row) -> Self {
                let mut at = Self::positions(&r);
                $name {
                    $($field: $crate::store::Cell::take(r.values[at.next()].take())
                        .unwrap_or_default(),)*
                }
            }
        }
    };
    (@col $field:ident) => { stringify!($field) };
    (@col $field:ident $col:literal) => { $col };
}
pub(crate) use record;

#[cfg(test)]
mod tests {
    use crate::store::{Row, table};

    table! {
        PLAIN: Themes.plain
            partition(id: Text)
            columns(label: Text, n: Int, big: BigInt, x: Double, flag: Boolean, list: TextList,
                note: Text, kind: Text, maybe_kind: Text)
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Kind {
        A,
    }
    impl Kind {
        fn as_str(self) -> &'static str {
            "A"
        }
        fn parse(s: &str) -> Option<Self> {
            (s == "A").then_some(Kind::A)
        }
    }
    text_cell!(Kind);

    record! {
        #[derive(Debug, PartialEq)]
        struct Plain in PLAIN (from_row -> Option) {
            id: String,
            name: String = "label",
            n: i32,
            big: i64,
            x: f64,
            flag: bool,
            list: Vec<String>,
            note: Option<String>,
            kind: Kind,
            maybe_kind: Option<Kind>,
        }
    }

    #[test]
    fn null_cells_read_as_defaults_and_an_enum_is_required() {
        let row = Row::new(&PLAIN).set("id", "k").set("kind", "A");
        let p = Plain::from_row(&row).expect("readable");
        assert_eq!(
            p,
            Plain {
                id: "k".into(),
                name: String::new(),
                n: 0,
                big: 0,
                x: 0.0,
                flag: false,
                list: Vec::new(),
                note: None,
                kind: Kind::A,
                maybe_kind: None,
            }
        );
        assert_eq!(p.to_row().text("label"), Some(""));
        assert_eq!(p.to_row().get("note"), None);
        assert_eq!(Plain::from_row(&Row::new(&PLAIN).set("id", "k")), None);
        let unknown = row.clone().set("maybe_kind", "B");
        assert_eq!(Plain::from_row(&unknown).map(|p| p.maybe_kind), Some(None));
    }

    #[test]
    fn a_record_reads_back_what_it_wrote() {
        let p = Plain {
            id: "k".into(),
            name: "Name".into(),
            n: 3,
            big: 1 << 40,
            x: 0.5,
            flag: true,
            list: vec!["a".into()],
            note: Some("n".into()),
            kind: Kind::A,
            maybe_kind: Some(Kind::A),
        };
        let row = p.to_row();
        assert_eq!(row.text("label"), Some("Name"));
        assert_eq!(Plain::from_row(&row).as_ref(), Some(&p));
        assert_eq!(Plain::from_owned(row).as_ref(), Some(&p));
    }

    table! {
        /// The same columns in another order: a record reads a row of such
        /// a table (a query table of the same data) by the columns' names.
        OTHER: Themes.plain_other
            partition(kind: Text)
            clustering(id: Text Asc)
            columns(maybe_kind: Text, note: Text, list: TextList, flag: Boolean, x: Double,
                big: BigInt, n: Int, label: Text)
    }

    #[test]
    fn a_row_of_another_table_is_read_by_column_name() {
        let row = Row::new(&OTHER)
            .set("id", "k")
            .set("kind", "A")
            .set("label", "Name")
            .set("n", 3)
            .set("list", vec!["a".to_owned()]);
        let want = Plain {
            id: "k".into(),
            name: "Name".into(),
            n: 3,
            big: 0,
            x: 0.0,
            flag: false,
            list: vec!["a".into()],
            note: None,
            kind: Kind::A,
            maybe_kind: None,
        };
        assert_eq!(Plain::from_row(&row).as_ref(), Some(&want));
        assert_eq!(Plain::from_owned(row), Some(want));
    }
}
