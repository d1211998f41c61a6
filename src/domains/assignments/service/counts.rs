//! How many assignments a portal holds, by status and by creator: read from
//! the counters every suggestion and status change moves
//! ([`ASSIGNMENT_COUNTS`]), and the figures an editor judges a suggestion
//! algorithm by.

use super::*;

/// One creator's assignments in a portal, as an editor judges the algorithm
/// (or the person) behind them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreatorFigures {
    pub creator: String,
    /// All its assignments in the portal, in any status.
    pub total: i64,
    /// Waiting for a decision: AUTOSUGGESTED or SUGGESTED.
    pub open: i64,
    /// Accepted, then or since: ACCEPTED, PUBLISHED, DELETESUGGESTED or
    /// DELETED (the workflow reaches the last three only through ACCEPTED).
    pub accepted: i64,
    /// REJECTED (also after an acceptance was taken back).
    pub rejected: i64,
}

impl CreatorFigures {
    /// The share of its decided assignments that were accepted; none before
    /// the first decision.
    pub fn acceptance_rate(&self) -> Option<f64> {
        let decided = self.accepted + self.rejected;
        (decided > 0).then(|| self.accepted as f64 / decided as f64)
    }

    /// Per creator, in creator order, from a portal's counts.
    pub fn of(counts: &[CreatorCount]) -> Vec<CreatorFigures> {
        use AssignmentStatus::*;
        let mut by: BTreeMap<&str, CreatorFigures> = BTreeMap::new();
        for c in counts {
            let f = by.entry(&c.creator).or_insert_with(|| CreatorFigures {
                creator: c.creator.clone(),
                ..Default::default()
            });
            f.total += c.count;
            match c.status {
                Autosuggested | Suggested => f.open += c.count,
                Accepted | Published | Deletesuggested | Deleted => f.accepted += c.count,
                Rejected => f.rejected += c.count,
            }
        }
        by.into_values().collect()
    }
}

/// Per status, in the workflow's order, every status listed (zero where
/// none), from a portal's counts.
pub fn by_status(counts: &[CreatorCount]) -> Vec<(AssignmentStatus, i64)> {
    AssignmentStatus::ALL
        .into_iter()
        .map(|s| {
            let n = counts.iter().filter(|c| c.status == s).map(|c| c.count).sum();
            (s, n)
        })
        .collect()
}

impl Assignments {
    /// A portal's counts by creator and status, in that order, without the
    /// zero ones; BAD_USER_INPUT for an id that is not a portal's.
    pub async fn counts(&self, portal_id: &str) -> ApiResult<Vec<CreatorCount>> {
        self.check_portal(portal_id).await?;
        Ok(CreatorCount::of_portal(&self.store, portal_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AssignmentStatus::*;

    fn count(creator: &str, status: AssignmentStatus, count: i64) -> CreatorCount {
        CreatorCount {
            creator: creator.into(),
            status,
            count,
        }
    }

    #[test]
    fn figures_sum_a_creators_statuses_and_rate_its_decisions() {
        let counts = [
            count("algo", Autosuggested, 5),
            count("algo", Accepted, 2),
            count("algo", Published, 4),
            count("algo", Deleted, 1),
            count("algo", Rejected, 3),
            count("ed", Suggested, 1),
        ];
        let f = CreatorFigures::of(&counts);
        assert_eq!(
            f[0],
            CreatorFigures {
                creator: "algo".into(),
                total: 15,
                open: 5,
                accepted: 7,
                rejected: 3,
            }
        );
        assert_eq!(f[0].acceptance_rate(), Some(0.7));
        assert_eq!(f[1].creator, "ed");
        assert_eq!(f[1].acceptance_rate(), None);
    }

    #[test]
    fn every_status_is_listed_in_the_workflows_order() {
        let s = by_status(&[count("a", Rejected, 2), count("b", Rejected, 1)]);
        assert_eq!(s.len(), AssignmentStatus::ALL.len());
        assert_eq!(s[0], (Autosuggested, 0));
        assert!(s.contains(&(Rejected, 3)));
    }
}
