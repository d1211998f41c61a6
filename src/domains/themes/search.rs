//! Keyword search without SASI: labels and synonyms are normalised (case and
//! diacritics folded) and every suffix is indexed, so a substring query is a
//! prefix range over one partition `(portal, first two characters)`.

use deunicode::deunicode;

/// Index at most this many characters of a suffix; longer queries are checked
/// against the keyword's labels after the read.
pub const SEARCH_CHARS: usize = 24;
/// Suffixes are indexed from at most this many start positions per label.
pub const MAX_STARTS: usize = 64;

/// Kinds of index row, in ranking order.
pub const KIND_LABEL_START: i32 = 0;
pub const KIND_WORD_START: i32 = 1;
pub const KIND_INFIX: i32 = 2;

/// Case- and diacritic-insensitive form: `München`, `MÜNCH`, `Mu\u{308}nchen` → `munchen`, `munch`.
pub fn normalize(s: &str) -> String {
    // deunicode drops control characters next to non-ASCII letters, so white
    // space becomes a plain space first (else "München\nBerlin" glues together).
    let spaced: String = s
        .chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    let folded = deunicode(&spaced).to_lowercase();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The index entries of one normalised label: (bucket, kind, search text).
pub fn entries(normalized: &str) -> Vec<(String, i32, String)> {
    let chars: Vec<char> = normalized.chars().collect();
    let mut out = Vec::new();
    for start in 0..chars.len().min(MAX_STARTS) {
        if chars.len() - start < 2 || chars[start] == ' ' {
            continue;
        }
        let kind = if start == 0 {
            KIND_LABEL_START
        } else if !chars[start - 1].is_alphanumeric() {
            KIND_WORD_START
        } else {
            KIND_INFIX
        };
        let suffix: String = chars[start..chars.len().min(start + SEARCH_CHARS)]
            .iter()
            .collect();
        out.push((bucket(&suffix), kind, suffix));
    }
    out
}

/// The partition bucket: the first two characters.
pub fn bucket(s: &str) -> String {
    s.chars().take(2).collect()
}

/// How well a keyword's labels match a normalised query: 0 exact, 1 prefix,
/// 2 word start, 3 infix; `None` when no label contains it.
pub fn rank(query: &str, labels: &[String]) -> Option<u8> {
    labels
        .iter()
        .filter_map(|l| {
            let n = normalize(l);
            if n == query {
                Some(0)
            } else if n.starts_with(query) {
                Some(1)
            } else if let Some(pos) = n.find(query) {
                let before = n[..pos].chars().last();
                Some(if before.is_some_and(|c| !c.is_alphanumeric()) {
                    2
                } else {
                    3
                })
            } else {
                None
            }
        })
        .min()
}

/// Strips a label prefix such as `vocnet:hasAsLabel"München"` (seed 000: prefixes
/// are not part of the label) and surrounding white space, until none is left,
/// so that a label written back is written unchanged. Each round removes a
/// prefix and its quotes and scans only what it removes, so a label of any
/// length is stripped in linear time and no nesting depth is left over.
pub fn strip_label(raw: &str) -> String {
    let mut label = raw.trim();
    while let Some(inner) = quoted_after_prefix(label) {
        label = inner;
    }
    label.to_owned()
}

/// The text inside `prefix"…"`, trimmed, when `t` is written that way.
fn quoted_after_prefix(t: &str) -> Option<&str> {
    let (head, rest) = t.split_at(t.find('"')?);
    let inner = rest.strip_prefix('"')?.strip_suffix('"')?;
    is_prefix(head).then(|| inner.trim())
}

/// `vocabulary:property` (`vocnet:hasAsLabel`, `skosxl:prefLabel`): a name on
/// each side of one colon, the first starting with a letter. Anything else
/// before a quote, `:` or `Teil:` alone included, is part of the label.
fn is_prefix(head: &str) -> bool {
    let name = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    head.split_once(':').is_some_and(|(vocabulary, property)| {
        vocabulary.starts_with(|c: char| c.is_ascii_alphabetic())
            && name(vocabulary)
            && name(property)
    })
}

#[cfg(test)]
mod tests;
