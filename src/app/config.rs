//! One typed configuration: command-line flags, each also readable from a
//! `KARTEI_*` environment variable. Contradictions are refused by clap (exit 2).
//! This module only parses; `app` builds what the flags describe.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::edge::EdgeArgs;
use crate::edge::auth::AuthArgs;
use crate::kernel::limits::{Limits, VocabularyLimits, parse_duration};

pub use crate::store::StoreConfig;

#[derive(Parser, Debug)]
#[command(
    name = "kartei",
    version,
    about = "GraphQL API for a keyword vocabulary, assignments and binaries"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
// Parsed once per process; boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Serve the GraphQL API (the default command).
    Serve(ServeArgs),
    /// Apply the CQL schema (cql/*.cql) to the cluster, idempotently.
    Migrate(StoreArgs),
    /// Import a vocabulary from an NDJSON file (categories, keywords, GND entity types).
    ImportVocabulary(ImportArgs),
    /// Import machine suggestions (assignments) from an NDJSON file, as the machine role.
    ImportAssignments(ImportAssignmentsArgs),
    /// Import what the catalogue says of objects (title, institution, image URL) from an NDJSON file.
    ImportObjects(ImportObjectsArgs),
    /// Import a SKOS vocabulary (Turtle, RDF/XML or JSON-LD): schemes as portals, concepts as categories and keywords.
    ImportSkos(ImportSkosArgs),
    /// Print a portal's vocabulary as SKOS (Turtle, RDF/XML or JSON-LD).
    ExportSkos(ExportSkosArgs),
    /// Import one dataset of image suggestions for a wiki (NDJSON, gzip or not; `-` is stdin).
    ImportSuggestions(ImportSuggestionsArgs),
    /// The image-suggestion datasets of a wiki: list, rollback, purge.
    #[command(subcommand)]
    Suggestions(SuggestionsCommand),
    /// Compare the assignment query tables with objects_keywords and rebuild what differs.
    RepairViews(RepairArgs),
    /// Remove originals (with chunks, derivatives and URLs) that no reference points to.
    GcBinaries(GcArgs),
    /// Make every crawled link due now: the crawler of a running server re-fetches them
    /// (If-None-Match / If-Modified-Since) and re-derives changed images.
    RecheckBinaries(RecheckArgs),
    /// Rewrite the embedded store's file in key order, with full pages and no free ones (the server must be stopped; needs room for a copy).
    Compact(CompactArgs),
    /// Print a signed bearer token (HS256 with the configured secret).
    Token(TokenArgs),
    /// Print the GraphQL schema (SDL).
    Schema(SchemaArgs),
}

#[derive(Args, Debug, Clone)]
pub struct SchemaArgs {
    /// Print the Apollo Federation 2 subgraph SDL instead (what a server
    /// with `--federation` answers to `_service { sdl }`).
    #[arg(long)]
    pub federation: bool,
}

#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Directory of the embedded store (used unless --cassandra is given).
    #[arg(long, env = "KARTEI_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Cassandra/ScyllaDB contact points, HOST:PORT, comma-separated.
    #[arg(
        long,
        env = "KARTEI_CASSANDRA",
        value_delimiter = ',',
        conflicts_with = "data_dir"
    )]
    pub cassandra: Vec<String>,
    /// Environment name: keyspaces are `<family>_<env>` (letters, digits, underscore).
    #[arg(long, env = "KARTEI_ENV", default_value = "dev", value_parser = parse_env)]
    pub env: String,
    /// Page cache of the embedded store, in bytes (more helps reads of large
    /// tables; resident memory grows by up to this much).
    #[arg(long, env = "KARTEI_CACHE_BYTES", default_value_t = crate::store::embedded::DEFAULT_CACHE_BYTES)]
    pub cache_bytes: usize,
    /// CQL replication map for `migrate`.
    #[arg(
        long,
        env = "KARTEI_REPLICATION",
        default_value = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )]
    pub replication: String,
}

/// Where a batch command runs its job: by default on the store the store
/// flags name (or handed to the server holding an embedded data directory);
/// with `--server`, on a kartei server over its HTTP API.
#[derive(Args, Debug, Clone)]
pub struct RunOn {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// `--server` and its token.
#[derive(Args, Debug, Clone, Default)]
pub struct RemoteArgs {
    /// The kartei server (`https://kartei.example.org`) to run this command
    /// on, over its HTTP API (`POST /jobs`); the store flags are then unused.
    #[arg(long, env = "KARTEI_SERVER")]
    pub server: Option<String>,
    /// The bearer token for `--server`: the admin or the machine role.
    #[arg(long, env = "KARTEI_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Send the token over plain `http://` to a server that is not on this
    /// machine (refused otherwise: anyone on the way could read it).
    #[arg(long, env = "KARTEI_INSECURE_HTTP")]
    pub insecure_http: bool,
}

fn parse_env(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(s.to_owned())
    } else {
        Err("use 1 to 32 lowercase letters, digits or underscores".into())
    }
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "KARTEI_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Load the demo vocabulary and demo suggestions into an empty embedded store and print an admin token.
    #[arg(long, env = "KARTEI_DEMO")]
    pub demo: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub auth: AuthArgs,
    #[command(flatten)]
    pub limits: Limits,
    #[command(flatten)]
    pub edge: EdgeArgs,
    #[command(flatten)]
    pub binaries: BinaryArgs,
    #[command(flatten)]
    pub crawl: CrawlArgs,
}

/// The crawl frontier: how this instance takes part in fetching binaries' URLs.
#[derive(Args, Debug, Clone)]
pub struct CrawlArgs {
    /// `off`: this instance neither dispatches nor fetches (other instances do).
    #[arg(long = "crawl", env = "KARTEI_CRAWL", default_value = "on", value_parser = ["on", "off"])]
    pub crawl: String,
    /// Least time between two requests to one domain, in milliseconds (a
    /// larger robots.txt Crawl-delay wins).
    #[arg(long, env = "KARTEI_CRAWL_DELAY_MS", default_value_t = 1000)]
    pub crawl_delay_ms: u64,
    /// A fetched link is fetched again this long after its last fetch
    /// (`30d`, `12h`, `90m`, `45s`, `500ms`).
    #[arg(long, env = "KARTEI_RECRAWL_AFTER", default_value = "30d", value_parser = parse_duration)]
    pub recrawl_after: std::time::Duration,
    /// The TTL of a fetcher's claim announcement (refreshed at 3/4 of it); a
    /// killed instance's domains are taken over after it.
    #[arg(long, env = "KARTEI_CLAIM_TTL", default_value = "15m", value_parser = parse_duration)]
    pub claim_ttl: std::time::Duration,
    /// Domains this instance crawls at once (one request in flight per domain).
    #[arg(long, env = "KARTEI_CRAWL_DOMAINS", default_value_t = 8)]
    pub crawl_domains: usize,
    /// How often the dispatcher and fetchers look for work when not woken.
    #[arg(long, env = "KARTEI_CRAWL_PASS", default_value = "2s", value_parser = parse_duration)]
    pub crawl_pass: std::time::Duration,
    /// How long a fetcher keeps one domain before the slot goes to another
    /// that is due (also when the domain's next request could not go out
    /// within it, e.g. a long Crawl-delay); the rest of its segment waits.
    #[arg(long, env = "KARTEI_CRAWL_TURN", default_value = "5m", value_parser = parse_duration)]
    pub crawl_turn: std::time::Duration,
}

impl Default for CrawlArgs {
    fn default() -> Self {
        CrawlArgs {
            crawl: "on".into(),
            crawl_delay_ms: 1000,
            recrawl_after: std::time::Duration::from_secs(30 * 86_400),
            claim_ttl: std::time::Duration::from_secs(900),
            crawl_domains: 8,
            crawl_pass: std::time::Duration::from_secs(2),
            crawl_turn: std::time::Duration::from_secs(300),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct BinaryArgs {
    /// Largest original (upload or download), in bytes.
    #[arg(long, env = "KARTEI_MAX_UPLOAD_BYTES", default_value_t = 256 << 20)]
    pub max_upload_bytes: u64,
    /// Largest image to decode, in pixels (width × height): a decompression-bomb guard.
    #[arg(long, env = "KARTEI_MAX_PIXELS", default_value_t = 100_000_000)]
    pub max_pixels: u64,
    /// JPEG quality of the scaled images, 1..=100.
    #[arg(long, env = "KARTEI_JPEG_QUALITY", default_value_t = 85, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub jpeg_quality: u8,
    /// Networks a download may reach although they are internal (CIDR, repeatable).
    #[arg(
        long = "fetch-allow",
        env = "KARTEI_FETCH_ALLOW",
        value_delimiter = ','
    )]
    pub fetch_allow: Vec<crate::domains::web::Cidr>,
    /// Connect timeout of a download, in seconds.
    #[arg(long, env = "KARTEI_FETCH_CONNECT_TIMEOUT", default_value_t = 10)]
    pub fetch_connect_timeout: u64,
    /// Read timeout of a download (between two pieces of the body), in seconds.
    #[arg(long, env = "KARTEI_FETCH_READ_TIMEOUT", default_value_t = 30)]
    pub fetch_read_timeout: u64,
    /// Longest a whole download may take, in seconds (keep it under --scale-lease).
    #[arg(long, env = "KARTEI_FETCH_TOTAL_TIMEOUT", default_value_t = 120)]
    pub fetch_total_timeout: u64,
    /// Slowest average rate a download may have after its first 10 s, in bytes/s.
    #[arg(long, env = "KARTEI_FETCH_MIN_RATE", default_value_t = 1024)]
    pub fetch_min_rate: u64,
    /// Memory all image decodes together may use at once, in bytes (worker and
    /// IIIF); an image that alone needs more is refused.
    #[arg(long, env = "KARTEI_MAX_DECODE_BYTES", default_value_t = 2 << 30)]
    pub max_decode_bytes: u64,
    /// Redirects a download follows.
    #[arg(long, env = "KARTEI_FETCH_MAX_REDIRECTS", default_value_t = 5)]
    pub fetch_max_redirects: usize,
    /// Download attempts before a temporary failure (5xx, timeout) becomes ERROR.
    #[arg(long, env = "KARTEI_FETCH_ATTEMPTS", default_value_t = 5)]
    pub fetch_attempts: i32,
    /// Delay before the first retry, in seconds; it doubles with each attempt.
    #[arg(long, env = "KARTEI_FETCH_RETRY_DELAY", default_value_t = 30)]
    pub fetch_retry_delay: u64,
    /// An unreferenced original is collected once untouched this long, in seconds.
    #[arg(long, env = "KARTEI_GC_GRACE", default_value_t = 600)]
    pub gc_grace: u64,
    /// The public base URL of this server (IIIF ids are absolute); default: from the Host header.
    #[arg(long, env = "KARTEI_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Bytes of computed IIIF images kept in memory.
    #[arg(long, env = "KARTEI_IIIF_CACHE_BYTES", default_value_t = 64 << 20)]
    pub iiif_cache_bytes: usize,
    /// Pixels all uncached IIIF renders together may have in flight, each
    /// counting its original's pixels plus its response's; a render alone
    /// larger is refused (413).
    #[arg(
        long,
        env = "KARTEI_RENDER_PIXELS_IN_FLIGHT",
        default_value_t = 200_000_000
    )]
    pub render_pixels_in_flight: u64,
    /// Pixels of uncached IIIF renders one client address may have in flight
    /// (its first render may be larger); its further renders wait in a queue
    /// of its own while other clients' go first.
    #[arg(
        long,
        env = "KARTEI_RENDER_SHARE_PER_CLIENT",
        default_value_t = 50_000_000
    )]
    pub render_share_per_client: u64,
    /// Uncached IIIF renders one client address may have waiting; more are
    /// refused (503 RENDER_QUEUE_FULL, Retry-After).
    #[arg(long, env = "KARTEI_RENDER_QUEUE_PER_CLIENT", default_value_t = 16)]
    pub render_queue_per_client: usize,
    /// Longest an uncached IIIF render waits for its turn (e.g. 30s); then
    /// it is refused (503 RENDER_WAIT_EXCEEDED, Retry-After).
    #[arg(long, env = "KARTEI_RENDER_WAIT", default_value = "30s", value_parser = crate::kernel::limits::parse_duration)]
    pub render_wait: std::time::Duration,
    /// How long a worker owns an original it claimed for scaling (e.g. 90s,
    /// 5m). When a server dies mid-scale, another instance takes the work over
    /// after this; keep it above the longest scale and download.
    #[arg(long, env = "KARTEI_SCALE_LEASE", default_value = "5m", value_parser = crate::kernel::limits::parse_duration)]
    pub scale_lease: std::time::Duration,
}

impl Default for BinaryArgs {
    fn default() -> Self {
        BinaryArgs {
            max_upload_bytes: 256 << 20,
            max_pixels: 100_000_000,
            jpeg_quality: 85,
            fetch_allow: Vec::new(),
            fetch_connect_timeout: 10,
            fetch_read_timeout: 30,
            fetch_total_timeout: 120,
            fetch_min_rate: 1024,
            max_decode_bytes: 2 << 30,
            fetch_max_redirects: 5,
            fetch_attempts: 5,
            fetch_retry_delay: 30,
            gc_grace: 600,
            public_url: None,
            iiif_cache_bytes: 64 << 20,
            render_pixels_in_flight: 200_000_000,
            render_share_per_client: 50_000_000,
            render_queue_per_client: 16,
            render_wait: std::time::Duration::from_secs(30),
            scale_lease: std::time::Duration::from_secs(300),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct RecheckArgs {
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct GcArgs {
    /// An unreferenced original is collected once untouched this long, in seconds.
    #[arg(long, env = "KARTEI_GC_GRACE", default_value_t = 600)]
    pub gc_grace: u64,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    /// The NDJSON file.
    pub file: PathBuf,
    /// How many records are written at once.
    #[arg(long, env = "KARTEI_IMPORT_CONCURRENCY", default_value_t = 16)]
    pub concurrency: usize,
    #[command(flatten)]
    pub vocabulary: VocabularyLimits,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct ImportAssignmentsArgs {
    /// The NDJSON file: one {portalId, ddbId, keywordId, childCategoryId, confidence} per line.
    pub file: PathBuf,
    /// Recorded as the creator of every assignment (the machine's name).
    #[arg(long, env = "KARTEI_CREATOR")]
    pub creator: String,
    /// How many chunks of 1,000 lines are written at once.
    #[arg(long, env = "KARTEI_IMPORT_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct ImportObjectsArgs {
    /// The NDJSON file: one {ddbId, title, institution?, imageUrl?} per line, or `-` for stdin.
    pub file: PathBuf,
    /// How many chunks of 500 lines are written at once.
    #[arg(long, env = "KARTEI_IMPORT_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct ImportSkosArgs {
    /// The SKOS file, or `-` for stdin.
    pub file: PathBuf,
    /// `ttl`, `rdf` or `jsonld`; by default from the file's extension, else Turtle.
    #[arg(long)]
    pub format: Option<String>,
    /// How many records are written at once.
    #[arg(long, env = "KARTEI_IMPORT_CONCURRENCY", default_value_t = 16)]
    pub concurrency: usize,
    /// Triples a file may hold (the whole graph is checked before anything is written).
    #[arg(long, env = "KARTEI_MAX_SKOS_TRIPLES", default_value_t = crate::domains::themes::skos::MAX_TRIPLES)]
    pub max_skos_triples: usize,
    /// Bytes a file may have.
    #[arg(long, env = "KARTEI_MAX_SKOS_BYTES", default_value_t = 512 << 20)]
    pub max_skos_bytes: u64,
    #[command(flatten)]
    pub vocabulary: VocabularyLimits,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct ExportSkosArgs {
    /// The portal's id.
    pub portal: String,
    /// `ttl`, `rdf` or `jsonld`.
    #[arg(long, default_value = "ttl")]
    pub format: String,
    /// The base of the IRIs (as a server's `--public-url` makes them).
    #[arg(
        long,
        env = "KARTEI_PUBLIC_URL",
        default_value = "http://localhost:8080"
    )]
    pub public_url: String,
    /// The vocabulary's licence (an IRI), said on the scheme.
    #[arg(long, env = "KARTEI_SKOS_LICENSE")]
    pub skos_license: Option<String>,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct ImportSuggestionsArgs {
    /// The NDJSON file (gzip is recognised by its magic bytes), or `-` for stdin.
    pub file: PathBuf,
    /// The wiki the dataset is for (e.g. `dewiki`).
    #[arg(long, env = "KARTEI_WIKI")]
    pub wiki: String,
    /// More bad lines than this and the dataset is not published.
    #[arg(long, default_value_t = 0)]
    pub max_errors: usize,
    /// Complete datasets kept before the new one, for rollbacks; older ones are purged.
    #[arg(long, default_value_t = 1)]
    pub keep: usize,
    /// How many chunks of 1,000 lines are written at once.
    #[arg(long, env = "KARTEI_IMPORT_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,
    /// An earlier import without a heartbeat for this many seconds is dead (and purged).
    #[arg(long, default_value_t = crate::domains::suggestions::service::DEAD_AFTER_SECS)]
    pub dead_after: i64,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum SuggestionsCommand {
    /// Print the registry of a wiki's datasets, newest first.
    List(WikiArgs),
    /// Make the newest complete dataset before the current one current again.
    Rollback(WikiArgs),
    /// Remove dead or failed imports and complete datasets beyond --keep.
    Purge(PurgeArgs),
}

#[derive(Args, Debug, Clone)]
pub struct WikiArgs {
    #[arg(long, env = "KARTEI_WIKI")]
    pub wiki: String,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct PurgeArgs {
    #[arg(long, env = "KARTEI_WIKI")]
    pub wiki: String,
    /// Complete datasets kept before the current one.
    #[arg(long, default_value_t = 1)]
    pub keep: usize,
    /// An import without a heartbeat for this many seconds is dead (and purged).
    #[arg(long, default_value_t = crate::domains::suggestions::service::DEAD_AFTER_SECS)]
    pub dead_after: i64,
    #[command(flatten)]
    pub on: RunOn,
}

#[derive(Args, Debug, Clone)]
pub struct CompactArgs {
    /// Directory of the embedded store.
    #[arg(long, env = "KARTEI_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct RepairArgs {
    /// Only compare; exit with 1 when anything differs.
    #[arg(long)]
    pub check: bool,
    /// Only the assignments of this portal.
    #[arg(long)]
    pub portal: Option<String>,
    #[command(flatten)]
    pub on: RunOn,
}

/// The longest a minted token may be valid: 100 years.
pub const MAX_TOKEN_TTL: std::time::Duration = std::time::Duration::from_secs(100 * 366 * 86_400);

#[derive(Args, Debug, Clone)]
pub struct TokenArgs {
    /// The subject: recorded as creator on writes.
    #[arg(long, alias = "sub")]
    pub subject: String,
    /// Roles, comma-separated or repeated: contributor, archive, machine, editor, admin.
    #[arg(long = "role", alias = "roles", value_delimiter = ',', required = true)]
    pub roles: Vec<String>,
    /// How long the token is valid (`90m`, `12h`, `30d`; at most 100 years).
    #[arg(long, default_value = "24h", value_parser = parse_ttl)]
    pub ttl: std::time::Duration,
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Data directory whose generated secret to use when no --auth-secret is given.
    #[arg(long, env = "KARTEI_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
}

/// A token's lifetime: a duration of at least a second and at most
/// [`MAX_TOKEN_TTL`], so that `now + ttl` never overflows.
fn parse_ttl(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d < std::time::Duration::from_secs(1) || d > MAX_TOKEN_TTL {
        return Err(format!("{s}: a token lives from 1s to 36600d"));
    }
    Ok(d)
}

impl From<&StoreArgs> for StoreConfig {
    fn from(a: &StoreArgs) -> Self {
        StoreConfig {
            data_dir: a.data_dir.clone(),
            cache_bytes: a.cache_bytes,
            cassandra: (!a.cassandra.is_empty()).then(|| a.cassandra.clone()),
            env: a.env.clone(),
            replication: a.replication.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn token(ttl: &str) -> Result<TokenArgs, clap::Error> {
        let argv = [
            "kartei",
            "token",
            "--subject",
            "ed",
            "--role",
            "editor",
            "--ttl",
            ttl,
        ];
        match Cli::try_parse_from(argv)?.command {
            Some(Command::Token(t)) => Ok(t),
            other => panic!("not the token command: {other:?}"),
        }
    }

    /// `--valid-hours 5124095576030432` made `valid_hours * 3600` overflow
    /// (a panic in a debug build, a token expired in 1970 in a release
    /// build); `--ttl` is bounded when it is parsed.
    #[test]
    fn token_lifetime_is_bounded_when_parsed() {
        assert_eq!(token("24h").unwrap().ttl.as_secs(), 24 * 3600);
        assert_eq!(token("36600d").unwrap().ttl, MAX_TOKEN_TTL);
        for ttl in [
            "36601d",
            "5124095576030432h",
            "99999999999999999999s",
            "-1h",
            "0s",
            "12",
        ] {
            assert!(token(ttl).is_err(), "{ttl}");
        }
    }

    #[test]
    fn the_token_command_takes_the_old_flag_names_too() {
        let argv = ["kartei", "token", "--sub", "ed", "--roles", "editor,admin"];
        let Some(Command::Token(t)) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not the token command");
        };
        assert_eq!((t.subject.as_str(), t.roles.len()), ("ed", 2));
    }
}
