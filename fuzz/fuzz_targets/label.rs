//! The label normaliser and the search index over any text: stripping and
//! folding are idempotent, index entries stay within their bounds, every
//! indexed suffix finds its label.
#![no_main]

use kartei::domains::themes::search::{MAX_STARTS, SEARCH_CHARS, entries, normalize, rank, strip_label};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let label = strip_label(text);
    assert_eq!(strip_label(&label), label, "{text:?}");
    assert_eq!(label.trim(), label);
    let n = normalize(&label);
    assert_eq!(normalize(&n), n, "{label:?}");
    assert!(n.is_ascii() && !n.contains("  ") && n.trim() == n, "{n:?}");
    let index = entries(&n);
    assert!(index.len() <= MAX_STARTS);
    let labels = [label.clone()];
    for (_, _, suffix) in index {
        assert!((2..=SEARCH_CHARS).contains(&suffix.chars().count()));
        assert!(rank(&suffix, &labels).is_some(), "{suffix:?} of {label:?}");
    }
    // Any query against the label, whatever it is.
    let _ = rank(&normalize(text), &labels);
});
