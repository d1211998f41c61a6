//! Importers killed at random points, then rerun: the same end state.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kartei::store::DynStore;

use super::{
    Rng, Target, assert_same, assignments_file, drop_keyspaces, dump, finish, in_step_after_kill,
    kill_after, open_dir, own_keyspaces, seeds, vocabulary_file, workflow_tables,
};
use crate::support::run;

const IMPORTS: [&str; 2] = ["import-vocabulary", "import-assignments"];

fn import_args<'a>(which: &'a str, files: &'a (PathBuf, PathBuf)) -> Vec<&'a str> {
    match which {
        "import-vocabulary" => vec![which, files.0.to_str().unwrap()],
        _ => vec![
            which,
            files.1.to_str().unwrap(),
            "--creator",
            "fault-machine",
        ],
    }
}

/// Imports both files into `reference` without interruption, then, per seed,
/// into a fresh target where each importer is SIGKILLed at a random moment
/// within its uninterrupted run time and run again; the end state must equal
/// the reference's, and the query tables and counts must be in step
/// (`in_step_after_kill`).
async fn importers_killed(
    reference: Target,
    mut fresh: impl FnMut(u64) -> Target,
    open: impl Fn(&Target) -> DynStore,
    sizes: (usize, usize),
    seeds: Vec<u64>,
) {
    let work = tempfile::tempdir().unwrap();
    let files = (
        vocabulary_file(work.path(), sizes.0),
        assignments_file(work.path(), sizes.1, sizes.0),
    );
    let mut took = Vec::new();
    for which in IMPORTS {
        let started = Instant::now();
        finish(&import_args(which, &files), &reference);
        took.push(started.elapsed());
    }
    let tables = workflow_tables();
    let expected = dump(&open(&reference), &tables).await;
    assert!(
        expected["objects_keywords"].len() > sizes.1 / 2,
        "the reference import wrote too little"
    );
    for seed in seeds {
        let mut rng = Rng(seed);
        let target = fresh(seed);
        let mut report = Vec::new();
        for (which, took) in IMPORTS.iter().zip(&took) {
            let at = Duration::from_millis(rng.between(5, (took.as_millis() as u64).max(10)));
            let killed = kill_after(&import_args(which, &files), &target, at);
            finish(&import_args(which, &files), &target);
            report.push(format!(
                "{which} {} at {} ms of {} ms",
                if killed {
                    "killed"
                } else {
                    "finished before the kill"
                },
                at.as_millis(),
                took.as_millis()
            ));
        }
        eprintln!("seed {seed}: {}", report.join("; "));
        let got = dump(&open(&target), &tables).await;
        assert_same(&expected, &got, seed);
        in_step_after_kill(&target, &[]);
    }
}

#[test]
fn embedded_importers_killed_at_random_points_rerun_to_the_same_end_state() {
    run(async {
        let base = tempfile::tempdir().unwrap();
        let reference = Target::Dir(base.path().join("reference"));
        let root = base.path().to_owned();
        importers_killed(
            reference,
            |seed| Target::Dir(root.join(format!("seed-{seed}"))),
            |t| match t {
                Target::Dir(d) => open_dir(d),
                Target::Cluster { .. } => unreachable!(),
            },
            (3_000, 40_000),
            seeds(3),
        )
        .await;
    });
}

#[test]
fn cassandra_importers_killed_at_a_random_point_rerun_to_the_same_end_state() {
    if crate::support::cassandra_off() {
        return;
    }
    run(async {
        // Two keyspace sets of their own (the reference and the killed run),
        // dropped at the end: one seed per run keeps the test node's memory low.
        let sets = [own_keyspaces().await, own_keyspaces().await];
        let target = |i: usize| sets[i].1.clone();
        let store_of = |t: &Target| -> DynStore {
            match t {
                Target::Cluster { env, .. } => {
                    sets.iter().find(|(s, _)| s.env() == env).unwrap().0.clone()
                }
                Target::Dir(_) => unreachable!(),
            }
        };
        importers_killed(target(0), |_| target(1), store_of, (600, 6_000), seeds(1)).await;
        for (s, _) in &sets {
            drop_keyspaces(s).await;
        }
    });
}
