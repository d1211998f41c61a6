//! GraphQL types and root fields of the crawl frontier: domains and their
//! state, a link's fetch history, and the admin's levers.

use async_graphql::{ComplexObject, Context, Object, Result, SimpleObject};

use crate::api::caller::caller;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::connection::{self, Page, connection};
use crate::api::graphql::cost;
use crate::domains::crawl::model::{DomainInfo, DomainState, ZERO};
use crate::domains::crawl::service::{Crawl, CrawlFetch};
use crate::kernel::error::ApiError;

/// What a link's fetch history is weighed as.
const HISTORY_WEIGHT: usize = 20;

fn service<'a>(ctx: &Context<'a>) -> &'a Crawl {
    ctx.data_unchecked::<Crawl>()
}

/// The domain a root field names: by `domain`, or by `dom`, the seed's
/// abbreviation kept one release for clients not yet moved. Both are optional
/// in the schema so that either alone is enough; exactly one must be given.
fn named_domain(domain: Option<String>, dom: Option<String>) -> Result<String, ApiError> {
    match (domain, dom) {
        (Some(d), None) | (None, Some(d)) => Ok(d),
        (Some(_), Some(_)) => Err(ApiError::bad_input(
            "give `domain` or its deprecated alias `dom`, not both",
        )),
        (None, None) => Err(ApiError::bad_input("`domain` is required")),
    }
}

/// A crawled domain (the registrable domain of its links' hosts, or an IP).
pub struct CrawlDomain(DomainInfo);

#[Object]
impl CrawlDomain {
    /// The domain's name.
    async fn domain(&self) -> &str {
        &self.0.domain
    }
    #[graphql(deprecation = "use `domain`")]
    async fn dom(&self) -> &str {
        &self.0.domain
    }
    async fn state(&self) -> DomainState {
        self.0.state
    }
    /// 0..=9; domains of a higher priority are claimed first.
    async fn priority(&self) -> i32 {
        self.0.priority
    }
    /// Whether a fetcher holds it now.
    async fn claimed(&self) -> bool {
        self.0.claim_token != ZERO
    }
    /// The token of the fetcher holding it (admins and machines see it in
    /// `active_fetchers`).
    async fn claim_token(&self) -> Option<&str> {
        (self.0.claim_token != ZERO).then_some(self.0.claim_token.as_str())
    }
    /// When it was last claimed.
    async fn claim_time(&self) -> Option<&str> {
        self.0.claim_time.as_deref()
    }
    async fn dispatched(&self) -> bool {
        self.0.dispatched
    }
    async fn excluded(&self) -> bool {
        self.0.excluded
    }
    async fn exclude_reason(&self) -> Option<&str> {
        self.0.exclude_reason.as_deref()
    }
    /// Links seen by the last dispatch that scanned all of them (may be stale).
    async fn total_links(&self) -> Option<i32> {
        self.0.total_links
    }
    #[graphql(deprecation = "use `totalLinks`")]
    async fn tot_links(&self) -> Option<i32> {
        self.0.total_links
    }
    /// Links never fetched, as of that scan.
    async fn uncrawled_links(&self) -> Option<i32> {
        self.0.uncrawled_links
    }
    /// Links in the last segment.
    async fn queued_links(&self) -> Option<i32> {
        self.0.queued_links
    }
    /// When the dispatcher last queued links of it (RFC 3339, UTC).
    async fn last_dispatch(&self) -> Option<&str> {
        self.0.last_dispatch.as_deref()
    }
    /// When the dispatcher last found none of its links due (RFC 3339, UTC).
    async fn last_empty_dispatch(&self) -> Option<&str> {
        self.0.last_empty_dispatch.as_deref()
    }
    /// When the dispatcher looks at it again (a retry or re-crawl due).
    async fn wake_at(&self) -> Option<&str> {
        self.0.wake_at.as_deref()
    }
}

/// One row of a link's history: its first sighting, or a fetch.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct CrawlLinkFetch {
    pub url: String,
    /// When it was fetched (RFC 3339, UTC); 1970-01-01 for the first
    /// sighting's row.
    pub fetched_at: String,
    pub first_sighting: bool,
    /// The HTTP status; none when no answer came.
    pub status: Option<i32>,
    pub error: Option<String>,
    /// robots.txt kept the crawler from it.
    pub robots_excluded: bool,
    /// Where redirects led.
    pub redirected_to: Option<String>,
    pub mime: Option<String>,
    /// The first 64 bits of the content's SHA-256 (the first 16 hex digits
    /// of `Binary.checksum`), as a signed 64-bit integer in decimal.
    pub content_hash: Option<String>,
    /// The response headers, `name: value` (for machine and admin, the
    /// crawl's operators; empty for other callers). Cookies and credentials
    /// (`Set-Cookie`, `Authorization`, `WWW-Authenticate`, ...) are never kept.
    #[graphql(complexity = "cost::list(crate::domains::web::MAX_HEADERS, child_complexity)")]
    pub headers: Vec<String>,
}

impl From<CrawlFetch> for CrawlLinkFetch {
    fn from(f: CrawlFetch) -> Self {
        CrawlLinkFetch {
            url: f.url,
            fetched_at: f.time,
            first_sighting: f.first_sighting,
            status: f.status,
            error: f.error,
            robots_excluded: f.robots_excluded,
            redirected_to: f.redirect_url,
            mime: f.mime,
            content_hash: f.content_hash.map(|v| v.to_string()),
            headers: f.headers,
        }
    }
}

/// The seed's names of two fields, kept one release for clients not yet moved.
#[ComplexObject]
impl CrawlLinkFetch {
    #[graphql(deprecation = "use `fetchedAt`")]
    async fn time(&self) -> &str {
        &self.fetched_at
    }
    #[graphql(deprecation = "use `contentHash`")]
    async fn fingerprint(&self) -> Option<&str> {
        self.content_hash.as_deref()
    }
}

/// A link's history, for `Binary.crawls`.
pub async fn crawls_of(ctx: &Context<'_>, url: &str) -> Result<Vec<Metered<CrawlLinkFetch>>> {
    let Some(crawl) = ctx.data_opt::<Crawl>() else {
        return Ok(Vec::new());
    };
    Ok(crawl
        .history(caller(ctx), url)
        .await?
        .into_iter()
        .map(|f| Metered(f.into()))
        .collect())
}

#[derive(Default)]
pub struct CrawlQuery;

#[Object]
impl CrawlQuery {
    /// One crawl domain (admin, machine or editor).
    async fn crawl_domain(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Required (or `dom`, its old name).")] domain: Option<String>,
        #[graphql(desc = "Alias of `domain`.", deprecation = "use `domain`")] dom: Option<String>,
    ) -> Result<Option<Metered<CrawlDomain>>> {
        let dom = named_domain(domain, dom)?;
        Ok(service(ctx)
            .domain(caller(ctx), &dom)
            .await?
            .map(|d| Metered(CrawlDomain(d))))
    }

    /// The crawl domain a URL belongs to (its registrable domain), as
    /// `crawlDomain` answers it (admin, machine or editor).
    async fn crawl_domain_of_url(
        &self,
        ctx: &Context<'_>,
        url: String,
    ) -> Result<Option<Metered<CrawlDomain>>> {
        let key =
            crate::domains::crawl::model::LinkKey::of(&url).map_err(ApiError::BadUserInput)?;
        Ok(service(ctx)
            .domain(caller(ctx), &key.dom)
            .await?
            .map(|d| Metered(CrawlDomain(d))))
    }

    /// The domains in one state, by name (admin, machine or editor).
    #[graphql(complexity = "cost::page(first, child_complexity)")]
    async fn crawl_domains(
        &self,
        ctx: &Context<'_>,
        state: DomainState,
        first: Option<i32>,
        after: Option<String>,
    ) -> Result<Page<Metered<CrawlDomain>>> {
        let (first, after, has_previous) = connection::window(first, after)?;
        let page = service(ctx)
            .domains(caller(ctx), state, first, after)
            .await?;
        Ok(connection(
            page.map(|d| Metered(CrawlDomain(d))),
            has_previous,
        ))
    }

    /// A link's fetch history, oldest first (admin, machine or editor).
    #[graphql(complexity = "cost::list(HISTORY_WEIGHT, child_complexity)")]
    async fn crawl_link(
        &self,
        ctx: &Context<'_>,
        url: String,
    ) -> Result<Vec<Metered<CrawlLinkFetch>>> {
        Ok(service(ctx)
            .link(caller(ctx), &url)
            .await?
            .into_iter()
            .map(|f| Metered(f.into()))
            .collect())
    }
}

#[derive(Default)]
pub struct CrawlMutation;

#[Object]
impl CrawlMutation {
    /// Sets a domain's priority, 0..=9 (admin).
    async fn set_domain_priority(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Required (or `dom`, its old name).")] domain: Option<String>,
        #[graphql(desc = "Alias of `domain`.", deprecation = "use `domain`")] dom: Option<String>,
        #[graphql(desc = "0..=9; domains of a higher priority are claimed first.")] priority: i32,
    ) -> Result<Metered<CrawlDomain>> {
        let dom = named_domain(domain, dom)?;
        Ok(Metered(CrawlDomain(
            service(ctx)
                .set_priority(caller(ctx), &dom, priority)
                .await?,
        )))
    }

    /// Excludes a domain from the crawl (admin): nothing more is fetched from
    /// it; its links wait until it is included again.
    async fn exclude_domain(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Required (or `dom`, its old name).")] domain: Option<String>,
        #[graphql(desc = "Alias of `domain`.", deprecation = "use `domain`")] dom: Option<String>,
        #[graphql(desc = "Why (shown as `excludeReason`).")] reason: String,
    ) -> Result<Metered<CrawlDomain>> {
        let dom = named_domain(domain, dom)?;
        Ok(Metered(CrawlDomain(
            service(ctx).exclude(caller(ctx), &dom, &reason).await?,
        )))
    }

    /// Includes an excluded domain again (admin).
    async fn include_domain(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Required (or `dom`, its old name).")] domain: Option<String>,
        #[graphql(desc = "Alias of `domain`.", deprecation = "use `domain`")] dom: Option<String>,
    ) -> Result<Metered<CrawlDomain>> {
        let dom = named_domain(domain, dom)?;
        Ok(Metered(CrawlDomain(
            service(ctx).include(caller(ctx), &dom).await?,
        )))
    }

    /// Fetches a link again as soon as its site allows (admin); a binary
    /// behind it that ended in ERROR waits for the fetch again.
    async fn recrawl(&self, ctx: &Context<'_>, url: String) -> Result<bool> {
        Ok(service(ctx).recrawl(caller(ctx), &url).await?)
    }
}
