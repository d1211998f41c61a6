//! Limits that must hold before the engine looks at a query. async-graphql's
//! recursion-depth check (run as part of parsing) and its depth and
//! complexity rules walk every fragment spread inline, so a document whose
//! fragments each spread the previous one twice costs 2^n steps before a
//! resolver runs: a 1 KB query kept a core busy for minutes. The [`Gate`]
//! every request passes parses the document itself, measures its expanded
//! size once per fragment (memoised: linear in the document), refuses
//! fragment cycles, and hands the parsed document on, so every later walk is
//! over a document known to be small. It also resolves automatic persisted
//! queries and puts a deadline on execution.
//!
//! The gate runs before `Schema::execute`, not as a schema extension: with
//! any extension registered async-graphql builds a `ResolveInfo` (the parent
//! type's name, a registry lookup) and a boxed future for every field it
//! resolves, which cost the curator page about 0.2 ms of its 2 ms.

use std::any::TypeId;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_graphql::parser::types::{ExecutableDocument, OperationType, Selection, SelectionSet};
use async_graphql::{
    ErrorExtensionValues, Executor, Request, Response, ServerError, ServerResult, Value,
};
use sha2::{Digest, Sha256};

use crate::api::graphql::budget::ResponseBudget;

/// Spreads nested inside spreads beyond this are refused outright: no real
/// query needs it, and it keeps the measuring walk's recursion shallow.
const MAX_SPREAD_NESTING: usize = 64;

/// Brackets (`{`, `[`, `(`) open at once beyond this are refused before the
/// text is parsed: the parser recurses once per bracket of a list or object
/// value with no bound of its own (its depth limit covers selection sets
/// only), so a query of 400,000 `[` would overflow the stack and abort the
/// process (read from the parser's code; not reproduced).
pub const MAX_TEXT_NESTING: usize = 128;

/// The bounds a document is held to, counted with every fragment expanded.
#[derive(Clone, Copy, Debug)]
pub struct QueryBounds {
    /// Selections (fields, spreads, inline fragments) after expansion: the
    /// same budget as `--max-complexity`.
    pub max_fields: u64,
    /// Nesting of fields after expansion (`--max-depth`), introspection
    /// excepted (its size still counts).
    pub max_depth: u64,
    /// Longest query text (`--max-query-bytes`), checked before parsing:
    /// parsing and validating cost memory and time in proportion to the text.
    pub max_query_bytes: usize,
    /// How long a query may run once validated.
    pub query_timeout: Duration,
    /// How long a mutation may run once validated.
    pub mutation_timeout: Duration,
    /// The largest answer of a query or mutation (`--max-response-bytes`).
    pub max_response_bytes: usize,
}

/// async-graphql's refusal of a query over `limit_complexity`.
const TOO_COMPLEX: &str = "Query is too complex.";

/// Marks a request that arrived over GET: it may not run a mutation (also
/// not one it names by a persisted query's hash).
#[derive(Clone, Copy, Debug)]
pub struct ReadOnly;

/// The message of the refusal of a mutation over GET (the HTTP layer answers it with 405).
pub const MUTATION_OVER_GET: &str = "a mutation must be sent with POST";

/// What every request passes on its way to the engine: its persisted query
/// resolved (Apollo's automatic persisted queries, version 1), its document
/// parsed and measured against [`QueryBounds`], a mutation over GET refused,
/// and a deadline on the run.
#[derive(Clone)]
pub struct Gate {
    bounds: QueryBounds,
    /// Query texts by their SHA-256, most recently used kept. Texts, not
    /// parsed documents: a parsed document can be some 40 times its text
    /// (every `1,` of a list becomes a positioned value), so a thousand
    /// stored 64 KiB documents could have held gigabytes; texts hold at most
    /// entries × `--max-query-bytes`, and a hit is parsed again (microseconds).
    persisted: Arc<Mutex<lru::LruCache<String, Arc<str>>>>,
    /// Documents that passed [`check`], by their text: a page asked again
    /// skips parsing and measuring (a clone costs a fraction of a parse).
    /// Only texts up to [`PARSED_TEXT_BYTES`], at most [`PARSED_ENTRIES`] of
    /// them: some 40 times the text each, that is at most about 20 MiB.
    parsed: Arc<Mutex<lru::LruCache<String, ExecutableDocument>>>,
}

/// The longest query text whose parsed document the gate keeps.
const PARSED_TEXT_BYTES: usize = 4 * 1024;
/// How many parsed documents the gate keeps.
const PARSED_ENTRIES: usize = 128;

impl Gate {
    /// A gate holding documents to `bounds`, remembering up to `apq_entries`
    /// persisted queries.
    pub fn new(bounds: QueryBounds, apq_entries: usize) -> Self {
        Gate {
            bounds,
            persisted: Arc::new(Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(apq_entries).unwrap_or(NonZeroUsize::MIN),
            ))),
            parsed: Arc::new(Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(PARSED_ENTRIES).expect("not zero"),
            ))),
        }
    }

    /// Runs `request` on `engine` if it passes the gate; else the refusal.
    pub async fn execute(&self, engine: &impl Executor, request: Request) -> Response {
        let (request, ty) = match self.admit(request).await {
            Ok(admitted) => admitted,
            Err(e) => return Response::from_errors(vec![e]),
        };
        let limit = self.deadline(ty).unwrap_or(self.bounds.query_timeout);
        let budget = self.response_budget();
        let request = request.data(budget.clone());
        self.bounded(limit, &budget, engine.execute(request)).await
    }

    /// A budget for one answer (a subscription's events go without: each
    /// is small and its weight counted, and the stream is meant to last).
    pub fn response_budget(&self) -> ResponseBudget {
        ResponseBudget::new(self.bounds.max_response_bytes)
    }

    /// Runs `execution` until it answers, `limit` passes (TIMEOUT), or its
    /// answer outgrows `budget`: then the execution is dropped at once and
    /// the answer is one RESPONSE_TOO_LARGE error, not the part built so far.
    pub async fn bounded(
        &self,
        limit: Duration,
        budget: &ResponseBudget,
        execution: impl std::future::Future<Output = Response>,
    ) -> Response {
        let response = tokio::select! {
            r = tokio::time::timeout(limit, execution) => match r {
                Ok(r) => r,
                Err(_) => return timed_out(limit),
            },
            () = budget.exceeded() => Response::default(),
        };
        if budget.is_exceeded() {
            crate::kernel::metrics::graphql_error(crate::api::graphql::budget::RESPONSE_TOO_LARGE);
            return Response::from_errors(vec![budget.error()]);
        }
        self.explained(response)
    }

    /// `response` with the engine's bare refusal of a query's weight
    /// replaced by one that names the limit and what to do.
    fn explained(&self, mut response: Response) -> Response {
        for e in &mut response.errors {
            if e.message == TOO_COMPLEX {
                *e = refusal(
                    format!(
                        "the query weighs more than --max-complexity ({}) allows: a list weighs its items times theirs (`first`, or the list's usual size); ask for fewer items, aliases or fields",
                        self.bounds.max_fields
                    ),
                    "BAD_USER_INPUT",
                );
            }
        }
        response
    }

    /// How long an operation of type `ty` may run; `None` for a
    /// subscription, which is meant to stay open.
    pub fn deadline(&self, ty: OperationType) -> Option<Duration> {
        match ty {
            OperationType::Mutation => Some(self.bounds.mutation_timeout),
            OperationType::Query => Some(self.bounds.query_timeout),
            OperationType::Subscription => None,
        }
    }

    /// `request` with its persisted query resolved and its document parsed
    /// and within bounds, and the type of the operation it will run.
    pub async fn admit(&self, request: Request) -> ServerResult<(Request, OperationType)> {
        let (mut request, keep_as) = self.persisted_query(request).await?;
        check_text(&request.query, self.bounds.max_query_bytes)?;
        let name = request.operation_name.clone();
        let name = name.as_deref();
        let kept = self.parsed_document(&request.query);
        let fresh = kept.is_none();
        if let Some(doc) = kept {
            request.set_parsed_query(doc);
        }
        let text =
            (fresh && request.query.len() <= PARSED_TEXT_BYTES).then(|| request.query.clone());
        let doc = request.parsed_query()?;
        if fresh {
            check(doc, &self.bounds)?;
            if let Some(text) = text {
                self.parsed().put(text, doc.clone());
            }
        }
        // Kept only once measured: a persisted document is one that passed.
        if let Some((hash, text)) = keep_as {
            self.persisted().put(hash, text);
        }
        let ty = doc
            .operations
            .iter()
            .find(|(n, _)| name.is_none() || n.map(|n| n.as_str()) == name)
            .map_or(OperationType::Query, |(_, op)| op.node.ty);
        if ty == OperationType::Mutation && request.data.contains_key(&TypeId::of::<ReadOnly>()) {
            return Err(refusal(MUTATION_OVER_GET.to_owned(), "BAD_USER_INPUT"));
        }
        Ok((request, ty))
    }

    /// Apollo's automatic persisted queries: a request with the extension
    /// `persistedQuery: {version: 1, sha256Hash}` and no query runs the
    /// document stored under that hash (else `PersistedQueryNotFound`, upon
    /// which the client sends the text too); one with a query whose hash
    /// matches is to be kept under it (the hash returned beside it).
    async fn persisted_query(
        &self,
        mut request: Request,
    ) -> ServerResult<(Request, Option<(String, Arc<str>)>)> {
        let Some(value) = request.extensions.remove("persistedQuery") else {
            return Ok((request, None));
        };
        #[derive(serde::Deserialize)]
        struct PersistedQuery {
            version: i32,
            #[serde(rename = "sha256Hash")]
            sha256_hash: String,
        }
        let pq: PersistedQuery = async_graphql::from_value(value).map_err(|_| {
            ServerError::new("Invalid \"PersistedQuery\" extension configuration.", None)
        })?;
        if pq.version != 1 {
            return Err(ServerError::new(
                format!(
                    "Only the \"PersistedQuery\" extension of version \"1\" is supported, and the current version is \"{}\".",
                    pq.version
                ),
                None,
            ));
        }
        if request.query.is_empty() {
            let Some(text) = self.persisted().get(&pq.sha256_hash).cloned() else {
                return Err(ServerError::new("PersistedQueryNotFound", None));
            };
            request.query = text.to_string();
            return Ok((request, None));
        }
        let hash = format!("{:x}", Sha256::digest(request.query.as_bytes()));
        if pq.sha256_hash != hash {
            return Err(ServerError::new("provided sha does not match query", None));
        }
        let text = Arc::from(request.query.as_str());
        Ok((request, Some((hash, text))))
    }

    /// A copy of the kept document parsed from `text`, if any.
    fn parsed_document(&self, text: &str) -> Option<ExecutableDocument> {
        if text.len() > PARSED_TEXT_BYTES {
            return None;
        }
        self.parsed().get(text).cloned()
    }

    /// The kept parsed documents (a poisoned lock is taken over: the cache
    /// holds no invariant a panicking holder could break).
    fn parsed(&self) -> std::sync::MutexGuard<'_, lru::LruCache<String, ExecutableDocument>> {
        self.parsed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn persisted(&self) -> std::sync::MutexGuard<'_, lru::LruCache<String, Arc<str>>> {
        self.persisted.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Refuses query text longer than `max_bytes` or whose brackets nest deeper
/// than [`MAX_TEXT_NESTING`] (strings and comments skipped). Every transport
/// calls it before the text is parsed.
pub fn check_text(query: &str, max_bytes: usize) -> ServerResult<()> {
    if query.len() > max_bytes {
        return Err(refusal(
            format!(
                "the query text is {} bytes long; the limit is {max_bytes} (send data in variables)",
                query.len()
            ),
            "BAD_USER_INPUT",
        ));
    }
    let b = query.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                    i += 1;
                }
            }
            b'"' if b[i..].starts_with(b"\"\"\"") => {
                i += 3;
                while i < b.len() && !b[i..].starts_with(b"\"\"\"") {
                    i += if b[i..].starts_with(b"\\\"\"\"") {
                        4
                    } else {
                        1
                    };
                }
                i += 2; // the closing quotes, less the step below
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' | b'(' => {
                depth += 1;
                if depth > MAX_TEXT_NESTING {
                    return Err(refusal(
                        format!("the query nests brackets more than {MAX_TEXT_NESTING} deep"),
                        "BAD_USER_INPUT",
                    ));
                }
            }
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The answer to a request stopped after `limit`.
pub fn timed_out(limit: Duration) -> Response {
    crate::kernel::metrics::graphql_error("TIMEOUT");
    Response::from_errors(vec![refusal(
        format!(
            "the request ran longer than its limit of {:.1} s and was stopped",
            limit.as_secs_f64()
        ),
        "TIMEOUT",
    )])
}

/// A refusal with its `extensions.code`.
pub(crate) fn refusal(message: String, code: &str) -> ServerError {
    let mut e = ServerError::new(message, None);
    let mut ext = ErrorExtensionValues::default();
    ext.set("code", Value::from(code));
    e.extensions = Some(ext);
    e
}

/// The expanded size of a document, each fragment measured once.
struct Measure<'a> {
    doc: &'a ExecutableDocument,
    /// Fragment name -> (selections, depth) after expansion.
    memo: HashMap<&'a str, (u64, u64)>,
    /// Fragments being measured: meeting one again is a cycle.
    open: Vec<&'a str>,
}

#[derive(Debug)]
enum Refused {
    TooDeep,
    Cycle(String),
}

impl<'a> Measure<'a> {
    fn selection_set(
        &mut self,
        set: &'a SelectionSet,
        nesting: usize,
    ) -> Result<(u64, u64), Refused> {
        if nesting > MAX_SPREAD_NESTING {
            return Err(Refused::TooDeep);
        }
        let (mut fields, mut depth) = (0u64, 0u64);
        for item in &set.items {
            let (n, d) = match &item.node {
                Selection::Field(f) => {
                    let (n, d) = self.selection_set(&f.node.selection_set.node, nesting + 1)?;
                    // Introspection (`__schema`, `__type`) nests as deep as the
                    // type references it asks for (GraphiQL's asks for 15): its
                    // size counts, its depth does not.
                    let d = if f.node.name.node.starts_with("__") {
                        0
                    } else {
                        d
                    };
                    // Arguments and directives are steps of validation too (its
                    // overlapping-fields rule compares arguments pairwise).
                    let own = 1 + f.node.arguments.len() + f.node.directives.len();
                    (n.saturating_add(own as u64), d.saturating_add(1))
                }
                // A spread or inline fragment is a step of every walk too.
                Selection::InlineFragment(f) => {
                    let (n, d) = self.selection_set(&f.node.selection_set.node, nesting + 1)?;
                    let own = 1 + f.node.directives.len();
                    (n.saturating_add(own as u64), d)
                }
                Selection::FragmentSpread(s) => {
                    let (n, d) = self.fragment(s.node.fragment_name.node.as_str(), nesting + 1)?;
                    let own = 1 + s.node.directives.len();
                    (n.saturating_add(own as u64), d)
                }
            };
            fields = fields.saturating_add(n);
            depth = depth.max(d);
        }
        Ok((fields, depth))
    }

    fn fragment(&mut self, name: &'a str, nesting: usize) -> Result<(u64, u64), Refused> {
        if let Some(m) = self.memo.get(name) {
            return Ok(*m);
        }
        let Some((key, def)) = self.doc.fragments.get_key_value(name) else {
            return Ok((0, 0)); // unknown fragment: validation reports it
        };
        if self.open.contains(&name) {
            return Err(Refused::Cycle(name.to_owned()));
        }
        self.open.push(name);
        let m = self.selection_set(&def.node.selection_set.node, nesting)?;
        self.open.pop();
        self.memo.insert(key.as_str(), m);
        Ok(m)
    }
}

/// Refuses a document whose expansion is larger or deeper than `bounds`.
fn check(doc: &ExecutableDocument, bounds: &QueryBounds) -> ServerResult<()> {
    let mut m = Measure {
        doc,
        memo: HashMap::new(),
        open: Vec::new(),
    };
    for (_, op) in doc.operations.iter() {
        let (fields, depth) = m
            .selection_set(&op.node.selection_set.node, 0)
            .map_err(|r| {
                let message = match r {
                    Refused::TooDeep => {
                        format!("fragments are nested more than {MAX_SPREAD_NESTING} deep")
                    }
                    Refused::Cycle(name) => format!("the fragment {name} spreads itself"),
                };
                refusal(message, "BAD_USER_INPUT")
            })?;
        if fields > bounds.max_fields {
            return Err(refusal(
                format!(
                    "the query has {} selections once its fragments are expanded; the limit is {}",
                    if fields == u64::MAX {
                        "too many".to_owned()
                    } else {
                        fields.to_string()
                    },
                    bounds.max_fields
                ),
                "BAD_USER_INPUT",
            ));
        }
        if depth > bounds.max_depth {
            return Err(refusal(
                format!(
                    "the query is {depth} fields deep once its fragments are expanded; the limit is {}",
                    bounds.max_depth
                ),
                "BAD_USER_INPUT",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> QueryBounds {
        QueryBounds {
            max_fields: 1000,
            max_depth: 12,
            max_query_bytes: 64 << 10,
            query_timeout: Duration::from_secs(1),
            mutation_timeout: Duration::from_secs(1),
            max_response_bytes: 1 << 20,
        }
    }

    fn measure(q: &str) -> ServerResult<()> {
        check(&async_graphql::parser::parse_query(q).unwrap(), &bounds())
    }

    /// 30 fragments named `{name}0` to `{name}29`, each spreading the one
    /// before twice (2^29 copies of `{name}0`, whose selection is `first`).
    fn doubling_fragments(name: &str, first: &str) -> String {
        let mut q = format!("{{portals{{...{name}29}}}} fragment {name}0 on Category{{{first}}}");
        for i in 1..30 {
            let before = i - 1;
            q.push_str(&format!(
                " fragment {name}{i} on Category{{...{name}{before} ...{name}{before}}}"
            ));
        }
        q
    }

    #[test]
    fn doubling_fragments_are_refused_by_their_expanded_size() {
        let q = doubling_fragments("F", "id label");
        let started = std::time::Instant::now();
        let e = measure(&q).unwrap_err();
        assert!(
            e.message.contains("fragments are expanded"),
            "{}",
            e.message
        );
        // Linear, not 2^29: far below a millisecond per fragment even unoptimised.
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn ordinary_fragments_pass_and_depth_counts_through_spreads() {
        assert!(measure("{portals{...A}} fragment A on Category{id children{...B}} fragment B on Category{id label}").is_ok());
        let mut q = String::from("{portals{...D0}} fragment D12 on Category{id}");
        for i in 0..12 {
            q.push_str(&format!(
                " fragment D{i} on Category{{children{{...D{}}}}}",
                i + 1
            ));
        }
        let e = measure(&q).unwrap_err();
        assert!(e.message.contains("deep"), "{}", e.message);
    }

    #[test]
    fn introspection_is_bounded_by_its_size_not_its_depth() {
        let mut type_ref = String::from("kind name");
        for _ in 0..10 {
            type_ref = format!("kind name ofType {{ {type_ref} }}");
        }
        let q = format!("{{ __schema {{ types {{ fields {{ type {{ {type_ref} }} }} }} }} }}");
        assert!(measure(&q).is_ok());
        let deep = "{ portals { children { children { children { children { children { children { children { children { children { children { children { children { id } } } } } } } } } } } } } }";
        assert!(measure(deep).unwrap_err().message.contains("deep"));
    }

    #[test]
    fn spreads_of_missing_fragments_count_too() {
        let q = doubling_fragments("M", "...Missing");
        assert!(measure(&q).unwrap_err().message.contains("expanded"));
    }

    #[test]
    fn cycles_and_long_spread_chains_end() {
        let e = measure(
            "{portals{...A}} fragment A on Category{...B ...B} fragment B on Category{...A ...A}",
        )
        .unwrap_err();
        assert!(e.message.contains("spreads itself"), "{}", e.message);
        let mut q = String::from("{portals{...C0}} fragment C100 on Category{id}");
        for i in 0..100 {
            q.push_str(&format!(" fragment C{i} on Category{{...C{}}}", i + 1));
        }
        assert!(measure(&q).unwrap_err().message.contains("nested"));
    }

    #[test]
    fn brackets_nest_within_bounds_and_strings_and_comments_do_not_count() {
        let deep = |n: usize| format!("{{a(x:{}1{})}}", "[".repeat(n), "]".repeat(n));
        assert!(check_text(&deep(MAX_TEXT_NESTING - 2), 1 << 20).is_ok());
        let e = check_text(&deep(MAX_TEXT_NESTING), 1 << 20).unwrap_err();
        assert!(e.message.contains("nests brackets"), "{}", e.message);
        let quoted = "[".repeat(500);
        for text in [
            format!("{{a(x:\"{quoted}\\\"{quoted}\")}}"),
            format!("{{a(x:\"\"\"{quoted}\\\"\"\"{quoted}\"\"\")}}"),
            format!("# {quoted}\n{{a}}"),
        ] {
            assert!(check_text(&text, 1 << 20).is_ok(), "{text:.80}");
        }
        assert!(
            check_text("{a}", 2)
                .unwrap_err()
                .message
                .contains("limit is 2")
        );
    }
}
