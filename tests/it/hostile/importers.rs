//! Importers given lines that are not UTF-8.

use super::kartei;

/// D5: a line that is not UTF-8 is one bad line, in both importers.
#[test]
fn importers_skip_a_line_that_is_not_utf8_and_print_their_summary() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let vocabulary = dir.path().join("b.ndjson");
    std::fs::write(
        &vocabulary,
        b"{\"type\":\"category\",\"id\":\"c-u1\",\"parentId\":null,\"label\":\"U1\"}\n{\"type\":\"category\",\"id\":\"c-u2\",\"parentId\":null,\"label\":\"U\xff\"}\n{\"type\":\"category\",\"id\":\"c-u3\",\"parentId\":\"c-u1\",\"label\":\"U3\"}\n",
    )
    .unwrap();
    let (code, err) = kartei(&[
        "import-vocabulary",
        vocabulary.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("b.ndjson:2: the line is not valid UTF-8"),
        "{err}"
    );
    assert!(err.contains("imported 2 records (2 categories"), "{err}");

    let assignments = dir.path().join("a.ndjson");
    std::fs::write(
        &assignments,
        b"{\"portalId\":\"c-u1\",\"ddbId\":\"D\xfe\",\"keywordId\":\"k\",\"childCategoryId\":\"c-u3\"}\nnot json\n",
    )
    .unwrap();
    let (code, err) = kartei(&[
        "import-assignments",
        assignments.to_str().unwrap(),
        "--creator",
        "probe",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("a.ndjson:1: the line is not valid UTF-8"),
        "{err}"
    );
    assert!(err.contains("a.ndjson:2: invalid record"), "{err}");
    assert!(
        err.contains("0 assignments created, 0 already present, 2 errors"),
        "{err}"
    );
}
