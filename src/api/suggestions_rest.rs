//! The read API of the public image-suggestion service, as a drop-in:
//! `GET /public/image_suggestions/suggestions/{wiki}/{page_id}` and the
//! private reads of feedback, title_cache and instanceof_cache, all
//! answering `{"rows": [...]}` with the public field names and JSON types.

use axum::extract::{FromRef, Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::caller::{Authenticated, Caller};
use crate::domains::suggestions::service::{ReadOptions, Suggestions};
use crate::kernel::error::ApiError;
use crate::kernel::roles::Role;

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Suggestions: FromRef<S>,
{
    Router::new()
        .route(
            "/public/image_suggestions/suggestions/{wiki}/{page_id}",
            get(suggestions),
        )
        .route(
            "/private/image_suggestions/feedback/{wiki}/{page_id}",
            get(feedback),
        )
        .route(
            "/private/image_suggestions/title_cache/{wiki}/{title}",
            get(title_cache),
        )
        .route(
            "/private/image_suggestions/instanceof_cache/{wiki}/{page_id}",
            get(instanceof_cache),
        )
}

fn page_id(s: &str) -> Result<i32, ApiError> {
    s.parse::<i32>()
        .ok()
        .filter(|p| *p >= 0)
        .ok_or_else(|| ApiError::bad_input(format!("page_id {s:?} is not an integer page id")))
}

fn rows(rows: Vec<Value>) -> Json<Value> {
    Json(json!({ "rows": rows }))
}

#[derive(Deserialize)]
pub struct SuggestionsQuery {
    #[serde(default)]
    include_reviewed: bool,
}

/// Public: the page's suggestions in the current dataset, masked by feedback
/// unless `?include_reviewed=true` (reviewers' `user_name` only for a caller
/// with a token, null otherwise). An unknown wiki or page: `{"rows": []}`.
async fn suggestions(
    State(s): State<Suggestions>,
    authenticated: Option<axum::Extension<Authenticated>>,
    path: Path<(String, String)>,
    query: Result<Query<SuggestionsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let (wiki, page) = wiki_page(path)?;
    let Query(q) = query.map_err(|e| ApiError::bad_input(e.body_text()))?;
    // A public route: a refused token reads as anonymous here, as no token does.
    let signed_in = matches!(
        authenticated.as_deref(),
        Some(Authenticated(Ok(p))) if p.signed_in()
    );
    let found = s
        .page(
            &wiki,
            page,
            ReadOptions {
                min_confidence: None,
                include_reviewed: q.include_reviewed,
            },
        )
        .await?;
    Ok(rows(
        found
            .into_iter()
            .map(|r| {
                let mut v = serde_json::to_value(&r.suggestion).unwrap_or_default();
                if q.include_reviewed {
                    let mut feedback = serde_json::to_value(&r.feedback).unwrap_or_default();
                    if !signed_in {
                        for f in feedback.as_array_mut().into_iter().flatten() {
                            f["user_name"] = Value::Null;
                        }
                    }
                    v["feedback"] = feedback;
                }
                v
            })
            .collect(),
    ))
}

/// A caller allowed the private reads (editor, machine or admin).
struct Private;

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Private {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let Caller(caller) = Caller::from_request_parts(parts, state).await?;
        caller.require_any(&[Role::Editor, Role::Machine, Role::Admin])?;
        Ok(Private)
    }
}

/// A path's `{wiki}/{page_id}`, the page id checked.
fn wiki_page(Path((wiki, page)): Path<(String, String)>) -> Result<(String, i32), ApiError> {
    Ok((wiki, page_id(&page)?))
}

async fn feedback(
    State(s): State<Suggestions>,
    _: Private,
    path: Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let (wiki, page) = wiki_page(path)?;
    let found = s.feedback(&wiki, page).await?;
    let found = found
        .iter()
        .map(|f| serde_json::to_value(f).unwrap_or_default());
    Ok(rows(found.collect()))
}

async fn title_cache(
    State(s): State<Suggestions>,
    _: Private,
    Path((wiki, title)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(rows(match s.title(&wiki, &title).await? {
        Some((page_id, page_rev)) => {
            vec![json!({"wiki": wiki, "title": title, "page_id": page_id, "page_rev": page_rev})]
        }
        None => Vec::new(),
    }))
}

async fn instanceof_cache(
    State(s): State<Suggestions>,
    _: Private,
    path: Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let (wiki, page) = wiki_page(path)?;
    Ok(rows(match s.instance_of(&wiki, page).await? {
        Some((page_rev, instance_of)) => vec![
            json!({"wiki": wiki, "page_id": page, "page_rev": page_rev, "instance_of": instance_of}),
        ],
        None => Vec::new(),
    }))
}
