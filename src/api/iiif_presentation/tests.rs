//! The manifest and collection builders.

use super::*;

#[test]
fn ids_are_percent_encoded_path_segments_under_the_base() {
    assert_eq!(
        url_of("http://h:1", &["iiif", "3", "manifest", "a/b c"]),
        "http://h:1/iiif/3/manifest/a%2Fb%20c"
    );
    assert_eq!(
        url_of("https://example.org/kartei/", &["iiif", "3", "x"]),
        "https://example.org/kartei/iiif/3/x"
    );
}

#[test]
fn a_collection_page_links_the_next_and_its_first() {
    let items = [("A1".to_owned(), "Ein Krug".to_owned())];
    let c = collection_document("http://h", "p 1", "Portal", Some("A0"), &items, Some("A1"));
    assert_eq!(c["id"], "http://h/iiif/3/collection/p%201?after=A0");
    assert_eq!(c["items"][0]["id"], "http://h/iiif/3/manifest/A1");
    assert_eq!(c["items"][1]["type"], "Collection");
    assert_eq!(
        c["items"][1]["id"],
        "http://h/iiif/3/collection/p%201?after=A1"
    );
    assert_eq!(c["partOf"][0]["id"], "http://h/iiif/3/collection/p%201");
    let last = collection_document("http://h", "p", "Portal", None, &items, None);
    assert_eq!(last["items"].as_array().unwrap().len(), 1);
    assert!(last.get("partOf").is_none());
}

#[test]
fn a_canvas_s_image_is_no_larger_than_the_image_api_gives() {
    let big = Image {
        reference: "r".into(),
        width: 20_000,
        height: 10_000,
    };
    let c = canvas("http://h", "http://h/m", 1, &big);
    assert_eq!(
        (c["width"].clone(), c["height"].clone()),
        (json!(20_000), json!(10_000))
    );
    let body = &c["items"][0]["items"][0]["body"];
    assert!(body["width"].as_u64().unwrap() <= u64::from(crate::domains::binaries::iiif::MAX_SIDE));
    let area = body["width"].as_u64().unwrap() * body["height"].as_u64().unwrap();
    assert!(area <= crate::domains::binaries::iiif::MAX_AREA);
}
