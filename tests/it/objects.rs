//! Catalogue objects: `import-objects` (its own path, both engines) and what
//! the API says of an object: `catalogueObject(s)`, `Assignment.object`,
//! the link to its page and its image as a binary.

use kartei::domains::objects::import::{ImportReport, import};
use kartei::domains::objects::service::Objects;
use kartei::kernel::roles::{Principal, Role};
use serde_json::{Value, json};

use crate::assignments::{SUGGEST, suggestion};
use crate::both_engines;
use crate::support::{Engine, TestApp, origin_ip, uid};

pub(crate) async fn import_text(app: &TestApp, text: &str) -> ImportReport {
    import(
        &Objects::new(app.store.clone()),
        &app.binaries,
        &Principal::local("import-objects", &[Role::Machine]),
        kartei::kernel::chunked::Input::new(text.as_bytes(), text.len(), 4),
    )
    .await
    .unwrap()
}

/// How many binaries the object `ddb` has.
async fn images_of(app: &TestApp, ddb: &str) -> usize {
    let images = app
        .anonymous()
        .query(
            "query($c: String!) { binaries(context: $c) { nodes { referenceId } } }",
            json!({ "c": ddb }),
        )
        .await;
    images["binaries"]["nodes"].as_array().unwrap().len()
}

const OBJECT: &str = "query($d: ID!) { catalogueObject(ddbId: $d) { ddbId title institution url imageUrl inPortal: url(portalId: \"c-musik\") image { context status url } updatedAt } }";

async fn an_import_gives_each_object_its_context(engine: Engine) {
    let app = TestApp::on(engine).with_vocabulary().build().await;
    let v = app.vocabulary();
    let u = uid();
    let d: Vec<String> = (0..3).map(|i| format!("obj-{u}-{i}")).collect();
    let image = format!("http://{}:9/{u}/krug.jpg", origin_ip());
    let lines = [
        json!({"ddbId": d[0], "title": " Ein Krug ", "institution": "Museum am Markt", "imageUrl": image}).to_string(),
        json!({"ddbId": d[1], "title": "Eine Vase"}).to_string(),
        "not json".into(),
        json!({"ddbId": d[2], "title": "  "}).to_string(),
        json!({"ddbId": d[2], "title": "Ein Teller", "imageUrl": "file:///etc/passwd"}).to_string(),
        json!({"ddbId": d[2], "title": "Ein Teller", "colour": "blau"}).to_string(),
    ];
    let text = lines.join("\n") + "\n";
    let report = import_text(&app, &text).await;
    assert_eq!(
        (report.created, report.updated, report.unchanged),
        (2, 0, 0),
        "{}",
        report.summary()
    );
    let bad: Vec<usize> = report.errors.iter().map(|(n, _)| *n).collect();
    assert_eq!(bad, [3, 4, 5, 6], "{:?}", report.errors);
    assert!(report.errors[1].1.contains("title"), "{:?}", report.errors);
    assert!(report.stopped.is_none());

    let anonymous = app.anonymous();
    let o = &anonymous.query(OBJECT, json!({"d": d[0]})).await["catalogueObject"];
    assert_eq!(o["title"], "Ein Krug");
    assert_eq!(o["institution"], "Museum am Markt");
    assert_eq!(
        o["url"],
        format!("https://www.deutsche-digitale-bibliothek.de/item/{}", d[0])
    );
    assert_eq!(o["imageUrl"], image);
    // The image is a binary under the ddb id, waiting for the crawler.
    assert_eq!(o["image"]["context"], d[0]);
    assert_eq!(o["image"]["url"], image);
    let o2 = &anonymous.query(OBJECT, json!({"d": d[1]})).await["catalogueObject"];
    assert_eq!(o2["institution"], Value::Null);
    assert_eq!(o2["image"], Value::Null);
    // An id no import named, and a bad line's object, are unknown.
    for unknown in [format!("obj-{u}-never"), d[2].clone()] {
        let r = anonymous.query(OBJECT, json!({"d": unknown})).await;
        assert_eq!(r["catalogueObject"], Value::Null, "{unknown}");
    }
    let many = anonymous
        .query(
            "query($d: [ID!]!) { catalogueObjects(ddbIds: $d) { ddbId } }",
            json!({"d": [d[1], "nobody", d[0]]}),
        )
        .await;
    assert_eq!(
        many["catalogueObjects"],
        json!([{"ddbId": d[1]}, {"ddbId": d[0]}])
    );
    let too_many: Vec<String> = (0..101).map(|i| format!("x{i}")).collect();
    assert_eq!(
        anonymous
            .query_err(
                "query($d: [ID!]!) { catalogueObjects(ddbIds: $d) { ddbId } }",
                json!({ "d": too_many })
            )
            .await,
        "BAD_USER_INPUT"
    );

    // Each assignment row carries its object (null for an unknown one).
    let contributor = app.as_contributor("carla");
    for ddb in [&d[0], &format!("obj-{u}-never")] {
        contributor
            .query(SUGGEST, suggestion(&v.p, ddb, &v.k1, &v.c1))
            .await;
    }
    for (ddb, title) in [
        (&d[0], json!("Ein Krug")),
        (&format!("obj-{u}-never"), Value::Null),
    ] {
        let rows = anonymous
            .query(
                "query($d: ID!) { objectAssignments(ddbId: $d) { ddbId object { title } } }",
                json!({ "d": ddb }),
            )
            .await;
        let row = &rows["objectAssignments"][0];
        assert_eq!(row["object"]["title"].clone(), title, "{rows}");
    }

    // The same file again changes nothing and registers no second image.
    let again = import_text(&app, &text).await;
    assert_eq!(
        (again.created, again.updated, again.unchanged),
        (0, 0, 2),
        "{}",
        again.summary()
    );
    assert_eq!(images_of(&app, &d[0]).await, 1);
    // An import that registered the image but was killed before it wrote
    // the row: the rerun takes that reference, not a second one.
    let key = vec![kartei::store::Value::from(d[0].as_str())];
    app.store
        .apply(vec![kartei::store::Mutation::delete(
            &kartei::domains::objects::model::OBJECTS,
            key,
        )])
        .await
        .unwrap();
    let rerun = import_text(&app, &text).await;
    assert_eq!(
        (rerun.created, rerun.unchanged),
        (1, 1),
        "{}",
        rerun.summary()
    );
    assert_eq!(images_of(&app, &d[0]).await, 1);
    // The same object twice close by: the later line is imported, the
    // earlier one reported; a login in the image URL is not kept.
    let twice = [
        json!({"ddbId": d[1], "title": "Erst"}).to_string(),
        json!({"ddbId": d[1], "title": "Dann", "imageUrl": format!("http://user:pw@{}:9/{u}/vase.jpg", origin_ip())}).to_string(),
    ]
    .join("\n");
    let r = import_text(&app, &twice).await;
    assert_eq!(r.updated, 1, "{}", r.summary());
    assert_eq!(r.errors.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1]);
    let o = &anonymous.query(OBJECT, json!({"d": d[1]})).await["catalogueObject"];
    assert_eq!(o["title"], "Dann");
    assert!(!o["imageUrl"].as_str().unwrap().contains("pw"), "{o}");

    // A changed title is written; a line without an image keeps the one
    // imported before.
    let changed = json!({"ddbId": d[0], "title": "Ein großer Krug"}).to_string();
    let r = import_text(&app, &changed).await;
    assert_eq!((r.created, r.updated, r.unchanged), (0, 1, 0));
    let o = &anonymous.query(OBJECT, json!({"d": d[0]})).await["catalogueObject"];
    assert_eq!(o["title"], "Ein großer Krug");
    assert_eq!(o["imageUrl"], image);
    assert_eq!(o["image"]["url"], image);
}

async fn only_machines_and_admins_import_objects(engine: Engine) {
    let app = TestApp::on(engine).build().await;
    let objects = Objects::new(app.store.clone());
    let input = vec![kartei::domains::objects::service::ObjectInput {
        ddb_id: format!("obj-{}", uid()),
        title: "T".into(),
        ..Default::default()
    }];
    for roles in [&[Role::Editor][..], &[Role::Contributor], &[]] {
        let who = Principal::local("someone", roles);
        let r = objects
            .import_many(&who, &app.binaries, input.clone())
            .await;
        assert!(r.is_err(), "{roles:?}");
    }
    let who = Principal::local("bot", &[Role::Admin]);
    let r = objects
        .import_many(&who, &app.binaries, input)
        .await
        .unwrap();
    assert!(r[0].is_ok());
}

both_engines!(
    an_import_gives_each_object_its_context,
    only_machines_and_admins_import_objects,
);
