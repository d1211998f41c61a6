//! Between the seam's values and CQL's: conversions, key conditions, the column lists and orders of statements derived from a table's declaration.

use super::*;

/// Microseconds since the epoch, as CQL write timestamps count.
pub(super) fn write_time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

pub(super) fn mutation_bytes(m: &Mutation) -> usize {
    let values: &[Option<Value>] = match m {
        Mutation::Upsert { row, .. } => &row.values,
        Mutation::Delete { .. } | Mutation::Add { .. } => return 64,
    };
    values
        .iter()
        .map(|v| match v {
            Some(Value::Text(s)) => s.len() + 4,
            Some(Value::Blob(b)) => b.len() + 4,
            Some(Value::TextList(l)) => l.iter().map(|s| s.len() + 4).sum::<usize>() + 4,
            _ => 8,
        })
        .sum::<usize>()
        + 16
}

pub(super) fn to_cql(v: &Option<Value>) -> Option<CqlValue> {
    v.as_ref().map(|v| match v {
        Value::Text(s) => CqlValue::Text(s.clone()),
        Value::Int(i) => CqlValue::Int(*i),
        Value::BigInt(i) => CqlValue::BigInt(*i),
        Value::Double(f) => CqlValue::Double(*f),
        Value::Boolean(b) => CqlValue::Boolean(*b),
        Value::Blob(b) => CqlValue::Blob(b.clone()),
        Value::TextList(l) => CqlValue::List(l.iter().cloned().map(CqlValue::Text).collect()),
    })
}

pub(super) fn from_cql(v: Option<CqlValue>) -> Result<Option<Value>, StoreError> {
    Ok(match v {
        None | Some(CqlValue::Empty) => None,
        Some(CqlValue::Text(s)) | Some(CqlValue::Ascii(s)) => Some(Value::Text(s)),
        Some(CqlValue::Int(i)) => Some(Value::Int(i)),
        Some(CqlValue::BigInt(i)) => Some(Value::BigInt(i)),
        Some(CqlValue::Counter(c)) => Some(Value::BigInt(c.0)),
        Some(CqlValue::Double(f)) => Some(Value::Double(f)),
        Some(CqlValue::Boolean(b)) => Some(Value::Boolean(b)),
        Some(CqlValue::Blob(b)) => Some(Value::Blob(b)),
        Some(CqlValue::List(l)) => Some(Value::TextList(
            l.into_iter()
                .map(|v| match v {
                    CqlValue::Text(s) => Ok(s),
                    other => Err(StoreError::Internal(format!(
                        "unexpected list item {other:?}"
                    ))),
                })
                .collect::<Result<_, _>>()?,
        )),
        Some(other) => {
            return Err(StoreError::Internal(format!(
                "unexpected CQL value {other:?}"
            )));
        }
    })
}

pub(super) fn key_values(key: &[Value]) -> Vec<Option<CqlValue>> {
    key.iter().map(|v| to_cql(&Some(v.clone()))).collect()
}

/// `a = ? AND b = ?` for the first `n` key columns.
pub(super) fn key_where(table: &Table, n: usize) -> String {
    (0..n)
        .map(|i| format!("{} = ?", table.column(i).name))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// `a ASC, b DESC` as declared, or every direction flipped.
pub(super) fn clustering_order(table: &Table, reversed: bool) -> String {
    table
        .clustering
        .iter()
        .map(|(c, o)| {
            let asc = (*o == Order::Asc) != reversed;
            format!("{} {}", c.name, if asc { "ASC" } else { "DESC" })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn select_list(table: &Table) -> String {
    table
        .all_columns()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A value of a key column of type `ty` for the health check's read
/// (whether a row has it does not matter).
pub(super) fn probe_value(ty: ColumnType) -> CqlValue {
    match ty {
        ColumnType::Text => CqlValue::Text("kartei-health-check".into()),
        ColumnType::TextList => CqlValue::List(Vec::new()),
        ColumnType::Int => CqlValue::Int(0),
        ColumnType::BigInt | ColumnType::Counter => CqlValue::BigInt(0),
        ColumnType::Double => CqlValue::Double(0.0),
        ColumnType::Boolean => CqlValue::Boolean(false),
        // Cassandra refuses an empty partition key.
        ColumnType::Blob => CqlValue::Blob(vec![0]),
    }
}
