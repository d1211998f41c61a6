//! The router's state: the schemas, the gate, the token reader, the store
//! and each domain's service, the limits. Handlers reach it through axum's
//! `State`; a domain's REST routes ask only for their service (`FromRef`) and
//! never see the rest. The application (`app`) builds it.

use std::sync::Arc;

use axum::extract::FromRef;

use crate::api::assignments_rest::Exports;
use crate::api::schema::KarteiSchema;
use crate::domains::assignments::service::Assignments;
use crate::domains::binaries::service::Binaries;
use crate::domains::crawl::service::Crawl;
use crate::domains::suggestions::service::Suggestions;
use crate::domains::themes::service::Themes;
use crate::edge::EdgeArgs;
use crate::edge::auth::Auth;
use crate::kernel::limits::Limits;
use crate::store::DynStore;

/// The running application as the router sees it.
pub struct AppState {
    pub schema: KarteiSchema,
    /// The schema of WebSocket operations (`live_schema`).
    pub live_schema: KarteiSchema,
    /// What every request passes before the schema (persisted queries,
    /// bounds, deadlines): requests run through `gate.execute(&schema, ..)`.
    pub gate: crate::api::graphql::gate::Gate,
    pub auth: Arc<Auth>,
    pub store: DynStore,
    pub themes: Themes,
    pub assignments: Assignments,
    /// The assignment export and its places (`--max-exports`).
    pub exports: Exports,
    pub binaries: Binaries,
    pub suggestions: Suggestions,
    pub crawl: Crawl,
    pub objects: crate::domains::objects::service::Objects,
    pub limits: Limits,
    pub edge: EdgeArgs,
    /// WebSocket places (subscriptions): at most `--max-connections` in all
    /// (an upgraded connection no longer holds its HTTP connection's slot),
    /// bounded per client address and token subject.
    pub sockets: Arc<crate::edge::sockets::Sockets>,
}

impl FromRef<Arc<AppState>> for crate::api::iiif_presentation::Presentation {
    fn from_ref(app: &Arc<AppState>) -> Self {
        crate::api::iiif_presentation::Presentation {
            themes: app.themes.clone(),
            assignments: app.assignments.clone(),
            binaries: app.binaries.clone(),
            objects: app.objects.clone(),
        }
    }
}

impl FromRef<Arc<AppState>> for crate::api::reconcile::Reconcile {
    fn from_ref(app: &Arc<AppState>) -> Self {
        crate::api::reconcile::Reconcile {
            reconciler: crate::api::reconcile::engine::Reconciler {
                themes: app.themes.clone(),
                limits: app.limits.reconcile.clone(),
            },
            public_url: app.binaries.config().public_url.clone(),
        }
    }
}

impl FromRef<Arc<AppState>> for crate::api::skos::Skos {
    fn from_ref(app: &Arc<AppState>) -> Self {
        crate::api::skos::Skos {
            themes: app.themes.clone(),
            public_url: app.binaries.config().public_url.clone(),
            license: app.edge.skos_license.clone(),
        }
    }
}

impl FromRef<Arc<AppState>> for Suggestions {
    fn from_ref(app: &Arc<AppState>) -> Self {
        app.suggestions.clone()
    }
}

impl FromRef<Arc<AppState>> for Exports {
    fn from_ref(app: &Arc<AppState>) -> Self {
        app.exports.clone()
    }
}

impl FromRef<Arc<AppState>> for Binaries {
    fn from_ref(app: &Arc<AppState>) -> Self {
        app.binaries.clone()
    }
}
