//! `kartei import-vocabulary`: NDJSON records in any order. Categories are
//! written parents first, then keywords; a bad line is reported with its number
//! and skipped. Writing the same file again changes nothing.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Deserialize;

use super::service::{CategoryInput, GndEntityInput, KeywordInput, Themes};
use crate::kernel::bounded;
use crate::kernel::error::ApiError;
use crate::kernel::progress::Progress;
use crate::kernel::roles::{Principal, Role};

/// Keywords per bulk upsert.
const KEYWORD_CHUNK: usize = 1_000;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Record {
    #[serde(rename_all = "camelCase")]
    Category {
        id: Option<String>,
        parent_id: Option<String>,
        label: Option<String>,
        notation: Option<String>,
        xtree_uri: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Keyword {
        id: Option<String>,
        label: Option<String>,
        #[serde(default)]
        synonyms: Option<Vec<String>>,
        note: Option<String>,
        primary_gnd_uri: Option<String>,
        #[serde(default)]
        related_gnd_uris: Option<Vec<String>>,
        gnd_entity_id: Option<String>,
        #[serde(default)]
        category_ids: Option<Vec<String>>,
        xtree_uri: Option<String>,
        created_at: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    GndEntity {
        id: Option<String>,
        name: Option<String>,
        description: Option<String>,
    },
}

#[derive(Debug, Default)]
pub struct ImportReport {
    pub categories: usize,
    pub keywords: usize,
    pub gnd_entities: usize,
    /// (1-based line number, what was wrong).
    pub errors: crate::kernel::ndjson::BadLines,
    pub elapsed: Duration,
}

impl ImportReport {
    pub fn records(&self) -> usize {
        self.categories + self.keywords + self.gnd_entities
    }

    pub fn summary(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-6);
        format!(
            "imported {} records ({} categories, {} keywords, {} GND entities), {} errors, {:.1} s, {:.0} rows/s",
            self.records(),
            self.categories,
            self.keywords,
            self.gnd_entities,
            self.errors.len(),
            secs,
            self.records() as f64 / secs
        )
    }
}

fn required(v: Option<String>, what: &str) -> Result<String, String> {
    v.filter(|s| !s.trim().is_empty())
        .ok_or_else(|| format!("missing {what}"))
}

fn message(e: ApiError) -> String {
    e.message()
}

/// One record of the file, as the services take it.
#[derive(Debug)]
pub enum Entry {
    GndEntity(GndEntityInput),
    Category(CategoryInput),
    Keyword(KeywordInput),
}

/// One line as a record, or why not (what the line alone can tell: JSON, the
/// record type, the required fields; the services check the rest).
pub fn parse(line: &str) -> Result<Entry, String> {
    let record: Record = serde_json::from_str(line).map_err(|e| format!("invalid record: {e}"))?;
    Ok(match record {
        Record::GndEntity {
            id,
            name,
            description,
        } => Entry::GndEntity(GndEntityInput {
            id: required(id, "id")?,
            name: name.unwrap_or_default(),
            description,
        }),
        Record::Category {
            id,
            parent_id,
            label,
            notation,
            xtree_uri,
        } => Entry::Category(CategoryInput {
            id: required(id, "id")?,
            parent_id,
            label: required(label, "label")?,
            notation,
            xtree_uri,
        }),
        Record::Keyword {
            id,
            label,
            synonyms,
            note,
            primary_gnd_uri,
            related_gnd_uris,
            gnd_entity_id,
            category_ids,
            xtree_uri,
            created_at,
        } => Entry::Keyword(KeywordInput {
            id: required(id, "id")?,
            label: required(label, "label")?,
            synonyms: synonyms.unwrap_or_default(),
            note,
            primary_gnd_uri,
            related_gnd_uris: related_gnd_uris.unwrap_or_default(),
            gnd_entity_id,
            category_ids: category_ids.unwrap_or_default(),
            xtree_uri,
            created_at,
        }),
    })
}

/// Imports every record of `input`.
pub async fn import(
    themes: &Themes,
    input: impl BufRead,
    concurrency: usize,
) -> std::io::Result<ImportReport> {
    let started = Instant::now();
    let mut report = ImportReport::default();
    let mut gnd = Vec::new();
    let mut categories: Vec<(usize, CategoryInput)> = Vec::new();
    let mut keywords = Vec::new();
    for line in crate::kernel::ndjson::lines(input) {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                // The input itself failed: report it, import what was read.
                report.errors.push((0, format!("cannot read further: {e}")));
                break;
            }
        };
        let n = line.number;
        let line = match line.text {
            Ok(t) => t,
            Err(reason) => {
                report.errors.push((n, reason));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match parse(&line) {
            Ok(Entry::GndEntity(g)) => gnd.push((n, g)),
            Ok(Entry::Category(c)) => categories.push((n, c)),
            Ok(Entry::Keyword(k)) => keywords.push((n, k)),
            Err(e) => report.errors.push((n, e)),
        }
    }

    write(
        themes,
        Entries {
            gnd,
            categories,
            keywords,
        },
        concurrency,
        &mut report,
    )
    .await;
    report.errors.sort();
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Records to write, each with the number the report gives it (a line, or
/// for SKOS a triple).
#[derive(Debug, Default)]
pub struct Entries {
    pub gnd: Vec<(usize, GndEntityInput)>,
    pub categories: Vec<(usize, CategoryInput)>,
    pub keywords: Vec<(usize, KeywordInput)>,
}

/// Writes `entries` as the import-vocabulary rules say: GND entities, then
/// categories parents first (a failed one takes the categories below it in
/// the input along), then keywords in bulk chunks; each record's failure
/// goes into `report` under its number, the others are written. Writing
/// the same entries again changes nothing.
pub async fn write(
    themes: &Themes,
    entries: Entries,
    concurrency: usize,
    report: &mut ImportReport,
) {
    let Entries {
        gnd,
        categories,
        keywords,
    } = entries;
    // The vocabulary is written as the operator of this machine.
    let who = &Principal::local("import-vocabulary", &[Role::Admin]);
    let progress = Progress::start(gnd.len() + categories.len() + keywords.len());
    let concurrency = concurrency.clamp(1, 256);

    for (n, r) in bounded(gnd, concurrency, |(n, g)| async move {
        (n, themes.upsert_gnd_entity(who, g).await)
    })
    .await
    {
        progress.tick();
        match r {
            Ok(_) => report.gnd_entities += 1,
            Err(e) => report.errors.push((n, message(e))),
        }
    }

    // Parents first: each round writes the categories whose parent is
    // already stored. A category that fails takes every category below it
    // in the file with it at once, so a deep chain costs at most
    // `--max-category-depth` rounds, not one per level.
    let in_file: HashMap<String, usize> =
        categories.iter().map(|(n, c)| (c.id.clone(), *n)).collect();
    let mut done: HashSet<String> = HashSet::new();
    let mut pending = categories;
    while !pending.is_empty() {
        let (ready, waiting): (Vec<_>, Vec<_>) =
            pending.into_iter().partition(|(_, c)| match &c.parent_id {
                Some(p) if !p.trim().is_empty() => done.contains(p) || !in_file.contains_key(p),
                _ => true,
            });
        if ready.is_empty() {
            for (n, c) in waiting {
                report
                    .errors
                    .push((n, format!("category {} is part of a parent cycle", c.id)));
                progress.tick();
            }
            break;
        }
        let results = bounded(ready, concurrency, |(n, c)| async move {
            let id = c.id.clone();
            (n, id, themes.upsert_category(who, c).await.map_err(message))
        })
        .await;
        let mut failed = Vec::new();
        for (n, id, r) in results {
            progress.tick();
            match r {
                Ok(_) => {
                    report.categories += 1;
                    done.insert(id);
                }
                Err(e) => {
                    report.errors.push((n, e));
                    failed.push(id);
                }
            }
        }
        let mut below: HashMap<String, Vec<(usize, CategoryInput)>> = HashMap::new();
        for (n, c) in waiting {
            let parent = c.parent_id.clone().unwrap_or_default();
            below.entry(parent).or_default().push((n, c));
        }
        while let Some(parent) = failed.pop() {
            for (n, c) in below.remove(&parent).unwrap_or_default() {
                progress.tick();
                report
                    .errors
                    .push((n, format!("parent category {parent} could not be imported")));
                failed.push(c.id);
            }
        }
        pending = below.into_values().flatten().collect();
        pending.sort_by_key(|(n, _)| *n);
    }

    // Keywords in chunks: one bulk upsert each, two chunks in flight.
    let chunks: Vec<Vec<(usize, KeywordInput)>> = {
        let mut chunks = Vec::new();
        let mut it = keywords.into_iter().peekable();
        while it.peek().is_some() {
            chunks.push(it.by_ref().take(KEYWORD_CHUNK).collect());
        }
        chunks
    };
    let mut done = futures::stream::iter(chunks.into_iter().map(|chunk| async move {
        let (numbers, inputs): (Vec<usize>, Vec<KeywordInput>) = chunk.into_iter().unzip();
        (numbers, themes.import_keywords(who, inputs).await)
    }))
    .buffer_unordered(2);
    while let Some((numbers, outcome)) = done.next().await {
        match outcome {
            Ok(results) => {
                for (n, r) in numbers.into_iter().zip(results) {
                    progress.tick();
                    match r {
                        Ok(_) => report.keywords += 1,
                        Err(e) => report.errors.push((n, message(e))),
                    }
                }
            }
            Err(e) => {
                let m = message(e);
                for n in numbers {
                    progress.tick();
                    report.errors.push((n, m.clone()));
                }
            }
        }
    }
    drop(done);
    progress.finish();
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// Lines near the format (records with fields missing, blank, of the
    /// wrong type) and anything at all.
    fn line() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just(json!(null)),
            ".{0,8}".prop_map(|s| json!(s)),
            Just(json!("  ")),
            any::<i64>().prop_map(|n| json!(n)),
            Just(json!(99999999999999999999.0)),
            prop::collection::vec(".{0,6}", 0..3).prop_map(|v| json!(v)),
            Just(json!({})),
        ];
        let field = prop::sample::select(vec![
            "type",
            "id",
            "label",
            "name",
            "parentId",
            "synonyms",
            "categoryIds",
            "relatedGndUris",
            "note",
            "createdAt",
            "description",
        ]);
        let record = (
            prop::sample::select(vec!["category", "keyword", "gndEntity", "Keyword", "other"]),
            prop::collection::vec((field, value), 0..6),
        )
            .prop_map(|(t, fields)| {
                let mut doc = serde_json::Map::new();
                doc.insert("type".into(), json!(t));
                for (k, v) in fields {
                    doc.insert(k.into(), v);
                }
                serde_json::Value::Object(doc).to_string()
            });
        prop_oneof![
            3 => record,
            1 => any::<String>(),
            1 => "[{}\\[\\]\":, a-z0-9]{0,30}",
        ]
    }

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        /// Any line: a record whose required fields are there, or a reason.
        #[test]
        fn any_line_is_a_record_with_its_required_fields_or_a_reason(l in line()) {
            match parse(&l) {
                Ok(Entry::GndEntity(g)) => prop_assert!(!g.id.trim().is_empty()),
                Ok(Entry::Category(c)) => {
                    prop_assert!(!c.id.trim().is_empty() && !c.label.trim().is_empty())
                }
                Ok(Entry::Keyword(k)) => {
                    prop_assert!(!k.id.trim().is_empty() && !k.label.trim().is_empty())
                }
                Err(reason) => prop_assert!(
                    reason.starts_with("invalid record") || reason.starts_with("missing "),
                    "{reason}"
                ),
            }
        }

        #[test]
        fn a_keyword_reads_back_as_written(
            id in "[a-z0-9-]{1,12}",
            label in "\\PC{1,20}",
            synonyms in prop::collection::vec(".{0,10}", 0..4),
            category_ids in prop::collection::vec("[a-z-]{1,8}", 0..4),
            note in prop::option::of(".{0,20}"),
        ) {
            prop_assume!(!label.trim().is_empty());
            let l = json!({
                "type": "keyword", "id": id, "label": label, "synonyms": synonyms,
                "categoryIds": category_ids, "note": note,
            })
            .to_string();
            let Ok(Entry::Keyword(k)) = parse(&l) else {
                return Err(TestCaseError::fail(format!("{l} is a keyword")));
            };
            prop_assert_eq!(
                (k.id, k.label, k.synonyms, k.category_ids, k.note),
                (id, label, synonyms, category_ids, note)
            );
        }

        #[test]
        fn a_category_without_an_id_or_label_is_refused(
            id in prop_oneof![Just(None), "[ \t]{0,3}".prop_map(Some), "[a-z]{1,5}".prop_map(Some)],
            label in prop_oneof![Just(None), "[ \t]{0,3}".prop_map(Some), "[a-z]{1,5}".prop_map(Some)],
        ) {
            let l = json!({"type": "category", "id": id, "label": label}).to_string();
            let complete = |v: &Option<String>| v.as_ref().is_some_and(|s| !s.trim().is_empty());
            match parse(&l) {
                Ok(Entry::Category(_)) => prop_assert!(complete(&id) && complete(&label)),
                Ok(other) => prop_assert!(false, "{other:?}"),
                Err(reason) => {
                    prop_assert!(!(complete(&id) && complete(&label)));
                    prop_assert!(reason.starts_with("missing "), "{reason}");
                }
            }
        }
    }
}
