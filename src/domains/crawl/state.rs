//! A domain's state and how it changes: which moves the state machine has,
//! the compare-and-set on `domain_info` that makes each move, and the
//! `domains_by_state` rows that list the domains of each state.
//!
//! Every change of a domain's state is a compare-and-set on its
//! `domain_info` row (walker's claim `IF dispatched = true AND claim_tok =
//! <zero>` among them), so one dispatcher builds a domain's segment and one
//! fetcher crawls it. Each change also bumps the row's `version`; the
//! `domains_by_state` row of the new version is written ahead of the CAS and
//! the old version's row removed after, so a domain is never missing from
//! its state's list (a reader checks `domain_info` before it acts, and drops
//! rows of versions left behind); the dispatcher's sweep re-writes every
//! domain's row now and then as insurance.

use std::time::Duration;

use time::OffsetDateTime;

use super::model::*;
use super::service::Crawl;
use crate::kernel::error::ApiResult;
use crate::kernel::parse_time;
use crate::store::{Cas, Condition, Cursor, DynStore, Mutation, Page, Row, Slice, Value};
use std::collections::HashMap;

/// How long a state row of a version its domain never reached (a lost CAS,
/// a crash between the two writes) is kept before a reader removes it.
const PENDING_ROW_KEEP: Duration = Duration::from_secs(60);

/// Conditions a move asks for besides the state and version it starts from
/// (a column and the value it must hold; `None` for null).
pub(super) type Also = Vec<(&'static str, Option<Value>)>;

/// The moves of the state machine: whether a domain in `from` may go to `to`.
///
/// - new or IDLE -> PENDING: a link is wanted;
/// - PENDING or IDLE -> DISPATCHING: a dispatcher builds its segment
///   (DISPATCHING -> DISPATCHING: it takes over from one that stopped);
/// - DISPATCHING -> READY (a segment), IDLE (nothing due) or PENDING (links
///   arrived while it looked);
/// - READY -> CLAIMED: a fetcher claims it;
/// - CLAIMED -> PENDING (the segment is done) or READY (the turn is over,
///   or its fetcher stopped);
/// - any -> EXCLUDED, EXCLUDED -> PENDING: an admin's exclusion and inclusion;
/// - any -> itself: a change of priority.
pub fn may_move(from: DomainState, to: DomainState) -> bool {
    use DomainState::*;
    match (from, to) {
        (f, t) if f == t => true,
        (_, Excluded) | (Excluded, Pending) => true,
        (Excluded, _) => false,
        (Idle, Pending) => true,
        (Pending | Idle, Dispatching) => true,
        (Dispatching, Ready | Idle | Pending) => true,
        (Ready, Claimed) => true,
        (Claimed, Ready | Pending) => true,
        _ => false,
    }
}

/// The state-table row of `domain` in `state` at `version`.
pub(super) fn state_row(
    domain: &str,
    state: DomainState,
    priority: i32,
    version: i64,
    wake_at: Option<&str>,
    since: &str,
) -> Mutation {
    Mutation::upsert(
        Row::new(&DOMAINS_BY_STATE)
            .set("state", state.as_str())
            .set("priority", priority)
            .set("dom", domain)
            .set("version", version)
            .set_opt("wake_at", wake_at)
            .set("since", since),
    )
}

/// The removal of exactly one state-table row (never another version's).
pub(super) fn state_delete(
    domain: &str,
    state: DomainState,
    priority: i32,
    version: i64,
) -> Mutation {
    Mutation::delete(
        &DOMAINS_BY_STATE,
        vec![
            state.as_str().into(),
            priority.into(),
            domain.into(),
            version.into(),
        ],
    )
}

/// What a state-table row is worth, given its domain's row.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RowIs {
    Valid,
    /// Of a version the domain has left: remove it.
    Stale,
    /// Of a version the domain has not reached (yet).
    Ahead,
}

/// Judges a state-table row (`state`, `priority`, `version`) by its domain's row.
pub(super) fn judge(
    state: DomainState,
    priority: i32,
    version: i64,
    info: Option<&DomainInfo>,
) -> RowIs {
    match info {
        // Written ahead of the domain's creation (or left by a lost one).
        None => RowIs::Ahead,
        Some(i) if version < i.version => RowIs::Stale,
        Some(i) if version > i.version => RowIs::Ahead,
        Some(i) if i.state == state && i.priority == priority => RowIs::Valid,
        Some(_) => RowIs::Stale,
    }
}

/// Whether a row written ahead (`since`) is old enough to be given up: its
/// move lost, or its writer crashed before the CAS.
fn ahead_row_given_up(since: Option<&str>, now: OffsetDateTime) -> bool {
    since
        .and_then(parse_time)
        .is_none_or(|t| now - t > PENDING_ROW_KEEP)
}

/// A change of `domain_info` columns, the key set by the move.
pub(super) fn domain_set() -> Row {
    Row::new(&DOMAIN_INFO)
}

/// A domain's row as the store holds it now.
pub(super) async fn read_domain(store: &DynStore, domain: &str) -> ApiResult<Option<DomainInfo>> {
    Ok(store
        .get(&DOMAIN_INFO, &[domain.into()])
        .await?
        .map(|r| DomainInfo::from_row(&r)))
}

/// Creates `domain` PENDING, if no row exists; false when another was first.
pub(super) async fn create_pending(store: &DynStore, domain: &str, since: &str) -> ApiResult<bool> {
    store
        .apply(vec![state_row(
            domain,
            DomainState::Pending,
            DEFAULT_PRIORITY,
            0,
            None,
            since,
        )])
        .await?;
    let created = store
        .cas(Cas {
            row: domain_set()
                .set("dom", domain)
                .set("state", DomainState::Pending.as_str())
                .set("priority", DEFAULT_PRIORITY)
                .set("claim_tok", ZERO)
                .set("dispatched", false)
                .set("more", false)
                .set("version", 0i64),
            condition: Condition::NotExists,
            ttl: None,
        })
        .await?;
    Ok(created.applied)
}

/// Moves `from` (as read) to state `to`, setting `set`'s columns too, if
/// `domain_info` still holds `from`'s version and `also`: the state row of
/// the next version is written first, the one of `from`'s version removed
/// after (each by its exact key, so no other change's row is ever removed).
/// `Ok(Err(row found))` when the CAS lost, `Ok(Ok(new))` when it applied.
pub(super) async fn transition(
    store: &DynStore,
    from: &DomainInfo,
    to: DomainState,
    set: Row,
    also: Also,
) -> ApiResult<Result<DomainInfo, Option<DomainInfo>>> {
    debug_assert!(
        may_move(from.state, to),
        "{:?} -> {to:?} is not a move of the state machine",
        from.state
    );
    let priority = set.int("priority").unwrap_or(from.priority);
    let wake_at = set
        .text("wake_at")
        .map(str::to_owned)
        .or(from.wake_at.clone());
    let version = from.version + 1;
    let since = fixed_time(OffsetDateTime::now_utc());
    store
        .apply(vec![state_row(
            &from.domain,
            to,
            priority,
            version,
            wake_at.as_deref(),
            &since,
        )])
        .await?;
    let mut condition = vec![
        ("state", Some(from.state.as_str().into())),
        ("version", Some(Value::BigInt(from.version))),
    ];
    condition.extend(also);
    let outcome = store
        .cas(Cas {
            row: set
                .set("dom", &from.domain)
                .set("state", to.as_str())
                .set("version", version),
            condition: Condition::Equals(condition),
            ttl: None,
        })
        .await?;
    let current = outcome.current.as_ref().map(DomainInfo::from_row);
    if outcome.applied {
        store
            .apply(vec![state_delete(
                &from.domain,
                from.state,
                from.priority,
                from.version,
            )])
            .await?;
        return Ok(Ok(current.unwrap_or_else(|| DomainInfo {
            state: to,
            priority,
            version,
            ..from.clone()
        })));
    }
    if judge(to, priority, version, current.as_ref()) != RowIs::Valid {
        store
            .apply(vec![state_delete(&from.domain, to, priority, version)])
            .await?;
    }
    Ok(Err(current))
}

impl Crawl {
    /// Lists the domains of a state-table partition whose rows are valid
    /// (checked against their domain rows; stale rows are removed, and rows
    /// of a version never reached once they are old), from a cursor; also
    /// returns where the page ended.
    pub(super) async fn in_state_from(
        &self,
        state: DomainState,
        priority: i32,
        limit: usize,
        after: Option<Cursor>,
    ) -> ApiResult<(Vec<DomainInfo>, Option<Cursor>)> {
        let page = self
            .store()
            .slice(
                &DOMAINS_BY_STATE,
                &Slice::partition(vec![state.as_str().into(), priority.into()])
                    .limit(limit)
                    .after(after),
            )
            .await?;
        Ok((self.valid(state, priority, &page.rows).await?, page.next))
    }

    /// The first `limit` state-table rows of `state` in every priority,
    /// highest first, each after its cursor in `after`: one call.
    pub(super) async fn state_pages(
        &self,
        state: DomainState,
        limit: usize,
        after: &HashMap<i32, Cursor>,
    ) -> ApiResult<Vec<(i32, Page)>> {
        let priorities: Vec<i32> = PRIORITIES.rev().collect();
        let slices: Vec<Slice> = priorities
            .iter()
            .map(|p| {
                Slice::partition(vec![state.as_str().into(), (*p).into()])
                    .limit(limit)
                    .after(after.get(p).cloned())
            })
            .collect();
        let pages = self.store().slice_many(&DOMAINS_BY_STATE, &slices).await?;
        Ok(priorities.into_iter().zip(pages).collect())
    }

    /// The domains of state-table rows that are valid, in the rows' order.
    pub(super) async fn valid(
        &self,
        state: DomainState,
        priority: i32,
        rows: &[Row],
    ) -> ApiResult<Vec<DomainInfo>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<Vec<Value>> = rows
            .iter()
            .map(|r| vec![r.string("dom").as_str().into()])
            .collect();
        let infos = self.store().get_many(&DOMAIN_INFO, &keys).await?;
        let now = self.inner.clock.now();
        let mut out = Vec::new();
        let mut stale = Vec::new();
        for (row, info) in rows.iter().zip(infos) {
            let info = info.map(|r| DomainInfo::from_row(&r));
            let domain = row.string("dom");
            let version = row.bigint("version").unwrap_or(0);
            match judge(state, priority, version, info.as_ref()) {
                RowIs::Valid => out.extend(info),
                RowIs::Stale => stale.push(state_delete(&domain, state, priority, version)),
                RowIs::Ahead => {
                    if ahead_row_given_up(row.text("since"), now) {
                        stale.push(state_delete(&domain, state, priority, version));
                    }
                }
            }
        }
        if !stale.is_empty() {
            self.store().write_bulk(stale).await?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DomainState::*;

    fn info(state: DomainState, priority: i32, version: i64) -> DomainInfo {
        DomainInfo {
            state,
            priority,
            version,
            ..DomainInfo::from_row(&Row::new(&DOMAIN_INFO).set("dom", "example.org"))
        }
    }

    #[test]
    fn the_state_machine_has_the_moves_the_crawl_makes_and_no_others() {
        let moves = [
            (Idle, Pending),
            (Pending, Dispatching),
            (Idle, Dispatching),
            (Dispatching, Dispatching),
            (Dispatching, Ready),
            (Dispatching, Idle),
            (Dispatching, Pending),
            (Ready, Claimed),
            (Claimed, Pending),
            (Claimed, Ready),
            (Excluded, Pending),
        ];
        // Every pair the table allows is one of these, and each of these is allowed.
        let listed: std::collections::HashSet<(DomainState, DomainState)> = moves
            .into_iter()
            .chain(DomainState::ALL.map(|s| (s, Excluded)))
            .chain(DomainState::ALL.map(|s| (s, s)))
            .collect();
        let allowed: std::collections::HashSet<(DomainState, DomainState)> = DomainState::ALL
            .into_iter()
            .flat_map(|f| DomainState::ALL.map(|t| (f, t)))
            .filter(|(f, t)| may_move(*f, *t))
            .collect();
        assert_eq!(allowed, listed);
        assert!(
            !may_move(Ready, Dispatching),
            "a segment is never rebuilt under a fetcher"
        );
        assert!(
            !may_move(Excluded, Ready),
            "an included domain is dispatched first"
        );
    }

    #[test]
    fn a_state_row_is_valid_only_for_its_domains_version_state_and_priority() {
        let i = info(Ready, 5, 7);
        assert_eq!(judge(Ready, 5, 7, Some(&i)), RowIs::Valid);
        assert_eq!(judge(Ready, 5, 6, Some(&i)), RowIs::Stale, "left behind");
        assert_eq!(
            judge(Claimed, 5, 8, Some(&i)),
            RowIs::Ahead,
            "a move under way"
        );
        assert_eq!(
            judge(Pending, 5, 7, Some(&i)),
            RowIs::Stale,
            "another state"
        );
        assert_eq!(
            judge(Ready, 3, 7, Some(&i)),
            RowIs::Stale,
            "another priority"
        );
        assert_eq!(
            judge(Pending, 5, 0, None),
            RowIs::Ahead,
            "a domain being created"
        );
    }

    #[test]
    fn a_row_written_ahead_is_given_up_after_a_minute() {
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
        let at = |secs_ago: i64| fixed_time(now - time::Duration::seconds(secs_ago));
        assert!(!ahead_row_given_up(Some(&at(10)), now));
        assert!(!ahead_row_given_up(Some(&at(60)), now));
        assert!(ahead_row_given_up(Some(&at(61)), now));
        assert!(ahead_row_given_up(None, now), "a row without a time");
        assert!(ahead_row_given_up(Some("garbage"), now));
    }

    #[test]
    fn a_state_row_and_its_removal_share_one_exact_key() {
        let Mutation::Upsert { row, ttl: None } =
            state_row("example.org", Ready, 4, 9, Some("w"), "s")
        else {
            panic!("an upsert without a TTL");
        };
        let Mutation::Delete { table, key } = state_delete("example.org", Ready, 4, 9) else {
            panic!("a delete");
        };
        assert!(std::ptr::eq(table, &DOMAINS_BY_STATE));
        let row_key: Vec<Value> = ["state", "priority", "dom", "version"]
            .iter()
            .map(|c| row.get(c).cloned().unwrap())
            .collect();
        assert_eq!(row_key, key);
    }
}
