//! Deep zoom: info.json advertises tiles, a tile request builds the
//! original's pyramid once and is then served from it (the same pixels a
//! render gives), and the collector takes the pyramid with the original.

use axum::http::StatusCode;
use kartei::domains::binaries::model::{TILE_PYRAMIDS, TILES};
use kartei::store::{Slice, Value};
use serde_json::{Value as Json, json};

use super::{get, jpeg, settled, upload};
use crate::both_engines;
use crate::support::{Engine, TestApp, uid};

async fn image(app: &TestApp, path: &str) -> image::DynamicImage {
    let r = get(app, path, &[]).await;
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    image::load_from_memory(&r.bytes().await.unwrap()).unwrap()
}

fn mean_difference(a: &image::DynamicImage, b: &image::DynamicImage) -> f64 {
    let (a, b) = (a.to_rgb8(), b.to_rgb8());
    assert_eq!(a.dimensions(), b.dimensions());
    let sum: u64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(x, y)| u64::from(x.abs_diff(*y)))
        .sum();
    sum as f64 / a.as_raw().len() as f64
}

async fn tiles_come_from_a_pyramid_built_once(engine: Engine) {
    let app = TestApp::on(engine).crawling().build().await;
    let (_, r) = upload(&app, &format!("tiles-{}", uid()), &jpeg(1500, 1100)).await;
    let reference = r["referenceId"].as_str().unwrap().to_owned();
    let original = r["originalId"].as_str().unwrap().to_owned();
    assert_eq!(settled(&app, &reference).await["status"], "OK");
    let base = format!("/iiif/3/{reference}");
    let info: Json = get(&app, &format!("{base}/info.json"), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        info["tiles"],
        json!([{"width": 512, "height": 512, "scaleFactors": [1, 2, 4]}])
    );
    let built = app
        .store
        .get(&TILE_PYRAMIDS, &[original.as_str().into()])
        .await
        .unwrap();
    assert!(built.is_none(), "no pyramid before the first tile");

    // A viewer's first requests come at once: one build answers them all.
    let paths = [
        format!("{base}/0,0,512,512/512,512/0/default.jpg"),
        format!("{base}/1024,512,476,512/476,512/0/default.jpg"),
        format!("{base}/1024,1024,476,76/476,76/0/default.jpg"),
        format!("{base}/0,0,1024,1024/512,512/0/default.jpg"),
        format!("{base}/1024,0,476,1024/238,512/0/color.jpg"),
        format!("{base}/full/375,275/0/default.jpg"),
        format!("{base}/0,0,512,512/512,/0/default.jpg"),
    ];
    let got = futures::future::join_all(paths.iter().map(|p| image(&app, p))).await;
    let sizes: Vec<(u32, u32)> = got.iter().map(|i| (i.width(), i.height())).collect();
    assert_eq!(
        sizes,
        [
            (512, 512),
            (476, 512),
            (476, 76),
            (512, 512),
            (238, 512),
            (375, 275),
            (512, 512)
        ]
    );
    let marker = app
        .store
        .get(&TILE_PYRAMIDS, &[original.as_str().into()])
        .await
        .unwrap()
        .expect("the pyramid is recorded");
    assert_eq!(marker.get("scales"), Some(&Value::Int(3)));
    let mut count = 0;
    for scale in [1, 2, 4] {
        let page = app
            .store
            .slice(
                &TILES,
                &Slice::partition(vec![original.as_str().into(), Value::Int(scale)]).limit(100),
            )
            .await
            .unwrap();
        count += page.rows.len();
    }
    assert_eq!(count, 9 + 4 + 1, "3 × 3, 2 × 2 and 1 tiles");

    // A tile is what a render of that region gives (PNG: never a tile).
    let rendered = image(
        &app,
        &format!("{base}/1024,512,476,512/476,512/0/default.png"),
    )
    .await;
    let d = mean_difference(&got[1], &rendered);
    assert!(d < 6.0, "mean difference {d}");
    let rendered = image(&app, &format!("{base}/0,0,1024,1024/512,512/0/default.png")).await;
    let d = mean_difference(&got[3], &rendered);
    assert!(d < 6.0, "mean difference {d}");

    // The collector takes the pyramid with the original.
    let delete = "mutation($r: ID!) { deleteBinary(referenceId: $r) }";
    app.as_admin().query(delete, json!({"r": reference})).await;
    app.binaries.collect_garbage().await.unwrap();
    assert!(app.binaries.original(&original).await.unwrap().is_none());
    let left = app
        .store
        .slice(
            &TILES,
            &Slice::partition(vec![original.as_str().into(), Value::Int(1)]).limit(10),
        )
        .await
        .unwrap();
    assert!(left.rows.is_empty(), "tiles are gone");
    assert!(
        app.store
            .get(&TILE_PYRAMIDS, &[original.as_str().into()])
            .await
            .unwrap()
            .is_none()
    );
}

both_engines!(tiles_come_from_a_pyramid_built_once);
