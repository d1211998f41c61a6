//! The request limits every layer reads: the `serve` flags that bound what a
//! request may cost (body, query, answer, time, connections, sockets,
//! subscriptions), the change feed's and the vocabulary's bounds, and the one
//! duration syntax the flags use. The layers above take the values they need
//! from here; nothing here knows a layer.

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct Limits {
    /// Largest accepted request body in bytes.
    #[arg(long, env = "KARTEI_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Longest accepted GraphQL query text in bytes (data belongs in variables,
    /// which only the body limit bounds).
    #[arg(long, env = "KARTEI_MAX_QUERY_BYTES", default_value_t = 64 << 10)]
    pub max_query_bytes: usize,
    /// Largest input a batch job sent over HTTP (`POST /jobs`, a command's
    /// `--server URL`) may have, in bytes (more: 413 JOB_INPUT_TOO_LARGE).
    #[arg(long, env = "KARTEI_MAX_JOB_INPUT_BYTES", default_value_t = 16 << 30)]
    pub max_job_input_bytes: u64,
    /// Deepest accepted GraphQL query.
    #[arg(long, env = "KARTEI_MAX_DEPTH", default_value_t = 12)]
    pub max_depth: usize,
    /// Highest accepted GraphQL query complexity.
    #[arg(long, env = "KARTEI_MAX_COMPLEXITY", default_value_t = 20_000)]
    pub max_complexity: usize,
    /// How long a DataLoader collects keys before its batched read, in milliseconds.
    /// 0 (the default): fetches start as one wave when the request yields and
    /// the previous wave has answered (see graphql::batch).
    #[arg(long, env = "KARTEI_BATCH_WINDOW_MS", default_value_t = 0)]
    pub batch_window_ms: u64,
    /// How long a GraphQL query may run, in seconds; then it is stopped (TIMEOUT).
    #[arg(long, env = "KARTEI_REQUEST_TIMEOUT", default_value_t = 10)]
    pub request_timeout: u64,
    /// How long a GraphQL mutation may run, in seconds.
    #[arg(long, env = "KARTEI_MUTATION_TIMEOUT", default_value_t = 120)]
    pub mutation_timeout: u64,
    /// Persisted queries kept (automatic persisted queries: a client may send
    /// a query's SHA-256 instead of its text once the server has seen it).
    #[arg(long, env = "KARTEI_APQ_ENTRIES", default_value_t = 1000)]
    pub apq_entries: usize,
    /// Connections served at once; more wait in the listen backlog.
    #[arg(long, env = "KARTEI_MAX_CONNECTIONS", default_value_t = 512)]
    pub max_connections: usize,
    /// Seconds a client has to send a request's head (also how long an idle
    /// kept-alive connection stays open).
    #[arg(long, env = "KARTEI_HEADER_TIMEOUT", default_value_t = 10)]
    pub header_timeout: u64,
    /// Seconds a request body may pause between two pieces before the request is refused.
    #[arg(long, env = "KARTEI_BODY_TIMEOUT", default_value_t = 30)]
    pub body_timeout: u64,
    /// Seconds the server may wait for a client to take more of a response
    /// (or of a WebSocket's messages) before it closes the connection.
    #[arg(long, env = "KARTEI_WRITE_TIMEOUT", default_value_t = 30)]
    pub write_timeout: u64,
    /// WebSockets one client address may hold without a token (sockets that
    /// have not sent `connection_init` yet count too).
    #[arg(long, env = "KARTEI_MAX_SOCKETS_PER_CLIENT", default_value_t = 16)]
    pub max_sockets_per_client: usize,
    /// WebSockets one token subject may hold.
    #[arg(long, env = "KARTEI_MAX_SOCKETS_PER_SUBJECT", default_value_t = 16)]
    pub max_sockets_per_subject: usize,
    /// Subscriptions (and operations over WebSockets) open at once in this process.
    #[arg(long, env = "KARTEI_MAX_SUBSCRIPTIONS", default_value_t = 10_000)]
    pub max_subscriptions: usize,
    /// Percent of the WebSocket and subscription places that only callers
    /// with a token may take (0 to 90).
    #[arg(long, env = "KARTEI_RESERVED_FOR_TOKENS", default_value_t = 25,
          value_parser = clap::value_parser!(u8).range(0..=90))]
    pub reserved_for_tokens: u8,
    /// Largest GraphQL answer, in bytes of its text and values: a query
    /// whose answer grows past it is stopped with RESPONSE_TOO_LARGE.
    #[arg(long, env = "KARTEI_MAX_RESPONSE_BYTES", default_value_t = 16 << 20)]
    pub max_response_bytes: usize,
    /// Exports (`GET /export/assignments`) streaming at once; one more is
    /// refused with 429 TOO_MANY_EXPORTS.
    #[arg(long, env = "KARTEI_MAX_EXPORTS", default_value_t = 4)]
    pub max_exports: usize,
    #[command(flatten)]
    pub feed: FeedArgs,
    #[command(flatten)]
    pub vocabulary: VocabularyLimits,
    #[command(flatten)]
    pub reconcile: ReconcileLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1 << 20,
            max_job_input_bytes: 16 << 30,
            max_query_bytes: 64 << 10,
            max_depth: 12,
            max_complexity: 20_000,
            batch_window_ms: 0,
            request_timeout: 10,
            mutation_timeout: 120,
            apq_entries: 1000,
            max_connections: 512,
            header_timeout: 10,
            body_timeout: 30,
            write_timeout: 30,
            max_sockets_per_client: 16,
            max_sockets_per_subject: 16,
            max_subscriptions: 10_000,
            reserved_for_tokens: 25,
            max_response_bytes: 16 << 20,
            max_exports: 4,
            feed: FeedArgs::default(),
            vocabulary: VocabularyLimits::default(),
            reconcile: ReconcileLimits::default(),
        }
    }
}

/// The assignment change feed behind subscriptions: how far back a resume
/// may reach, how much replayed data may be in memory, how late an event may
/// become visible and still reach live subscribers.
#[derive(Args, Debug, Clone)]
pub struct FeedArgs {
    /// How far back `assignmentChanged(after:)` may resume (at most 24h, the
    /// feed's TTL); an older `after` is refused with REPLAY_TOO_OLD.
    #[arg(long, env = "KARTEI_REPLAY_WINDOW", default_value = "1h", value_parser = parse_replay_window)]
    pub replay_window: std::time::Duration,
    /// Bytes of replayed events that all resuming subscriptions of this
    /// process may hold at once; a resume that finds none free within 5 s is
    /// refused with REPLAY_BUSY.
    #[arg(long, env = "KARTEI_REPLAY_BUDGET_BYTES", default_value_t = 64 << 20)]
    pub replay_budget_bytes: usize,
    /// How late an event may become visible (a slow write, another
    /// instance's clock running behind) and still reach live subscribers;
    /// every tail pass re-reads this much of the feed (1s to 60s).
    #[arg(long, env = "KARTEI_FEED_LAG", default_value = "5s", value_parser = parse_feed_lag)]
    pub feed_lag: std::time::Duration,
}

impl Default for FeedArgs {
    fn default() -> Self {
        FeedArgs {
            replay_window: std::time::Duration::from_secs(3600),
            replay_budget_bytes: 64 << 20,
            feed_lag: std::time::Duration::from_secs(5),
        }
    }
}

fn parse_replay_window(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() || d > std::time::Duration::from_secs(86_400) {
        return Err(format!(
            "{s}: the replay window is more than 0 and at most 24h (events are kept a day)"
        ));
    }
    Ok(d)
}

fn parse_feed_lag(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d < std::time::Duration::from_secs(1) || d > std::time::Duration::from_secs(60) {
        return Err(format!("{s}: the feed lag is 1s to 60s"));
    }
    Ok(d)
}

/// What the vocabulary may hold (`serve` and `import-vocabulary`).
#[derive(Args, Debug, Clone)]
pub struct VocabularyLimits {
    /// Deepest category, in levels (a portal is level 1): a category stores
    /// its ancestors and a keyword an index row under each of them, so the
    /// store grows with depth × items. A deeper one is refused (BAD_USER_INPUT).
    #[arg(long, env = "KARTEI_MAX_CATEGORY_DEPTH", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_category_depth: u16,
}

impl Default for VocabularyLimits {
    fn default() -> Self {
        VocabularyLimits {
            max_category_depth: 16,
        }
    }
}

/// The W3C Reconciliation service's limits (`/reconcile`): each is checked
/// before any work, and a request over one is a 400 BAD_USER_INPUT.
#[derive(clap::Args, Clone, Debug)]
pub struct ReconcileLimits {
    /// Queries in one reconciliation batch.
    #[arg(
        long = "reconcile-max-queries",
        env = "KARTEI_RECONCILE_MAX_QUERIES",
        default_value_t = 500
    )]
    pub max_queries: usize,
    /// Candidates one reconciliation query (or suggestion) may ask for.
    #[arg(
        long = "reconcile-max-limit",
        env = "KARTEI_RECONCILE_MAX_LIMIT",
        default_value_t = 100
    )]
    pub max_limit: usize,
    /// Keyword ids in one data-extension request.
    #[arg(
        long = "reconcile-max-extend-ids",
        env = "KARTEI_RECONCILE_MAX_EXTEND_IDS",
        default_value_t = 500
    )]
    pub max_extend_ids: usize,
    /// Characters of a query's text, a condition's value or a prefix.
    #[arg(
        long = "reconcile-max-text",
        env = "KARTEI_RECONCILE_MAX_TEXT",
        default_value_t = 500
    )]
    pub max_text: usize,
}

impl Default for ReconcileLimits {
    fn default() -> Self {
        ReconcileLimits {
            max_queries: 100,
            max_limit: 100,
            max_extend_ids: 500,
            max_text: 500,
        }
    }
}

/// A duration with a unit: `500ms`, `45s`, `90m`, `12h`, `30d`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s}: a number with a unit (ms, s, m, h, d)"))?;
    let secs = |k: u64| std::time::Duration::from_secs(n.saturating_mul(k));
    Ok(match unit {
        "ms" => std::time::Duration::from_millis(n),
        "s" => secs(1),
        "m" => secs(60),
        "h" => secs(3600),
        "d" => secs(86_400),
        _ => return Err(format!("{s}: the unit must be ms, s, m, h or d")),
    })
}

/// A body slower than this on average, once [`BODY_RATE_GRACE`] has passed,
/// is refused (408). The idle timeout alone let a client hold a connection
/// place for hours by sending a byte every 25 s; 512 such clients held them all.
pub const MIN_BODY_RATE: u64 = 1024;

/// How long a body may take before its average rate is judged.
pub const BODY_RATE_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The error of a body that arrives slower than [`MIN_BODY_RATE`].
#[derive(Debug, thiserror::Error)]
#[error("the request body arrives slower than {MIN_BODY_RATE} bytes/s")]
pub struct BodyTooSlow;
