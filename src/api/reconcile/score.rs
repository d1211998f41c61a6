//! How well a keyword answers a reconciliation query: its name against the
//! query text (character-bigram similarity over the normalised forms of the
//! label and every synonym, 100 for an equal one), and the query's property
//! conditions against the keyword's values. Pure functions: unit-tested here.

use crate::domains::themes::search::normalize;

/// The similarity of two normalised texts, 0 to 100: 100 when equal, else
/// the Sørensen–Dice coefficient of their character bigrams (a word's
/// padding counts, so "weimar" and "weimarer" share their start), at most 99.
pub fn similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 100.0;
    }
    let (ga, gb) = (bigrams(a), bigrams(b));
    if ga.is_empty() || gb.is_empty() {
        return 0.0;
    }
    let mut rest = gb.clone();
    let mut shared = 0usize;
    for g in &ga {
        if let Some(i) = rest.iter().position(|x| x == g) {
            rest.swap_remove(i);
            shared += 1;
        }
    }
    let dice = 2.0 * shared as f64 / (ga.len() + gb.len()) as f64;
    (dice * 100.0).min(99.0)
}

fn bigrams(s: &str) -> Vec<(char, char)> {
    let mut out = Vec::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let chars: Vec<char> = std::iter::once(' ')
            .chain(word.chars())
            .chain(std::iter::once(' '))
            .collect();
        out.extend(chars.windows(2).map(|w| (w[0], w[1])));
    }
    out
}

/// The best similarity of `query` (normalised) to any of `names`, rounded to
/// one decimal.
pub fn name_score(query: &str, names: &[&str]) -> f64 {
    let best = names
        .iter()
        .map(|n| similarity(query, &normalize(n)))
        .fold(0.0, f64::max);
    (best * 10.0).round() / 10.0
}

/// A GND reference in any of its spellings, reduced to the GND id:
/// `https://d-nb.info/gnd/4065105-8`, `http://d-nb.info/gnd/4065105-8/`,
/// `gnd:4065105-8` and `4065105-8` are one.
pub fn gnd_id(v: &str) -> String {
    let v = v.trim().trim_end_matches('/');
    let tail = v.rsplit(['/', ':']).next().unwrap_or(v);
    tail.to_ascii_uppercase()
}

/// Whether a condition's value `wanted` is among `values`: GND references by
/// their id, other texts by their normalised form.
pub fn value_matches(property: &str, wanted: &str, values: &[String]) -> bool {
    if property == "gnd" {
        let w = gnd_id(wanted);
        return values.iter().any(|v| gnd_id(v) == w);
    }
    let w = normalize(wanted);
    values.iter().any(|v| normalize(v) == w)
}

/// The score of a candidate: its name score, and when the query has
/// property conditions, 70 % name and 30 % the share of conditions met.
pub fn combined(name: f64, conditions_met: usize, conditions: usize) -> f64 {
    if conditions == 0 {
        return name;
    }
    let share = conditions_met as f64 / conditions as f64;
    ((0.7 * name + 30.0 * share) * 10.0).round() / 10.0
}

/// Whether the best of `scores` (sorted best first) is a match: an equal
/// name (100) or a score of at least 90, every condition met, and ahead of
/// the next candidate by at least 10.
pub fn is_match(scores: &[(f64, bool)]) -> bool {
    match scores {
        [] => false,
        [(best, all_met), rest @ ..] => {
            *all_met && *best >= 90.0 && rest.first().is_none_or(|(next, _)| best - next >= 10.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_names_score_100_and_near_ones_less() {
        assert_eq!(similarity("weimar", "weimar"), 100.0);
        let near = similarity("weimar", "weimarer republik");
        assert!(near > 30.0 && near < 90.0, "{near}");
        assert!(similarity("weimar", "muenchen") < 20.0);
        assert_eq!(similarity("", "weimar"), 0.0);
        assert!(similarity("weimer", "weimar") > 60.0);
        assert!(similarity("weimer", "weimar") < 100.0);
    }

    #[test]
    fn a_synonym_counts_like_the_label() {
        assert_eq!(name_score("munchen", &["Bayern", "München"]), 100.0);
        assert_eq!(name_score("x", &[]), 0.0);
    }

    #[test]
    fn gnd_references_compare_by_id() {
        for v in [
            "https://d-nb.info/gnd/4065105-8",
            "http://d-nb.info/gnd/4065105-8/",
            "gnd:4065105-8",
            "4065105-8",
        ] {
            assert_eq!(gnd_id(v), "4065105-8", "{v}");
        }
        assert!(value_matches(
            "gnd",
            "4065105-8",
            &["https://d-nb.info/gnd/4065105-8".into()]
        ));
        assert!(!value_matches(
            "gnd",
            "4065105-9",
            &["https://d-nb.info/gnd/4065105-8".into()]
        ));
        assert!(value_matches("synonym", "MÜNCHEN", &["München".into()]));
    }

    #[test]
    fn conditions_weigh_30_percent() {
        assert_eq!(combined(80.0, 0, 0), 80.0);
        assert_eq!(combined(100.0, 1, 1), 100.0);
        assert_eq!(combined(100.0, 0, 2), 70.0);
        assert_eq!(combined(50.0, 1, 2), 50.0);
    }

    #[test]
    fn a_match_is_sure_and_alone() {
        assert!(is_match(&[(100.0, true)]));
        assert!(is_match(&[(100.0, true), (80.0, true)]));
        assert!(!is_match(&[(100.0, true), (95.0, true)]));
        assert!(!is_match(&[(100.0, false)]));
        assert!(!is_match(&[(85.0, true)]));
        assert!(!is_match(&[]));
    }
}
