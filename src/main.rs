//! The `kartei` command line; everything it runs lives in the library.

use std::process::ExitCode;

use clap::Parser;
use kartei::app::config::{
    Cli, Command, CompactArgs, RunOn, ServeArgs, StoreArgs, StoreConfig, SuggestionsCommand,
    TokenArgs,
};
use kartei::app::control;
use kartei::app::jobs::{self, Console, Input, Job, Refused};
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
    kartei::tune_allocator();
    let cli = Cli::parse();
    // A server logs for its operators; a batch command says what it did in
    // its own lines, and the storage driver's chatter stays out of them.
    let default_log = match cli.command {
        None | Some(Command::Serve(_)) => "info,scylla=warn",
        Some(_) => "warn,scylla=off",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KARTEI_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_log)),
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
    let result = runtime.block_on(run(command));
    // A read of stdin still waiting on a blocking thread (a cancelled
    // hand-over) must not keep the process.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(e) if e.is::<Usage>() || e.is::<Refused>() => {
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
    kartei::store::open(config, kartei::tables()[0])
        .await
        .map_err(|e| in_use(e, &config.data_dir))
}

/// The store file is open in another process: says so in words, naming the
/// server when it is one.
fn in_use(e: anyhow::Error, dir: &std::path::Path) -> anyhow::Error {
    if !matches!(
        e.downcast_ref::<kartei::store::StoreError>(),
        Some(kartei::store::StoreError::InUse(_))
    ) {
        return e;
    }
    usage(match control::holder(dir) {
        Some(h) => format!(
            "the data directory {} is served by kartei (pid {}, http://{}); stop that server first, or give this one its own --data-dir",
            dir.display(),
            h.pid,
            h.listen
        ),
        None => format!(
            "the data directory {} is in use by another kartei command; wait until it ends (or stop it), then run this again",
            dir.display()
        ),
    })
}

/// Runs a batch job: handed to the server that holds the embedded data
/// directory, if one runs, else here on the store the flags name.
async fn batch(job: Job, on: &RunOn, input: Option<Input>) -> anyhow::Result<ExitCode> {
    let RunOn { store, remote } = on;
    if let Some(path) = input.as_ref().and_then(|i| i.path.as_ref()) {
        std::fs::metadata(path)
            .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    }
    if let Some(url) = &remote.server {
        if remote.token.is_some() && !remote.insecure_http && !control::private_url(url) {
            return Err(usage(format!(
                "--server {url} is plain http to another machine: the token would cross the network readable. Use https://, or --insecure-http where the network between is yours"
            )));
        }
        let code =
            control::hand_over_remote(url, remote.token.as_deref(), &job, input.as_ref()).await?;
        return Ok(ExitCode::from(code));
    }
    let config = StoreConfig::from(store);
    if config.cassandra.is_none()
        && let Some(server) = control::holder(&config.data_dir)
    {
        eprintln!(
            "{}: handed to the server that holds {} (pid {}, http://{})",
            job.name(),
            config.data_dir.display(),
            server.pid,
            server.listen
        );
        let code = control::hand_over(&server, &job, input.as_ref()).await?;
        return Ok(ExitCode::from(code));
    }
    let store = open_store(&config).await?;
    let code = jobs::run(
        job,
        store,
        input,
        &mut Console::terminal(),
        &jobs::local_user(),
    )
    .await?;
    Ok(ExitCode::from(code))
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => serve(args).await,
        Command::Migrate(args) => migrate(args).await,
        Command::ImportVocabulary(a) => {
            let job = Job::ImportVocabulary {
                concurrency: a.concurrency,
                max_category_depth: a.vocabulary.max_category_depth.into(),
            };
            batch(job, &a.on, Some(Input::from_arg(&a.file))).await
        }
        Command::ImportAssignments(a) => {
            let job = Job::ImportAssignments {
                creator: a.creator,
                concurrency: a.concurrency,
            };
            batch(job, &a.on, Some(Input::from_arg(&a.file))).await
        }
        Command::ImportObjects(a) => {
            let job = Job::ImportObjects {
                concurrency: a.concurrency,
            };
            batch(job, &a.on, Some(Input::from_arg(&a.file))).await
        }
        Command::ImportSkos(a) => {
            let job = Job::ImportSkos {
                concurrency: a.concurrency,
                max_category_depth: a.vocabulary.max_category_depth.into(),
                format: a.format,
                max_triples: a.max_skos_triples,
                max_bytes: a.max_skos_bytes,
            };
            batch(job, &a.on, Some(Input::from_arg(&a.file))).await
        }
        Command::ExportSkos(a) => {
            let job = Job::ExportSkos {
                portal: a.portal,
                format: a.format,
                base: a.public_url,
                license: a.skos_license,
            };
            batch(job, &a.on, None).await
        }
        Command::ImportSuggestions(a) => {
            let job = Job::ImportSuggestions {
                wiki: a.wiki,
                max_errors: a.max_errors,
                keep: a.keep,
                concurrency: a.concurrency,
                dead_after: a.dead_after,
            };
            batch(job, &a.on, Some(Input::from_arg(&a.file))).await
        }
        Command::RepairViews(a) => {
            let job = Job::RepairViews {
                check: a.check,
                portal: a.portal,
            };
            batch(job, &a.on, None).await
        }
        Command::GcBinaries(a) => {
            let job = Job::GcBinaries {
                gc_grace: a.gc_grace,
            };
            batch(job, &a.on, None).await
        }
        Command::RecheckBinaries(a) => batch(Job::RecheckBinaries, &a.on, None).await,
        Command::Suggestions(cmd) => {
            let (job, on) = match cmd {
                SuggestionsCommand::List(a) => (Job::SuggestionsList { wiki: a.wiki }, a.on),
                SuggestionsCommand::Rollback(a) => {
                    (Job::SuggestionsRollback { wiki: a.wiki }, a.on)
                }
                SuggestionsCommand::Purge(a) => (
                    Job::SuggestionsPurge {
                        wiki: a.wiki,
                        keep: a.keep,
                        dead_after: a.dead_after,
                    },
                    a.on,
                ),
            };
            batch(job, &on, None).await
        }
        Command::Compact(args) => compact(args),
        Command::Token(args) => token(args),
        Command::Schema(a) => {
            print!(
                "{}",
                if a.federation {
                    kartei::api::schema::subgraph_sdl()
                } else {
                    kartei::api::schema::sdl()
                }
            );
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
        if let Some(h) = control::holder(&config.data_dir) {
            return Err(usage(format!(
                "the data directory {} is served already by kartei (pid {}, http://{}); stop that server first, or give this one its own --data-dir",
                config.data_dir.display(),
                h.pid,
                h.listen
            )));
        }
    }
    let auth = Auth::from_args(&args.auth, embedded.then_some(config.data_dir.as_path()))
        .map_err(|e| usage(e.to_string()))?;
    let auth = match &args.auth.oidc.oidc_issuer {
        Some(issuer) => {
            let oidc = kartei::edge::oidc::Oidc::discover(&args.auth.oidc, args.auth.token_leeway)
                .await
                .map_err(|e| anyhow::anyhow!("sign-in with the OpenID provider {issuer}: {e:#}"))?;
            oidc.spawn_refresh();
            auth.with_oidc(oidc)
        }
        None => auth,
    };
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
                kartei::kernel::chunked::Input::new(
                    kartei::DEMO_ASSIGNMENTS.as_bytes(),
                    kartei::DEMO_ASSIGNMENTS.len(),
                    1,
                ),
            )
            .await?;
            eprintln!("demo suggestions: {}", report.summary());
            let report = kartei::domains::objects::import::import(
                &kartei::domains::objects::service::Objects::new(store.clone()),
                &kartei::app::binaries(&args.binaries, store.clone())?,
                &kartei::kernel::roles::Principal::local(
                    "demo",
                    &[kartei::kernel::roles::Role::Machine],
                ),
                kartei::kernel::chunked::Input::new(
                    kartei::DEMO_OBJECTS.as_bytes(),
                    kartei::DEMO_OBJECTS.len(),
                    1,
                ),
            )
            .await?;
            eprintln!("demo objects: {}", report.summary());
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
    kartei::app::sweep_interrupted_jobs(store.clone());
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
    // Batch commands on this data directory hand their jobs over to this
    // process (app::control); without the socket they say the store is in use.
    let control = if embedded {
        match control::Control::start(&config.data_dir, &bound.to_string(), app.store.clone()).await
        {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(error = %e, "no control socket: batch commands on this data directory cannot run beside the server");
                None
            }
        }
    } else {
        None
    };
    // Said once everything that answers is up (tests and scripts wait for it).
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
    // Batch jobs over HTTP (`--server URL`), spooled beside the embedded
    // store or in a private temporary directory.
    let spool = if embedded {
        control::spool_dir(&config.data_dir)
    } else {
        control::temp_spool().map_err(|e| anyhow::anyhow!("cannot make a spool directory: {e}"))?
    };
    std::fs::create_dir_all(&spool)?;
    let jobs = control::http_routes(app.store.clone(), spool, args.limits.max_job_input_bytes);
    kartei::edge::serve(
        listener,
        kartei::edge::router_with(app, jobs),
        connections,
        shutdown(),
    )
    .await;
    // Every background loop ends its current unit of work, then the process.
    futures::future::join_all(
        workers
            .iter()
            .map(|w| w.stop(std::time::Duration::from_secs(10))),
    )
    .await;
    drop(control);
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

fn compact(args: CompactArgs) -> anyhow::Result<ExitCode> {
    if let Some(h) = control::holder(&args.data_dir) {
        return Err(usage(format!(
            "compact needs the data directory to itself, and kartei serves it (pid {}, http://{}): stop that server, run compact, then start it again",
            h.pid, h.listen
        )));
    }
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
