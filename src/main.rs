//! The `kartei` command line; everything it runs lives in the library.

use std::process::ExitCode;

use clap::Parser;
use kartei::app::config::{
    BinaryArgs, Cli, Command, CompactArgs, GcArgs, ImportArgs, ImportAssignmentsArgs,
    ImportSuggestionsArgs, RecheckArgs, RepairArgs, ServeArgs, StoreArgs, StoreConfig,
    SuggestionsCommand, TokenArgs,
};
use kartei::domains::assignments::{self, service::Assignments};
use kartei::domains::themes::{import, service::Themes};
use kartei::edge::auth::Auth;
use kartei::store::{DynStore, cql::CqlStore};

/// A mistake in how the command was called: one sentence, exit code 2.
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Usage {}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage(msg.into()).into()
}

#[derive(Parser)]
struct ServeDefaults {
    #[command(flatten)]
    args: ServeArgs,
}

fn main() -> ExitCode {
    // Chunks of binaries pass through buffers of about 1 MiB. glibc raises its
    // mmap threshold after the first free of such a buffer and then serves them
    // from arenas that keep the memory; a fixed threshold hands it back at once
    // (measured: +160 MiB resident during a 200 MB upload without, +50 with).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only tunes the allocator; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KARTEI_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,scylla=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = cli
        .command
        .unwrap_or_else(|| Command::Serve(ServeDefaults::parse_from(["kartei"]).args));
    match runtime.block_on(run(command)) {
        Ok(code) => code,
        Err(e) if e.is::<Usage>() => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Opens the store; an embedded data directory that cannot be read or
/// written is a usage error (one sentence, exit 2) before anything else.
async fn open_store(config: &StoreConfig) -> anyhow::Result<DynStore> {
    if config.cassandra.is_none() {
        kartei::store::embedded::check_data_dir(&config.data_dir).map_err(usage)?;
    }
    kartei::store::open(config, kartei::tables()[0]).await
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => serve(args).await,
        Command::Migrate(args) => migrate(args).await,
        Command::ImportVocabulary(args) => import_vocabulary(args).await,
        Command::ImportAssignments(args) => import_assignments(args).await,
        Command::RepairViews(args) => repair_views(args).await,
        Command::GcBinaries(args) => gc_binaries(args).await,
        Command::RecheckBinaries(args) => recheck_binaries(args).await,
        Command::Compact(args) => compact(args),
        Command::ImportSuggestions(args) => import_suggestions(args).await,
        Command::Suggestions(cmd) => suggestions(cmd).await,
        Command::Token(args) => token(args),
        Command::Schema => {
            print!("{}", kartei::api::schema::sdl());
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = StoreConfig::from(&args.store);
    let embedded = config.cassandra.is_none();
    if args.demo && !embedded {
        return Err(usage(
            "--demo loads the demo vocabulary into the embedded store only; drop --cassandra or --demo",
        ));
    }
    if embedded {
        kartei::store::embedded::check_data_dir(&config.data_dir).map_err(usage)?;
    }
    let auth = Auth::from_args(&args.auth, embedded.then_some(config.data_dir.as_path()))
        .map_err(|e| usage(e.to_string()))?;
    let store = open_store(&config).await?;
    if args.demo {
        let themes = Themes::new(store.clone())
            .with_max_category_depth(args.limits.vocabulary.max_category_depth.into());
        if themes
            .portals()
            .await
            .map_err(|e| anyhow::anyhow!(e.message()))?
            .is_empty()
        {
            let report = import::import(&themes, kartei::DEMO_VOCABULARY.as_bytes(), 16).await?;
            eprintln!("demo vocabulary: {}", report.summary());
            let report = assignments::import::import(
                &Assignments::new(store.clone()),
                "demo-machine",
                kartei::DEMO_ASSIGNMENTS.as_bytes(),
                kartei::DEMO_ASSIGNMENTS.len(),
                1,
            )
            .await?;
            eprintln!("demo suggestions: {}", report.summary());
        } else {
            eprintln!("demo vocabulary: the store already has portals, nothing loaded");
        }
    }
    // Only the demo prints a token: a server's log is read by more people
    // than should hold an admin token (`kartei token` mints one on purpose).
    if args.demo && args.auth.auth_public_key.is_none() {
        let token = auth.mint("local-admin", &["admin".to_owned()], 24 * 3600)?;
        eprintln!("admin token for the demo (24 hours):\n  Authorization: Bearer {token}");
    }
    let binaries = kartei::app::binaries(&args.binaries, store.clone())?;
    if embedded {
        let freed = binaries
            .release_dead_claims()
            .await
            .map_err(|e| anyhow::anyhow!(e.message()))?;
        if freed > 0 {
            eprintln!("binaries: {freed} originals a stopped process was scaling are due again");
        }
    }
    binaries.spawn_worker(
        std::time::Duration::from_secs(2),
        std::time::Duration::from_secs(300),
    );
    let crawl = kartei::app::crawl(&args.crawl, &args.binaries, store.clone(), binaries.clone())?;
    if args.crawl.crawl == "on" {
        crawl.spawn();
    }
    let connections = kartei::edge::ConnectionLimits::from_limits(&args.limits);
    let app = kartei::app::App::new(
        store,
        auth,
        args.limits.clone(),
        args.edge.clone(),
        binaries,
        crawl,
        kartei::kernel::Clock::system(),
    );
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| usage(format!("cannot listen on {}: {e}", args.listen)))?;
    // The bound address, so that `--listen 127.0.0.1:0` says which port it got.
    let bound = listener.local_addr().unwrap_or(args.listen);
    eprintln!(
        "kartei serves on http://{bound} (GraphiQL: http://{bound}/graphiql, store: {})",
        if embedded {
            format!("embedded in {}", config.data_dir.display())
        } else {
            "cluster".into()
        }
    );
    // The current-dataset age of every wiki, for /metrics.
    app.suggestions
        .spawn_metrics(std::time::Duration::from_secs(60));
    let workers = app.workers();
    kartei::edge::serve(listener, kartei::edge::router(app), connections, shutdown()).await;
    // Every background loop ends its current unit of work, then the process.
    futures::future::join_all(
        workers
            .iter()
            .map(|w| w.stop(std::time::Duration::from_secs(10))),
    )
    .await;
    Ok(ExitCode::SUCCESS)
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

async fn migrate(args: StoreArgs) -> anyhow::Result<ExitCode> {
    let config = StoreConfig::from(&args);
    let Some(nodes) = &config.cassandra else {
        eprintln!("the embedded store needs no migration");
        return Ok(ExitCode::SUCCESS);
    };
    let store = CqlStore::connect(nodes, &config.env, config.replication.clone()).await?;
    store.migrate(kartei::CQL_FILES).await?;
    eprintln!("schema applied to keyspaces *_{}", config.env);
    Ok(ExitCode::SUCCESS)
}

async fn import_vocabulary(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let file = std::fs::File::open(&args.file)
        .map_err(|e| usage(format!("cannot read {}: {e}", args.file.display())))?;
    let store: DynStore = open_store(&StoreConfig::from(&args.store)).await?;
    let themes =
        Themes::new(store).with_max_category_depth(args.vocabulary.max_category_depth.into());
    let report = import::import(&themes, std::io::BufReader::new(file), args.concurrency).await?;
    Ok(import_outcome(
        &args.file,
        &report.errors,
        &report.summary(),
    ))
}

async fn import_assignments(args: ImportAssignmentsArgs) -> anyhow::Result<ExitCode> {
    let file = std::fs::File::open(&args.file)
        .map_err(|e| usage(format!("cannot read {}: {e}", args.file.display())))?;
    let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
    let store: DynStore = open_store(&StoreConfig::from(&args.store)).await?;
    let service = Assignments::new(store);
    let report = assignments::import::import(
        &service,
        &args.creator,
        std::io::BufReader::new(file),
        size,
        args.concurrency,
    )
    .await?;
    let outcome = import_outcome(&args.file, &report.errors, &report.summary());
    if let Some(why) = &report.stopped {
        eprintln!(
            "error: the import stopped {why}. What came before is written; run the same command again once that is fixed (rows already present are skipped)."
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(outcome)
}

/// Prints the bad lines kept, `file:line: reason`, and how many more there were.
fn print_bad_lines(file: &std::path::Path, errors: &kartei::kernel::ndjson::BadLines) {
    for (line, msg) in errors.iter() {
        eprintln!("{}:{line}: {msg}", file.display());
    }
    if errors.dropped() > 0 {
        eprintln!("... and {} more bad lines", errors.dropped());
    }
}

/// Prints an importer's line-numbered errors and summary; exit 1 if any line failed.
fn import_outcome(
    file: &std::path::Path,
    errors: &kartei::kernel::ndjson::BadLines,
    summary: &str,
) -> ExitCode {
    print_bad_lines(file, errors);
    eprintln!("{summary}");
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn repair_views(args: RepairArgs) -> anyhow::Result<ExitCode> {
    let store: DynStore = open_store(&StoreConfig::from(&args.store)).await?;
    let report =
        assignments::repair::repair_views(&store, !args.check, args.portal.as_deref()).await?;
    println!("{}", report.summary());
    Ok(if args.check && report.differences() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn gc_binaries(args: GcArgs) -> anyhow::Result<ExitCode> {
    let store: DynStore = open_store(&StoreConfig::from(&args.store)).await?;
    let binaries = kartei::app::binaries(
        &BinaryArgs {
            gc_grace: args.gc_grace,
            ..Default::default()
        },
        store,
    )?;
    let report = binaries
        .collect_garbage()
        .await
        .map_err(|e| anyhow::anyhow!(e.message()))?;
    println!(
        "{} originals checked, {} removed",
        report.checked, report.removed
    );
    Ok(ExitCode::SUCCESS)
}

async fn recheck_binaries(args: RecheckArgs) -> anyhow::Result<ExitCode> {
    let store: DynStore = open_store(&StoreConfig::from(&args.store)).await?;
    let binary_args = kartei::app::config::BinaryArgs::default();
    let binaries = kartei::app::binaries(&binary_args, store.clone())?;
    let crawl = kartei::app::crawl(
        &kartei::app::config::CrawlArgs::default(),
        &binary_args,
        store,
        binaries,
    )?;
    let n = crawl
        .mark_all_due()
        .await
        .map_err(|e| anyhow::anyhow!(e.message()))?;
    println!("{n} links are due now; a running server's crawler re-fetches them");
    Ok(ExitCode::SUCCESS)
}

async fn import_suggestions(args: ImportSuggestionsArgs) -> anyhow::Result<ExitCode> {
    use kartei::domains::suggestions::import::{ImportOptions, import};
    let (input, size, source): (Box<dyn std::io::Read + Send>, usize, String) =
        if args.file.as_os_str() == "-" {
            (Box::new(std::io::stdin()), 0, "stdin".into())
        } else {
            let file = std::fs::File::open(&args.file)
                .map_err(|e| usage(format!("cannot read {}: {e}", args.file.display())))?;
            let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
            let name = args
                .file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (Box::new(file), size, name)
        };
    let store: DynStore = open_store(&StoreConfig::from(&args.store)).await?;
    let service = kartei::domains::suggestions::service::Suggestions::new(store)
        .with_dead_after(args.dead_after);
    let who = kartei::kernel::roles::Principal::local(
        "import-suggestions",
        &[kartei::kernel::roles::Role::Machine],
    );
    let report = import(
        &service,
        &who,
        input,
        ImportOptions {
            wiki: args.wiki.clone(),
            source: Some(source),
            max_errors: args.max_errors,
            keep: args.keep,
            concurrency: args.concurrency,
            size,
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!(e.message()))?;
    print_bad_lines(&args.file, &report.errors);
    eprintln!("{}", report.summary());
    Ok(if report.published {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn suggestions(cmd: SuggestionsCommand) -> anyhow::Result<ExitCode> {
    let admin = kartei::kernel::roles::Principal::local(
        "suggestions",
        &[kartei::kernel::roles::Role::Admin],
    );
    let store_args = match &cmd {
        SuggestionsCommand::List(a) | SuggestionsCommand::Rollback(a) => &a.store,
        SuggestionsCommand::Purge(a) => &a.store,
    };
    let store: DynStore = open_store(&StoreConfig::from(store_args)).await?;
    let dead_after = match &cmd {
        SuggestionsCommand::Purge(a) => a.dead_after,
        _ => kartei::domains::suggestions::service::DEAD_AFTER_SECS,
    };
    let service =
        kartei::domains::suggestions::service::Suggestions::new(store).with_dead_after(dead_after);
    let fail = |e: kartei::kernel::error::ApiError| anyhow::anyhow!(e.message());
    match cmd {
        SuggestionsCommand::List(a) => {
            let current = service.current(&a.wiki).await.map_err(fail)?;
            println!("dataset\tstate\trows\tbad lines\tstarted\tfinished\tsource");
            for d in service.datasets(&a.wiki).await.map_err(fail)? {
                let mark = if current.as_deref() == Some(d.id.as_str()) {
                    " (current)"
                } else {
                    ""
                };
                println!(
                    "{}{mark}\t{}\t{}\t{}\t{}\t{}\t{}",
                    d.id,
                    d.state.as_str(),
                    d.rows,
                    d.bad_lines,
                    d.started,
                    d.finished.unwrap_or_default(),
                    d.source.unwrap_or_default()
                );
            }
        }
        SuggestionsCommand::Rollback(a) => {
            let d = service.rollback(&admin, &a.wiki).await.map_err(fail)?;
            println!(
                "{}: current dataset is now {} (started {})",
                a.wiki, d.id, d.started
            );
        }
        SuggestionsCommand::Purge(a) => {
            let purged = service.purge(&admin, &a.wiki, a.keep).await.map_err(fail)?;
            println!("{}: {} datasets purged {:?}", a.wiki, purged.len(), purged);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn compact(args: CompactArgs) -> anyhow::Result<ExitCode> {
    let (before, after) = kartei::store::embedded::compact(&args.data_dir)
        .map_err(|e| usage(format!("cannot compact {}: {e}", args.data_dir.display())))?;
    println!(
        "{}: {:.1} MB before, {:.1} MB after",
        args.data_dir.display(),
        before as f64 / 1e6,
        after as f64 / 1e6
    );
    Ok(ExitCode::SUCCESS)
}

fn token(args: TokenArgs) -> anyhow::Result<ExitCode> {
    let auth =
        Auth::from_args(&args.auth, Some(&args.data_dir)).map_err(|e| usage(e.to_string()))?;
    let t = auth
        .mint(&args.subject, &args.roles, args.ttl.as_secs())
        .map_err(|e| usage(e.to_string()))?;
    println!("{t}");
    Ok(ExitCode::SUCCESS)
}
