//! What the crawl's operators see and move: a domain and the domains of a
//! state, a domain's priority, exclusion and inclusion, and a link (or every
//! link) wanted again now.

use futures::TryStreamExt;

use super::model::*;
use super::service::Crawl;
use super::state::{Also, RowIs, domain_set, judge, read_domain, transition};
use crate::kernel::error::{ApiError, ApiResult};
use crate::kernel::roles::{Principal, Role};
use crate::store::{Contention, Cursor, Listed, Mutation, Row, Slice, Value, table_pages};

/// Reads of a domain's row an admin's change may lose to other writers.
const CHANGE_TRIES: usize = 8;
/// Link states `mark_all_due` reads at a time.
const MARK_PAGE: usize = 500;
/// The longest exclusion reason, in bytes.
const MAX_REASON_BYTES: usize = 1000;

/// A change of a domain's row: the state it goes to, the columns it sets,
/// and what else the row must hold.
type Change = (DomainState, Row, Also);

/// A priority an admin may give a domain.
fn check_priority(priority: i32) -> ApiResult<()> {
    if PRIORITIES.contains(&priority) {
        return Ok(());
    }
    Err(ApiError::bad_input(format!(
        "priority must be {}..={}",
        PRIORITIES.start(),
        PRIORITIES.end()
    )))
}

/// An exclusion's reason, trimmed; one is needed, and not a book.
fn check_reason(reason: &str) -> ApiResult<&str> {
    let reason = reason.trim();
    if reason.is_empty() || reason.len() > MAX_REASON_BYTES {
        return Err(ApiError::bad_input("a reason of 1 to 1000 bytes is needed"));
    }
    Ok(reason)
}

impl Crawl {
    pub async fn domain(&self, who: &Principal, domain: &str) -> ApiResult<Option<DomainInfo>> {
        who.require_any(&[Role::Admin, Role::Machine, Role::Editor])?;
        read_domain(self.store(), domain.trim()).await
    }

    /// The domains in one state, by name, paged.
    pub async fn domains(
        &self,
        who: &Principal,
        state: DomainState,
        first: usize,
        after: Option<Cursor>,
    ) -> ApiResult<Listed<DomainInfo>> {
        who.require_any(&[Role::Admin, Role::Machine, Role::Editor])?;
        let partitions: Vec<Vec<Value>> = PRIORITIES
            .map(|p| vec![state.as_str().into(), p.into()])
            .collect();
        let page = self.store().merged_slice(&DOMAINS_BY_STATE,
            &partitions,
            &Slice::partition(vec![]).limit(first).after(after),
        )
        .await?;
        let keys: Vec<Vec<Value>> = page
            .rows
            .iter()
            .map(|r| vec![r.string("dom").as_str().into()])
            .collect();
        let infos = self.store().get_many(&DOMAIN_INFO, &keys).await?;
        let mut infos = infos.into_iter();
        // Only valid rows (a domain changing state meanwhile may have a row
        // of its next version too).
        Ok(page.listed(|row| {
            let info = infos.next().flatten().map(|r| DomainInfo::from_row(&r))?;
            let version = row.bigint("version").unwrap_or(0);
            (judge(
                state,
                row.int("priority").unwrap_or(-1),
                version,
                Some(&info),
            ) == RowIs::Valid)
                .then_some(info)
        }))
    }

    /// Sets a domain's priority (0..=9; higher is claimed first).
    pub async fn set_priority(
        &self,
        who: &Principal,
        domain: &str,
        priority: i32,
    ) -> ApiResult<DomainInfo> {
        who.require_any(&[Role::Admin])?;
        check_priority(priority)?;
        self.change(domain, |info| {
            Some((info.state, domain_set().set("priority", priority), vec![]))
        })
        .await
    }

    /// Excludes a domain: it is not dispatched or fetched (a fetcher crawling
    /// it reads its claim at least once a second and stops before a request);
    /// its links wait.
    pub async fn exclude(
        &self,
        who: &Principal,
        domain: &str,
        reason: &str,
    ) -> ApiResult<DomainInfo> {
        who.require_any(&[Role::Admin])?;
        let reason = check_reason(reason)?;
        let info = self
            .change(domain, |_| {
                Some((
                    DomainState::Excluded,
                    domain_set()
                        .set("excluded", true)
                        .set("exclude_reason", reason)
                        .set("claim_tok", ZERO)
                        .set("dispatched", false),
                    vec![],
                ))
            })
            .await?;
        self.store()
            .apply(vec![Mutation::delete(
                &SEGMENTS,
                vec![info.domain.as_str().into()],
            )])
            .await?;
        Ok(info)
    }

    /// Includes an excluded domain again (PENDING: its waiting links are dispatched).
    pub async fn include(&self, who: &Principal, domain: &str) -> ApiResult<DomainInfo> {
        who.require_any(&[Role::Admin])?;
        let info = self
            .change(domain, |info| {
                (info.state == DomainState::Excluded).then(|| {
                    (
                        DomainState::Pending,
                        domain_set()
                            .set("excluded", false)
                            .set("exclude_reason", ""),
                        vec![],
                    )
                })
            })
            .await?;
        self.inner.links.wake.notify_waiters();
        Ok(info)
    }

    /// Wants a link fetched again now (an ERROR binary behind it waits for
    /// a body again).
    pub async fn recrawl(&self, who: &Principal, url: &str) -> ApiResult<bool> {
        who.require_any(&[Role::Admin])?;
        let url = url.trim();
        let link = LinkKey::of(url).map_err(ApiError::BadUserInput)?;
        if self
            .store()
            .get(&LINK_STATE, &link.bucketed())
            .await?
            .is_none()
        {
            return Err(ApiError::NotFound(format!("link {}", link.url)));
        }
        self.inner.binaries.retry_url(&link.url).await?;
        self.mark_due(&link.url).await?;
        Ok(true)
    }

    /// Makes a link due now (its getnow row), whatever its last fetch.
    async fn mark_due(&self, url: &str) -> ApiResult<()> {
        let link = LinkKey::of(url).map_err(ApiError::BadUserInput)?;
        if let Some(r) = self.store().get(&LINK_STATE, &link.bucketed()).await? {
            self.store()
                .apply(vec![Mutation::upsert(r.set("getnow", false))])
                .await?;
        }
        self.inner.links.want_now(url).await
    }

    /// Makes every link due now (`kartei recheck-binaries`); returns how many.
    pub async fn mark_all_due(&self) -> ApiResult<u64> {
        let mut pages = std::pin::pin!(table_pages(
            self.store().as_ref(),
            &LINK_STATE,
            None,
            MARK_PAGE
        ));
        let mut n = 0;
        while let Some(page) = pages.try_next().await? {
            for r in &page.rows {
                self.mark_due(&r.string("url")).await?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Applies `f`'s change to a domain's row (none: it stays as it is),
    /// reading it again when another writer changed it first.
    async fn change(
        &self,
        domain: &str,
        f: impl Fn(&DomainInfo) -> Option<Change>,
    ) -> ApiResult<DomainInfo> {
        let domain = domain.trim();
        let mut contention = Contention::new(CHANGE_TRIES);
        loop {
            let Some(info) = read_domain(self.store(), domain).await? else {
                return Err(ApiError::NotFound(format!("crawl domain {domain}")));
            };
            let Some((to, set, also)) = f(&info) else {
                return Ok(info);
            };
            if let Ok(done) = transition(self.store(), &info, to, set, also).await? {
                return Ok(done);
            }
            if !contention.lost().await {
                return Err(ApiError::Unavailable);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_is_zero_to_nine() {
        for p in [0, 5, 9] {
            assert!(check_priority(p).is_ok(), "{p}");
        }
        for p in [-1, 10, i32::MAX] {
            let e = check_priority(p).unwrap_err();
            assert!(e.message().contains("0..=9"), "{p}: {}", e.message());
        }
    }

    #[test]
    fn an_exclusion_needs_a_reason_of_at_most_a_thousand_bytes() {
        assert_eq!(check_reason("  spam  ").unwrap(), "spam");
        assert!(check_reason("   ").is_err());
        assert!(check_reason(&"x".repeat(MAX_REASON_BYTES)).is_ok());
        assert!(
            check_reason(&"é".repeat(MAX_REASON_BYTES / 2 + 1)).is_err(),
            "bytes, not characters"
        );
    }
}
