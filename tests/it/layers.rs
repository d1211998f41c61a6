//! The layering rule, read from the sources: each layer of `src/` imports
//! only from the layers below it (kernel <- store <- domains <- api <- edge
//! <- app), and a domain imports another domain only where ARCHITECTURE.md
//! allows it. A `crate::` path in code (comments aside) that breaks the rule
//! fails this test with the file, the line and the path. And the map of
//! those layers, ARCHITECTURE.md: every path it names exists.

use std::path::{Path, PathBuf};

/// The layers, from the bottom up.
const LAYERS: &[&str] = &["kernel", "store", "domains", "api", "edge", "app"];

/// The only imports between domains: (who, from whom). Each goes down a
/// chain, so the domains never import each other in a circle.
const DOMAIN_ARROWS: &[(&str, &str)] = &[
    ("assignments", "themes"),
    ("binaries", "web"),
    ("crawl", "binaries"),
    ("crawl", "web"),
    ("objects", "binaries"),
];

/// Where a source file sits: its layer's index and, in `domains`, its domain.
fn place(relative: &Path) -> Option<(usize, Option<String>)> {
    let mut parts = relative.iter().map(|p| p.to_string_lossy().into_owned());
    let first = parts.next()?;
    let top = first.trim_end_matches(".rs");
    let layer = LAYERS.iter().position(|l| *l == top)?;
    let domain = (top == "domains")
        .then(|| parts.next())
        .flatten()
        .map(|d| d.trim_end_matches(".rs").to_owned())
        .filter(|d| d != "mod");
    Some((layer, domain))
}

/// Every rule `text` (the file at `relative`) breaks, as `line: why`.
fn breaches(relative: &Path, text: &str) -> Vec<String> {
    let Some((layer, domain)) = place(relative) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices("crate::") {
            let path: String = code[at + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segments = path.split("::");
            let Some(top) = segments.next() else { continue };
            let Some(to) = LAYERS.iter().position(|l| *l == top) else {
                continue;
            };
            if to > layer {
                found.push(format!(
                    "{}:{}: `crate::{path}` points up, from {} to {}",
                    relative.display(),
                    n + 1,
                    LAYERS[layer],
                    LAYERS[to]
                ));
            }
            if let (Some(from), "domains") = (&domain, top)
                && let Some(other) = segments.next().filter(|d| !d.is_empty())
                && other != from
                && !DOMAIN_ARROWS.contains(&(from.as_str(), other))
            {
                found.push(format!(
                    "{}:{}: `crate::{path}` crosses from the {from} domain to {other}, which ARCHITECTURE.md does not allow",
                    relative.display(),
                    n + 1
                ));
            }
        }
    }
    found
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_import_points_down_and_domains_cross_only_where_allowed() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut all = Vec::new();
    let mut placed = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        placed += usize::from(place(relative).is_some());
        all.extend(breaches(relative, &std::fs::read_to_string(file).unwrap()));
    }
    assert!(placed > 80, "the layers' files were not found ({placed})");
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// The rule catches what it is for: an upward import, one across domains,
/// and leaves alone imports that point down, comments and other crates.
#[test]
fn the_layering_rule_catches_an_upward_or_crossing_import() {
    let up = breaches(
        Path::new("kernel/roles.rs"),
        "use crate::api::caller::Caller;\n",
    );
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(up[0].contains("from kernel to api"), "{up:?}");
    let across = breaches(
        Path::new("domains/themes/service.rs"),
        "fn f() { crate::domains::assignments::service::Assignments::new(); }",
    );
    assert_eq!(across.len(), 1, "{across:?}");
    assert!(across[0].contains("from the themes domain to assignments"));
    assert!(breaches(
        Path::new("domains/crawl/service.rs"),
        "use crate::domains::binaries::service::Binaries;\nuse crate::store::Store;\nuse crate::kernel::Clock;\n",
    )
    .is_empty());
    assert!(
        breaches(
            Path::new("store/mod.rs"),
            "// see crate::api::schema\n/// [`crate::edge::AppState`]\nuse kartei::api::x;\n",
        )
        .is_empty()
    );
    assert!(breaches(Path::new("app/mod.rs"), "use crate::edge::AppState;").is_empty());
}

/// Endings that make a backticked token a repository path.
const PATH_ENDINGS: &[&str] = &[
    ".rs", ".sh", ".cql", ".js", ".mjs", ".md", ".graphql", ".toml", ".py",
];

/// The repository paths `doc` names, as ARCHITECTURE.md's convention says: a
/// backticked token outside code fences, written from the repository root,
/// that ends in a file ending of `PATH_ENDINGS` or begins with one of
/// `root_entries` and a `/`; a `{a,b}` group stands for each. Routes
/// (`/graphql`), commands (spaces) and placeholders (`<name>`, `*`) are not paths.
fn named_paths(doc: &str, root_entries: &[String]) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for token in line.split('`').skip(1).step_by(2) {
            let placeholder = token.starts_with('/')
                || token.contains(|c: char| c.is_whitespace() || "<>*$".contains(c));
            let rooted = token
                .split_once('/')
                .is_some_and(|(first, _)| root_entries.iter().any(|e| e == first));
            if !placeholder && (rooted || PATH_ENDINGS.iter().any(|e| token.ends_with(e))) {
                found.extend(expand_braces(token));
            }
        }
    }
    found
}

/// `src/{a,b}.rs` as `src/a.rs` and `src/b.rs` (each group in turn).
fn expand_braces(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(open), Some(close)) if open < close => path[open + 1..close]
            .split(',')
            .flat_map(|alt| expand_braces(&format!("{}{alt}{}", &path[..open], &path[close + 1..])))
            .collect(),
        _ => vec![path.to_owned()],
    }
}

/// ARCHITECTURE.md is the newcomer's map: a path it names that was moved
/// or renamed sends them nowhere (issue 31 found some 25 such paths). A path
/// without an extension may be a Rust module's file (`tests/it/support` is
/// `support.rs` or `support/`).
#[test]
fn every_path_architecture_md_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let entries: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let sample = "`src/edge/{auth,sockets}.rs`, `/graphql/ws`, `application/json`, `cargo test --test it`, `src/api/<name>.rs`, `tests/it/support`\n```\n`src/nowhere.rs`\n```\n";
    assert_eq!(
        named_paths(sample, &entries),
        [
            "src/edge/auth.rs",
            "src/edge/sockets.rs",
            "tests/it/support"
        ]
    );
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let paths = named_paths(&doc, &entries);
    assert!(
        paths.len() > 60,
        "ARCHITECTURE.md names too few paths ({})",
        paths.len()
    );
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| {
            let at = root.join(p);
            !at.exists() && (at.extension().is_some() || !at.with_extension("rs").exists())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (write them from the repository root):\n{}",
        missing
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
