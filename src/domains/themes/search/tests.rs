//! Unit and property tests of `search`.

use super::*;

#[test]
fn folds_case_and_diacritics() {
    assert_eq!(normalize("München"), "munchen");
    assert_eq!(normalize("MÜNCH"), "munch");
    assert_eq!(normalize("Mu\u{308}nchen"), "munchen");
    assert_eq!(normalize("  Straße  der  Einheit "), "strasse der einheit");
}

#[test]
fn strips_label_prefixes_only() {
    assert_eq!(strip_label("vocnet:hasAsLabel\"München\""), "München");
    assert_eq!(strip_label("skosxl:prefLabel\"Bürgertum\" "), "Bürgertum");
    assert_eq!(strip_label("Der \"Blaue Reiter\""), "Der \"Blaue Reiter\"");
    assert_eq!(strip_label("\"Zitat\""), "\"Zitat\"");
    assert_eq!(strip_label(" Köln "), "Köln");
}

/// Found by `a_prefixed_label_strips_to_its_quoted_text` (prefix `a:a`, label
/// `:""`): a lone colon was taken for a prefix, so the label inside was
/// stripped again, to nothing.
#[test]
fn a_colon_before_a_quote_is_not_a_prefix() {
    assert_eq!(strip_label("a:a\":\"\"\""), ":\"\"");
    assert_eq!(strip_label(":\"\""), ":\"\"");
    assert_eq!(strip_label(":\"Zitat\""), ":\"Zitat\"");
    assert_eq!(strip_label("Teil:\"Zitat\""), "Teil:\"Zitat\"");
    assert_eq!(strip_label("1:2\"Zitat\""), "1:2\"Zitat\"");
    assert_eq!(strip_label("a:b:c\"Zitat\""), "a:b:c\"Zitat\"");
}

/// Stripping stopped after 17 rounds, so a label nested deeper than that
/// changed again when it was written back.
#[test]
fn nested_prefixes_of_any_depth_are_all_stripped() {
    let depth = 100_000;
    let raw = format!(
        "{}München{}",
        "vocnet:hasAsLabel\" ".repeat(depth),
        "\"".repeat(depth)
    );
    assert_eq!(strip_label(&raw), "München");
    let mut raw = "x".to_owned();
    for _ in 0..20 {
        raw = format!("a:b\"{raw}\"");
    }
    assert_eq!(strip_label(&raw), "x");
}

#[test]
fn suffixes_are_ranked_by_where_they_start() {
    let e = entries("hofbrauhaus munchen");
    assert!(e.contains(&("ho".into(), KIND_LABEL_START, "hofbrauhaus munchen".into())));
    assert!(e.contains(&("mu".into(), KIND_WORD_START, "munchen".into())));
    assert!(e.contains(&("au".into(), KIND_INFIX, "auhaus munchen".into())));
    assert!(
        e.iter()
            .all(|(_, _, s)| s.chars().count() >= 2 && !s.starts_with(' '))
    );
}

#[test]
fn rank_orders_exact_prefix_word_infix() {
    let l = |s: &str| vec![s.to_owned()];
    assert_eq!(rank("munchen", &l("München")), Some(0));
    assert_eq!(rank("munch", &l("Münchner Räterepublik")), Some(1));
    assert_eq!(rank("munch", &l("Hofbräuhaus München")), Some(2));
    assert_eq!(rank("unch", &l("München")), Some(3));
    assert_eq!(rank("berlin", &l("München")), None);
}

use proptest::prelude::*;

/// Latin-1 letters (U+00C0..=U+00FF without × and ÷) with their base letters.
const LATIN1: &[(char, &str)] = &[
    ('À', "A"),
    ('Á', "A"),
    ('Â', "A"),
    ('Ã', "A"),
    ('Ä', "A"),
    ('Å', "A"),
    ('Ç', "C"),
    ('È', "E"),
    ('É', "E"),
    ('Ê', "E"),
    ('Ë', "E"),
    ('Ì', "I"),
    ('Í', "I"),
    ('Î', "I"),
    ('Ï', "I"),
    ('Ñ', "N"),
    ('Ò', "O"),
    ('Ó', "O"),
    ('Ô', "O"),
    ('Õ', "O"),
    ('Ö', "O"),
    ('Ù', "U"),
    ('Ú', "U"),
    ('Û', "U"),
    ('Ü', "U"),
    ('Ý', "Y"),
    ('à', "a"),
    ('á', "a"),
    ('â', "a"),
    ('ã', "a"),
    ('ä', "a"),
    ('å', "a"),
    ('ç', "c"),
    ('è', "e"),
    ('é', "e"),
    ('ê', "e"),
    ('ë', "e"),
    ('ì', "i"),
    ('í', "i"),
    ('î', "i"),
    ('ï', "i"),
    ('ñ', "n"),
    ('ò', "o"),
    ('ó', "o"),
    ('ô', "o"),
    ('õ', "o"),
    ('ö', "o"),
    ('ù', "u"),
    ('ú', "u"),
    ('û', "u"),
    ('ü', "u"),
    ('ý', "y"),
    ('ÿ', "y"),
];
/// Latin-1 letters without a base letter plus a mark.
const LATIN1_OTHER: &[char] = &['Æ', 'Ð', 'Ø', 'Þ', 'ß', 'æ', 'ð', 'ø', 'þ'];
/// Combining marks: grave, acute, circumflex, tilde, macron, breve, dot,
/// diaeresis, ring, double acute, caron, cedilla, ogonek.
const MARKS: &[char] = &[
    '\u{300}', '\u{301}', '\u{302}', '\u{303}', '\u{304}', '\u{306}', '\u{307}', '\u{308}',
    '\u{30A}', '\u{30B}', '\u{30C}', '\u{327}', '\u{328}',
];

/// Words of ASCII and Latin-1 letters, spaces and no-break spaces.
fn latin1_text() -> impl Strategy<Value = String> {
    let letter = prop_oneof![
        4 => prop::char::range('a', 'z'),
        2 => prop::char::range('A', 'Z'),
        2 => prop::sample::select(LATIN1.iter().map(|(c, _)| *c).collect::<Vec<_>>()),
        1 => prop::sample::select(LATIN1_OTHER.to_vec()),
        1 => prop::sample::select(vec![' ', ' ', '\u{a0}']),
    ];
    prop::collection::vec(letter, 0..24).prop_map(|cs| cs.into_iter().collect())
}

/// A word of ASCII letters, each followed by up to two combining marks.
fn marked_word() -> impl Strategy<Value = (String, String)> {
    prop::collection::vec(
        (
            prop::char::range('a', 'z'),
            prop::collection::vec(prop::sample::select(MARKS.to_vec()), 0..3),
        ),
        0..16,
    )
    .prop_map(|letters| {
        let plain: String = letters.iter().map(|(c, _)| *c).collect();
        let marked: String = letters
            .iter()
            .flat_map(|(c, m)| std::iter::once(*c).chain(m.iter().copied()))
            .collect();
        (plain, marked)
    })
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), latin1_text(), "[ -~]{0,30}"]
}

/// Label-ish text: prefixes, quotes and white space are frequent.
fn label_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9:_\" -]{0,20}",
        "([a-z]{1,4}:[a-z]{0,4}\"){1,3}[a-z ]{0,6}\"{1,3}",
        "( |\t)*[a-z]{1,6}:[a-zA-Z]{1,8}\"[^\"]{0,10}\"( |\t)*",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(crate::kernel::proptest_config())]

    #[test]
    fn normalizing_twice_changes_nothing(s in any_text()) {
        let once = normalize(&s);
        prop_assert_eq!(normalize(&once), once);
    }

    #[test]
    fn a_normal_form_is_lower_case_ascii_with_single_spaces(s in any_text()) {
        let n = normalize(&s);
        prop_assert!(n.is_ascii(), "{n:?}");
        prop_assert!(!n.chars().any(|c| c.is_ascii_uppercase()), "{n:?}");
        prop_assert!(!n.starts_with(' ') && !n.ends_with(' ') && !n.contains("  "), "{n:?}");
        prop_assert!(!n.chars().any(|c| c.is_whitespace() && c != ' '), "{n:?}");
    }

    #[test]
    fn ascii_case_does_not_matter(s in "[ -~]{0,30}") {
        let n = normalize(&s);
        prop_assert_eq!(normalize(&s.to_ascii_uppercase()), n.clone());
        prop_assert_eq!(normalize(&s.to_uppercase()), n.clone());
        prop_assert_eq!(normalize(&s.to_lowercase()), n);
    }

    #[test]
    fn latin1_case_does_not_matter(s in latin1_text()) {
        let n = normalize(&s);
        prop_assert_eq!(normalize(&s.to_uppercase()), n.clone());
        prop_assert_eq!(normalize(&s.to_lowercase()), n);
    }

    #[test]
    fn latin1_diacritics_do_not_matter(s in latin1_text()) {
        let base: String = s
            .chars()
            .map(|c| match LATIN1.iter().find(|(l, _)| *l == c) {
                Some((_, b)) => (*b).to_owned(),
                None => c.to_string(),
            })
            .collect();
        prop_assert_eq!(normalize(&s), normalize(&base));
    }

    #[test]
    fn any_white_space_between_words_becomes_one_space(
        words in prop::collection::vec(latin1_text(), 1..5),
        gaps in prop::collection::vec("[ \t\n\r\u{a0}]{1,3}", 4),
    ) {
        let mut spaced = words[0].clone();
        let mut gapped = words[0].clone();
        for (w, g) in words[1..].iter().zip(&gaps) {
            spaced.push(' ');
            spaced.push_str(w);
            gapped.push_str(g);
            gapped.push_str(w);
        }
        prop_assert_eq!(normalize(&gapped), normalize(&spaced));
    }

    #[test]
    fn combining_marks_do_not_matter((plain, marked) in marked_word()) {
        prop_assert_eq!(normalize(&marked), normalize(&plain));
        prop_assert_eq!(normalize(&marked.to_uppercase()), normalize(&plain));
    }

    /// `clean_label` strips every label a client writes, so a label read back
    /// and written again must stay what it is.
    #[test]
    fn stripping_a_label_twice_changes_nothing(s in label_text()) {
        let once = strip_label(&s);
        prop_assert_eq!(strip_label(&once), once);
    }

    #[test]
    fn a_stripped_label_has_no_surrounding_white_space(s in label_text()) {
        let l = strip_label(&s);
        prop_assert_eq!(l.trim(), l.as_str());
    }

    /// The quoted text is itself a label: stripped as one (a label that is
    /// itself prefixed loses that prefix too), kept whole when it holds no quote.
    #[test]
    fn a_prefixed_label_strips_to_its_quoted_text(
        prefix in "[a-zA-Z][a-zA-Z0-9_-]{0,7}:[a-zA-Z0-9_-]{1,12}",
        label in prop_oneof![any::<String>(), label_text()],
        pad in "[ \t]{0,2}",
    ) {
        let raw = format!("{pad}{prefix}\"{label}\"{pad}");
        prop_assert_eq!(strip_label(&raw), strip_label(&label));
        if !label.contains('"') {
            prop_assert_eq!(strip_label(&raw), label.trim());
        }
    }

    /// Only `vocabulary:property` is a prefix: a quote after anything else
    /// (nothing, a lone colon, a name without its other half, spaces, other
    /// characters) is part of the label.
    #[test]
    fn quotes_after_something_that_is_not_a_prefix_are_kept(
        head in prop_oneof![
            Just(String::new()),
            ":[a-zA-Z0-9_-]{0,6}".prop_map(String::from),
            "[a-zA-Z][a-zA-Z0-9_-]{0,6}:".prop_map(String::from),
            "[0-9_-][a-zA-Z0-9_-]{0,4}:[a-z]{1,4}".prop_map(String::from),
            "[a-z]{1,4}:[a-z]{1,4}:[a-z]{0,4}".prop_map(String::from),
            "[a-z]{1,4}[ .äé/][a-z]{0,3}:[a-z]{1,4}".prop_map(String::from),
            "[a-z]{1,4}:[a-z]{0,3}[ .äé/][a-z]{0,3}".prop_map(String::from),
            "[^\":]{1,8}".prop_map(String::from),
        ],
        label in prop_oneof![any::<String>(), label_text()],
    ) {
        prop_assume!(!head.starts_with(char::is_whitespace));
        let raw = format!("{head}\"{label}\"");
        prop_assert_eq!(strip_label(&raw), raw.trim());
    }

    #[test]
    fn labels_of_any_nesting_depth_strip_to_the_innermost_text(
        prefixes in prop::collection::vec("[a-z]{1,6}:[a-zA-Z]{1,8}", 0..40),
        label in "[^\"]{0,12}",
        pad in "[ \t]{0,2}",
    ) {
        let mut raw = label.clone();
        for p in &prefixes {
            raw = format!("{pad}{p}\"{raw}\"{pad}");
        }
        prop_assert_eq!(strip_label(&raw), label.trim());
    }

    #[test]
    fn index_entries_of_any_text_stay_within_their_bounds(s in any_text()) {
        let n = normalize(&s);
        let e = entries(&n);
        prop_assert!(e.len() <= MAX_STARTS);
        for (bucket_of, kind, suffix) in &e {
            prop_assert!(n.contains(suffix.as_str()), "{suffix:?} in {n:?}");
            let chars = suffix.chars().count();
            prop_assert!((2..=SEARCH_CHARS).contains(&chars), "{suffix:?}");
            prop_assert!(!suffix.starts_with(' '));
            prop_assert_eq!(bucket_of, &bucket(suffix));
            prop_assert!([KIND_LABEL_START, KIND_WORD_START, KIND_INFIX].contains(kind));
        }
    }

    /// Every suffix of a label is found by its rank, never ranked worse than infix.
    #[test]
    fn every_indexed_suffix_ranks_its_label(s in any_text(), other in any_text()) {
        let labels = vec![other, s.clone()];
        for (_, kind, suffix) in entries(&normalize(&s)) {
            let r = rank(&suffix, &labels);
            prop_assert!(r.is_some_and(|r| r <= 3), "{suffix:?} {r:?}");
            if kind == KIND_LABEL_START {
                prop_assert!(r.is_some_and(|r| r <= 1), "{suffix:?} {r:?}");
            }
        }
    }

    #[test]
    fn any_query_ranks_without_panicking(q in any_text(), labels in prop::collection::vec(any_text(), 0..4)) {
        let q = normalize(&q);
        if let Some(r) = rank(&q, &labels) {
            prop_assert!(r <= 3);
            prop_assert!(labels.iter().any(|l| normalize(l).contains(q.as_str())));
        }
    }

    #[test]
    fn text_without_a_quote_is_only_trimmed(s in "[^\"]{0,30}") {
        prop_assert_eq!(strip_label(&s), s.trim());
    }
}
