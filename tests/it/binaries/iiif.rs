//! The IIIF Image API, level 2: regions, sizes, rotations, qualities and formats.

use std::io::Cursor;

use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use super::{get, settled, upload};
use crate::both_engines;
use crate::support::{Engine, TestApp, TestServer, uid};

/// A 400×300 PNG: left half red, right half blue, a green 40×30 block at (0,0).
fn quadrants() -> Vec<u8> {
    let img = image::RgbImage::from_fn(400, 300, |x, y| {
        if x < 40 && y < 30 {
            image::Rgb([0, 255, 0])
        } else if x < 200 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 255])
        }
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

async fn image_at(app: &TestServer, path: &str) -> image::DynamicImage {
    let r = get(app, path, &[]).await;
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
    image::load_from_memory(&r.bytes().await.unwrap()).unwrap()
}

fn near(p: image::Rgba<u8>, want: [u8; 3]) -> bool {
    (0..3).all(|i| (i32::from(p[i]) - i32::from(want[i])).abs() < 40)
}

async fn the_iiif_image_api_answers_level_2_requests(engine: Engine) {
    use image::GenericImageView;
    let app = TestApp::on(engine).crawling().build().await;
    let (_, r) = upload(&app, &format!("iiif-{}", uid()), &quadrants()).await;
    let id = r["referenceId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&app, &id).await["status"], "OK");
    let base = format!("/iiif/3/{id}");

    let redirect = app
        .client
        .get(format!("{}{base}", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        redirect.url().path(),
        format!("{base}/info.json"),
        "303 to info.json"
    );
    let ld = get(
        &app,
        &format!("{base}/info.json"),
        &[("accept", "application/ld+json")],
    )
    .await;
    assert_eq!(ld.status(), StatusCode::OK);
    assert!(
        ld.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/ld+json")
    );
    let info: Value = ld.json().await.unwrap();
    assert_eq!(info["@context"], "http://iiif.io/api/image/3/context.json");
    assert_eq!(info["type"], "ImageService3");
    assert_eq!(info["profile"], "level2");
    assert_eq!(
        (info["width"].clone(), info["height"].clone()),
        (json!(400), json!(300))
    );
    assert!(info["id"].as_str().unwrap().ends_with(&base));
    // Without --public-url the id comes from the Host header, and the
    // answer says so: a cache must not give it to a client of another Host.
    let other = get(
        &app,
        &format!("{base}/info.json"),
        &[("host", "other.example:8080")],
    )
    .await;
    assert_eq!(other.headers()[header::VARY], "host");
    let info: Value = other.json().await.unwrap();
    assert_eq!(
        info["id"],
        json!(format!("http://other.example:8080{base}"))
    );

    let i = image_at(&app, &format!("{base}/full/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (400, 300));
    assert!(near(i.get_pixel(10, 10), [0, 255, 0]) && near(i.get_pixel(300, 150), [0, 0, 255]));
    let i = image_at(&app, &format!("{base}/0,0,40,30/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (40, 30));
    assert!(near(i.get_pixel(20, 15), [0, 255, 0]));
    let i = image_at(&app, &format!("{base}/pct:50,0,50,100/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (200, 300));
    assert!(near(i.get_pixel(100, 150), [0, 0, 255]));
    let i = image_at(&app, &format!("{base}/square/max/0/default.png")).await;
    assert_eq!(i.dimensions(), (300, 300));
    for (size, want) in [
        ("200,", (200, 150)),
        (",150", (200, 150)),
        ("pct:25", (100, 75)),
        ("!100,100", (100, 75)),
        ("50,50", (50, 50)),
        ("^800,", (800, 600)),
        ("^!1000,1000", (1000, 750)),
    ] {
        let i = image_at(&app, &format!("{base}/full/{size}/0/default.png")).await;
        assert_eq!(i.dimensions(), want, "{size}");
    }
    let i = image_at(&app, &format!("{base}/full/max/90/default.png")).await;
    assert_eq!(i.dimensions(), (300, 400));
    // Spellings of one request share their ETag (and cache entry).
    let etag_of = |size: &'static str| {
        let path = format!("{base}/full/{size}/0/default.jpg");
        let app = &app;
        async move {
            let r = get(app, &path, &[]).await;
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            r.headers()[header::ETAG].to_str().unwrap().to_owned()
        }
    };
    let e = etag_of("pct:50").await;
    assert_eq!(e, etag_of("pct:50.0").await);
    assert_eq!(e, etag_of("pct:050").await);
    assert_ne!(e, etag_of("pct:51").await);
    assert!(
        near(i.get_pixel(290, 10), [0, 255, 0]),
        "the top-left block goes top-right"
    );
    let i = image_at(&app, &format!("{base}/full/max/!0/default.png")).await;
    assert!(near(i.get_pixel(390, 10), [0, 255, 0]), "mirrored");
    let i = image_at(&app, &format!("{base}/full/max/45/default.png")).await;
    assert!(i.width() > 400 && i.height() > 300);
    let i = image_at(&app, &format!("{base}/full/max/0/gray.png")).await;
    let p = i.get_pixel(300, 150);
    assert!(p[0] == p[1] && p[1] == p[2], "gray");
    let i = image_at(&app, &format!("{base}/full/max/0/bitonal.png")).await;
    assert!(
        i.to_luma8().pixels().all(|p| p[0] == 0 || p[0] == 255),
        "bitonal"
    );
    for f in ["jpg", "webp"] {
        let i = image_at(&app, &format!("{base}/full/100,/0/default.{f}")).await;
        assert_eq!(i.dimensions(), (100, 75), "{f}");
    }
    // Stored derivatives answer what they are.
    let stored = get(
        &app,
        &format!("/binary/{id}/full/!140,105/default.jpg"),
        &[],
    )
    .await;
    let via_iiif = get(&app, &format!("{base}/full/!140,105/0/default.jpg"), &[]).await;
    assert_eq!(
        stored.bytes().await.unwrap(),
        via_iiif.bytes().await.unwrap()
    );

    for (path, status) in [
        ("full/800,/0/default.png", StatusCode::BAD_REQUEST),
        ("full/full/0/default.png", StatusCode::BAD_REQUEST),
        ("500,0,10,10/max/0/default.png", StatusCode::BAD_REQUEST),
        ("full/max/400/default.png", StatusCode::BAD_REQUEST),
        ("full/max/0/sepia.png", StatusCode::BAD_REQUEST),
        ("full/max/0/default.tif", StatusCode::NOT_IMPLEMENTED),
        ("full/^99999,/0/default.png", StatusCode::BAD_REQUEST),
        ("bogus/max/0/default.png", StatusCode::BAD_REQUEST),
    ] {
        let r = get(&app, &format!("{base}/{path}"), &[]).await;
        assert_eq!(r.status(), status, "{path}");
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
    }
    let r = get(&app, "/iiif/3/NoSuchReference0/full/max/0/default.jpg", &[]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

both_engines!(the_iiif_image_api_answers_level_2_requests);
