//! A small vocabulary of unique ids, seeded through the themes service: what
//! assignment, feed and cluster tests suggest keywords from.

use kartei::domains::themes::service::{CategoryInput, KeywordInput, Themes};
use kartei::kernel::roles::{Principal, Role};
use kartei::store::DynStore;

use super::uid;

/// Portal P with children C1 (> G1) and C2; portal Q with child QC.
/// Keywords: K1 in C1, K2 in G1, KQ in QC.
pub struct Vocabulary {
    pub p: String,
    pub c1: String,
    pub c2: String,
    pub g1: String,
    pub q: String,
    pub qc: String,
    pub k1: String,
    pub k2: String,
    pub kq: String,
}

pub async fn vocabulary(store: &DynStore) -> Vocabulary {
    let admin = Principal::local("tester", &[Role::Admin]);
    let u = uid();
    let v = Vocabulary {
        p: format!("p-{u}"),
        c1: format!("c1-{u}"),
        c2: format!("c2-{u}"),
        g1: format!("g1-{u}"),
        q: format!("q-{u}"),
        qc: format!("qc-{u}"),
        k1: format!("k1-{u}"),
        k2: format!("k2-{u}"),
        kq: format!("kq-{u}"),
    };
    let themes = Themes::new(store.clone());
    for (id, parent, label) in [
        (&v.p, None, "Portal P"),
        (&v.q, None, "Portal Q"),
        (&v.c1, Some(&v.p), "Orte"),
        (&v.c2, Some(&v.p), "Personen"),
        (&v.g1, Some(&v.c1), "Städte"),
        (&v.qc, Some(&v.q), "Anderes"),
    ] {
        themes
            .upsert_category(
                &admin,
                CategoryInput {
                    id: id.clone(),
                    parent_id: parent.cloned(),
                    label: label.into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{}", e.message()));
    }
    for (id, cat, label) in [
        (&v.k1, &v.c1, "Bayern"),
        (&v.k2, &v.g1, "München"),
        (&v.kq, &v.qc, "Elsewhere"),
    ] {
        themes
            .upsert_keyword(
                &admin,
                KeywordInput {
                    id: id.clone(),
                    label: label.into(),
                    category_ids: vec![cat.clone()],
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{}", e.message()));
    }
    v
}
