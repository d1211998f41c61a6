//! The engine suite: the same behaviour of the table API on both engines.

mod batches;
mod cas;
mod counters;
mod cursors;
mod slices;
mod tables;

use kartei::store::ColumnType::{BigInt, Boolean, Counter, Double, Int, Text, TextList};
use kartei::store::{Keyspace, Mutation, Order, Row, Table, col};

static PROBE: Table = Table {
    keyspace: Keyspace::Themes,
    name: "engine_probe",
    partition_key: &[col("p", Text)],
    clustering: &[(col("c1", Text), Order::Asc), (col("c2", Int), Order::Asc)],
    columns: &[
        col("v", Text),
        col("n", BigInt),
        col("d", Double),
        col("b", Boolean),
        col("l", TextList),
    ],
};

static PROBE_DESC: Table = Table {
    keyspace: Keyspace::Themes,
    name: "engine_probe_desc",
    partition_key: &[col("p", Text)],
    clustering: &[(col("t", BigInt), Order::Desc)],
    columns: &[col("v", Text)],
};

/// Counters: a partition of named counts.
static PROBE_COUNT: Table = Table {
    keyspace: Keyspace::Themes,
    name: "engine_probe_count",
    partition_key: &[col("p", Text)],
    clustering: &[(col("name", Text), Order::Asc)],
    columns: &[col("n", Counter)],
};

pub static PROBE_TABLES: &[&Table] = &[&PROBE, &PROBE_DESC, &PROBE_COUNT];

fn probe(p: &str, c1: &str, c2: i32) -> Row {
    Row::new(&PROBE)
        .set("p", p)
        .set("c1", c1)
        .set("c2", c2)
        .set("v", format!("{c1}/{c2}"))
}

fn keys(rows: &[Row]) -> Vec<(String, i32)> {
    rows.iter()
        .map(|r| (r.string("c1"), r.int("c2").unwrap()))
        .collect()
}

async fn fill(s: &kartei::store::DynStore, p: &str) {
    let mut batch = Vec::new();
    for c1 in ["a", "b", "c"] {
        for c2 in 1..=3 {
            batch.push(Mutation::upsert(probe(p, c1, c2)));
        }
    }
    s.apply(batch).await.unwrap();
}
