//! The batch commands (imports and maintenance) as jobs: one [`Job`] value
//! that the command line runs itself on a store it opened, or hands to the
//! server that holds the data directory (`app::control`), which runs the
//! very same code on its own store. What a job says goes to a [`Console`]:
//! the terminal's stdout and stderr, or the lines streamed back to the
//! command that handed it over.

mod skos;
mod suggestions;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::domains::assignments::{self, service::Assignments};
use crate::domains::jobs::model::JobState;
use crate::domains::jobs::service::{Jobs, Tracked};
use crate::domains::objects::service::Objects;
use crate::domains::suggestions::service::Suggestions;
use crate::domains::themes::{import as vocabulary, service::Themes};
use crate::kernel::chunked;
use crate::kernel::ndjson::BadLines;
use crate::kernel::roles::{Principal, Role};
use crate::store::DynStore;

/// One batch command with everything it needs but its store and input.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Job {
    ImportVocabulary {
        concurrency: usize,
        max_category_depth: usize,
    },
    ImportAssignments {
        creator: String,
        concurrency: usize,
    },
    ImportObjects {
        concurrency: usize,
    },
    ImportSkos {
        concurrency: usize,
        max_category_depth: usize,
        /// `ttl`, `rdf` or `jsonld`; none: from the file's extension (else Turtle).
        format: Option<String>,
        max_triples: usize,
        max_bytes: u64,
    },
    ExportSkos {
        portal: String,
        format: String,
        base: String,
        license: Option<String>,
    },
    ImportSuggestions {
        wiki: String,
        max_errors: usize,
        keep: usize,
        concurrency: usize,
        dead_after: i64,
    },
    RepairViews {
        check: bool,
        portal: Option<String>,
    },
    GcBinaries {
        gc_grace: u64,
    },
    RecheckBinaries,
    SuggestionsList {
        wiki: String,
    },
    SuggestionsRollback {
        wiki: String,
    },
    SuggestionsPurge {
        wiki: String,
        keep: usize,
        dead_after: i64,
    },
}

impl Job {
    /// Whether it reads an input file.
    pub fn reads_input(&self) -> bool {
        matches!(
            self,
            Job::ImportVocabulary { .. }
                | Job::ImportAssignments { .. }
                | Job::ImportObjects { .. }
                | Job::ImportSkos { .. }
                | Job::ImportSuggestions { .. }
        )
    }

    /// Who may run it over HTTP: imports and reads with the machine or the
    /// admin role (as the importers run locally), maintenance with admin only.
    pub fn roles(&self) -> &'static [Role] {
        match self {
            Job::ImportVocabulary { .. }
            | Job::ImportAssignments { .. }
            | Job::ImportObjects { .. }
            | Job::ImportSkos { .. }
            | Job::ExportSkos { .. }
            | Job::ImportSuggestions { .. }
            | Job::SuggestionsList { .. } => &[Role::Machine, Role::Admin],
            Job::RepairViews { .. }
            | Job::GcBinaries { .. }
            | Job::RecheckBinaries
            | Job::SuggestionsRollback { .. }
            | Job::SuggestionsPurge { .. } => &[Role::Admin],
        }
    }

    /// Its command's name, as the command line spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Job::ImportVocabulary { .. } => "import-vocabulary",
            Job::ImportAssignments { .. } => "import-assignments",
            Job::ImportObjects { .. } => "import-objects",
            Job::ImportSkos { .. } => "import-skos",
            Job::ExportSkos { .. } => "export-skos",
            Job::ImportSuggestions { .. } => "import-suggestions",
            Job::RepairViews { .. } => "repair-views",
            Job::GcBinaries { .. } => "gc-binaries",
            Job::RecheckBinaries => "recheck-binaries",
            Job::SuggestionsList { .. } => "suggestions list",
            Job::SuggestionsRollback { .. } => "suggestions rollback",
            Job::SuggestionsPurge { .. } => "suggestions purge",
        }
    }
}

/// Where a job's input is read from, and the name its messages give it.
#[derive(Clone, Debug)]
pub struct Input {
    /// The file; `None` is standard input.
    pub path: Option<PathBuf>,
    /// How messages name it (`file:line: reason`): the path the operator typed.
    pub shown: String,
}

impl Input {
    /// `-` is standard input.
    pub fn from_arg(path: &Path) -> Input {
        Input {
            path: (path.as_os_str() != "-").then(|| path.to_owned()),
            shown: if path.as_os_str() == "-" {
                "stdin".into()
            } else {
                path.display().to_string()
            },
        }
    }

    /// Its size, when it is a file.
    fn size(&self) -> Option<u64> {
        std::fs::metadata(self.path.as_ref()?).ok().map(|m| m.len())
    }

    /// The reader, adding what it reads to `read`, and the size (0 unknown).
    fn open(&self, read: Arc<AtomicU64>) -> anyhow::Result<(Box<dyn std::io::Read + Send>, usize)> {
        let (inner, size): (Box<dyn std::io::Read + Send>, usize) = match &self.path {
            None => (Box::new(std::io::stdin()), 0),
            Some(p) => {
                let file = std::fs::File::open(p)
                    .map_err(|e| Refused(format!("cannot read {}: {e}", self.shown)))?;
                let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
                (Box::new(file), size)
            }
        };
        Ok((Box::new(Counting { inner, read }), size))
    }
}

/// A reader that counts what passes (a job's progress).
struct Counting {
    inner: Box<dyn std::io::Read + Send>,
    read: Arc<AtomicU64>,
}

impl std::io::Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A mistake in how a job was asked for: one sentence (the command line
/// exits 2 with it).
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Refused {}

/// Which of the two streams a line belongs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Out,
    Err,
}

/// Where a job's lines go: a terminal or a handed-over command, and the
/// job's record.
pub struct Console {
    say: Box<dyn FnMut(Stream, String) + Send>,
    record: Option<Arc<Tracked>>,
}

impl Console {
    /// The process's own stdout and stderr.
    pub fn terminal() -> Console {
        Console::new(|stream, line| match stream {
            Stream::Out => println!("{line}"),
            Stream::Err => eprintln!("{line}"),
        })
    }

    pub fn new(say: impl FnMut(Stream, String) + Send + 'static) -> Console {
        Console {
            say: Box::new(say),
            record: None,
        }
    }

    fn line(&mut self, stream: Stream, line: String) {
        if let Some(r) = &self.record {
            r.said(&line);
        }
        (self.say)(stream, line);
    }

    pub fn out(&mut self, line: impl Into<String>) {
        self.line(Stream::Out, line.into());
    }

    pub fn err(&mut self, line: impl Into<String>) {
        self.line(Stream::Err, line.into());
    }

    /// The bad lines kept, `file:line: reason`, and how many more there were.
    fn bad_lines(&mut self, shown: &str, errors: &BadLines) {
        for (line, msg) in errors.iter() {
            let line = format!("{shown}:{line}: {msg}");
            if let Some(r) = &self.record {
                r.bad_line(&line);
            }
            (self.say)(Stream::Err, line);
        }
        if errors.dropped() > 0 {
            if let Some(r) = &self.record {
                r.more_bad_lines(errors.dropped() as u64);
            }
            (self.say)(
                Stream::Err,
                format!("... and {} more bad lines", errors.dropped()),
            );
        }
    }

    /// How an import that writes row by row ended: its bad lines, its
    /// summary, and when the store stopped it, where and that a rerun goes
    /// on (`rerun`: what a rerun does with what is there). Its exit status:
    /// 0, or 1 with bad lines or stopped.
    fn import_ended(&mut self, shown: &str, report: &dyn chunked::Report, rerun: &str) -> u8 {
        let errors = report.errors();
        self.bad_lines(shown, errors);
        self.err(report.summary());
        if let Some(why) = report.stopped() {
            self.err(format!(
                "error: the import stopped {why}. What came before is written; run the same command again once that is fixed ({rerun})."
            ));
            return 1;
        }
        u8::from(!errors.is_empty())
    }
}

fn failed(e: crate::kernel::error::ApiError) -> anyhow::Error {
    anyhow::anyhow!(e.message())
}

/// Who runs a command on this machine: `local:<user>`.
pub fn local_user() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| uid().map_or_else(|| "unknown".into(), |u| format!("uid {u}")));
    format!("local:{user}")
}

/// This process's user id, where the system says (no `USER` in a service's
/// environment).
fn uid() -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").ok().map(|m| m.uid())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Runs `job` on `store` for `started_by`, recorded in the jobs table from
/// start to end (`domains::jobs`); the exit status the command ends with
/// (0 done, 1 done with bad lines or not published).
pub async fn run(
    job: Job,
    store: DynStore,
    input: Option<Input>,
    console: &mut Console,
    started_by: &str,
) -> anyhow::Result<u8> {
    let input = checked_input(&job, input)?;
    let shown = input.as_ref().map(|i| i.shown.clone());
    let size = input.as_ref().and_then(Input::size);
    let record = begin(&job, &store, shown, size, started_by).await?;
    run_recorded(job, store, input, console, record).await
}

/// The input a job needs: refused when it reads one and has none.
fn checked_input(job: &Job, input: Option<Input>) -> anyhow::Result<Option<Input>> {
    match (job.reads_input(), input) {
        (true, Some(i)) => Ok(Some(i)),
        (true, None) => Err(Refused(format!("{} needs a file", job.name())).into()),
        (false, _) => Ok(None),
    }
}

/// Records `job` as started by `started_by`, its input named `shown`, of
/// `size` bytes when known (a server records a handed-over job as its
/// input begins to arrive).
pub async fn begin(
    job: &Job,
    store: &DynStore,
    shown: Option<String>,
    size: Option<u64>,
    started_by: &str,
) -> Result<Arc<Tracked>, crate::store::StoreError> {
    Ok(Arc::new(
        Jobs::new(store.clone())
            .begin(job.name(), started_by, shown, size)
            .await?,
    ))
}

/// Runs a job recorded with [`begin`] and records how it ended.
pub async fn run_recorded(
    job: Job,
    store: DynStore,
    input: Option<Input>,
    console: &mut Console,
    record: Arc<Tracked>,
) -> anyhow::Result<u8> {
    let input = checked_input(&job, input)?;
    record.reading(input.as_ref().and_then(Input::size));
    console.record = Some(record.clone());
    let outcome = execute(job, store, input, console, record.bytes()).await;
    console.record = None;
    let (state, code) = match &outcome {
        Ok(0) => (JobState::Done, Some(0)),
        Ok(code) => (JobState::Failed, Some(i32::from(*code))),
        Err(e) => {
            record.said(&format!("error: {e:#}"));
            (JobState::Failed, None)
        }
    };
    if let Err(e) = record.end(state, code).await {
        tracing::warn!(error = %e, "how a job ended was not recorded");
    }
    outcome
}

/// The input of a job that reads one (checked by `checked_input`), opened.
fn opened(
    input: Option<Input>,
    read: Arc<AtomicU64>,
) -> anyhow::Result<(Input, Box<dyn std::io::Read + Send>, usize)> {
    let input = input.ok_or_else(|| Refused("this job needs a file".into()))?;
    let (reader, size) = input.open(read)?;
    Ok((input, reader, size))
}

async fn execute(
    job: Job,
    store: DynStore,
    input: Option<Input>,
    console: &mut Console,
    read: Arc<AtomicU64>,
) -> anyhow::Result<u8> {
    match job {
        Job::ImportVocabulary {
            concurrency,
            max_category_depth,
        } => {
            let (input, read, _) = opened(input, read)?;
            let themes = Themes::new(store).with_max_category_depth(max_category_depth);
            let report =
                vocabulary::import(&themes, std::io::BufReader::new(read), concurrency).await?;
            console.bad_lines(&input.shown, &report.errors);
            console.err(report.summary());
            Ok(u8::from(!report.errors.is_empty()))
        }
        Job::ImportAssignments {
            creator,
            concurrency,
        } => {
            let (input, read, size) = opened(input, read)?;
            let report = assignments::import::import(
                &Assignments::new(store),
                &creator,
                chunked::Input::new(std::io::BufReader::new(read), size, concurrency),
            )
            .await?;
            Ok(console.import_ended(&input.shown, &report, "rows already present are skipped"))
        }
        Job::ImportObjects { concurrency } => {
            let (input, read, size) = opened(input, read)?;
            // Registering checks an image URL only: the crawler of the
            // server that fetches it applies that server's own rules.
            let binaries = super::binaries(&super::config::BinaryArgs::default(), store.clone())?;
            let report = crate::domains::objects::import::import(
                &Objects::new(store),
                &binaries,
                &Principal::local("import-objects", &[Role::Machine]),
                chunked::Input::new(std::io::BufReader::new(read), size, concurrency),
            )
            .await?;
            Ok(console.import_ended(
                &input.shown,
                &report,
                "objects already as the file says are left alone",
            ))
        }
        Job::ImportSuggestions {
            wiki,
            max_errors,
            keep,
            concurrency,
            dead_after,
        } => {
            use crate::domains::suggestions::import::{ImportOptions, import};
            let (input, read, size) = opened(input, read)?;
            // The name the operator gave (a handed-over input is read from
            // a spooled copy).
            let source = Path::new(&input.shown)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| input.shown.clone());
            let service = Suggestions::new(store).with_dead_after(dead_after);
            let who = Principal::local("import-suggestions", &[Role::Machine]);
            let report = import(
                &service,
                &who,
                read,
                ImportOptions {
                    wiki,
                    source: Some(source),
                    max_errors,
                    keep,
                    concurrency,
                    size,
                },
            )
            .await
            .map_err(failed)?;
            console.bad_lines(&input.shown, &report.errors);
            console.err(report.summary());
            Ok(u8::from(!report.published))
        }
        Job::RepairViews { check, portal } => {
            let report =
                assignments::repair::repair_views(&store, !check, portal.as_deref()).await?;
            console.out(report.summary());
            Ok(u8::from(check && report.differences() > 0))
        }
        Job::GcBinaries { gc_grace } => {
            let binaries = super::binaries(
                &super::config::BinaryArgs {
                    gc_grace,
                    ..Default::default()
                },
                store,
            )?;
            let report = binaries.collect_garbage().await.map_err(failed)?;
            console.out(format!(
                "{} originals checked, {} removed",
                report.checked, report.removed
            ));
            Ok(0)
        }
        Job::RecheckBinaries => {
            let binary_args = super::config::BinaryArgs::default();
            let binaries = super::binaries(&binary_args, store.clone())?;
            let crawl = super::crawl(
                &super::config::CrawlArgs::default(),
                &binary_args,
                store,
                binaries,
            )?;
            let n = crawl.mark_all_due().await.map_err(failed)?;
            console.out(format!(
                "{n} links are due now; a running server's crawler re-fetches them"
            ));
            Ok(0)
        }
        Job::ImportSkos {
            concurrency,
            max_category_depth,
            format,
            max_triples,
            max_bytes,
        } => {
            let (input, read, _) = opened(input, read)?;
            let limits = skos::Limits {
                max_category_depth,
                max_triples,
                max_bytes,
            };
            skos::import(
                store,
                input,
                read,
                format.as_deref(),
                concurrency,
                limits,
                console,
            )
            .await
        }
        Job::ExportSkos {
            portal,
            format,
            base,
            license,
        } => skos::export(store, &portal, &format, &base, license.as_deref(), console).await,
        Job::SuggestionsList { wiki } => suggestions::list(store, &wiki, console).await,
        Job::SuggestionsRollback { wiki } => suggestions::rollback(store, &wiki, console).await,
        Job::SuggestionsPurge {
            wiki,
            keep,
            dead_after,
        } => suggestions::purge(store, &wiki, keep, dead_after, console).await,
    }
}
