//! GraphQL types and root fields of the image-suggestions domain.

use async_graphql::{ComplexObject, Context, Object, Result, SimpleObject};

use crate::api::caller::caller;
use crate::api::graphql::budget::Metered;
use crate::api::graphql::cost;
use crate::api::suggestion_loaders::{PageKey, PageLoader};
use crate::domains::suggestions::model::{Dataset, DatasetState, Feedback};
use crate::domains::suggestions::service::{
    FeedbackInput, MAX_PAGES, Reviewed, Suggestions, check_min_confidence, check_wiki, uuid_time,
};
use crate::kernel::error::ApiError;
use crate::kernel::roles::Principal;

/// What the suggestions of one page are weighed as (up to 1,000 are read).
const SUGGESTIONS_WEIGHT: usize = 50;
/// What a suggestion's short lists (wikis, kinds, verdicts) are weighed as.
const SHORT_LIST_WEIGHT: usize = 10;
/// A verdict's reasons: at most 20 are kept (the service refuses more).
const REASONS_WEIGHT: usize = 20;
use async_graphql::dataloader::DataLoader;

fn service<'a>(ctx: &Context<'a>) -> &'a Suggestions {
    ctx.data_unchecked::<Suggestions>()
}

/// Pages through the request's loader (one batched read for every page the
/// request names), filtered by `min_confidence`.
async fn load_pages(
    ctx: &Context<'_>,
    wiki: &str,
    page_ids: &[i32],
    include_reviewed: bool,
    min_confidence: Option<f64>,
) -> Result<Vec<Vec<Reviewed>>> {
    // Checked here: the loader reads without the filter, and a bad field must
    // fail alone, not the whole batch.
    check_min_confidence(min_confidence)?;
    check_wiki(wiki)?;
    let keys: Vec<PageKey> = page_ids
        .iter()
        .map(|p| PageKey {
            wiki: wiki.to_owned(),
            page_id: *p,
            include_reviewed,
        })
        .collect();
    let found = ctx
        .data_unchecked::<DataLoader<PageLoader>>()
        .load_many(keys.iter().cloned())
        .await?;
    // Read, not taken: a page named twice is answered twice.
    Ok(keys
        .iter()
        .map(|k| {
            found
                .get(k)
                .into_iter()
                .flatten()
                .filter(|r| min_confidence.is_none_or(|m| r.suggestion.confidence >= m))
                .cloned()
                .collect()
        })
        .collect())
}

/// An editor's verdict on one image for one page.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct SuggestionFeedback {
    wiki: String,
    page_id: i32,
    filename: String,
    /// A time-based UUID (version 1).
    id: String,
    /// When it was recorded (RFC 3339, from the id).
    time: Option<String>,
    origin_wiki: Option<String>,
    #[graphql(skip)]
    user_name: String,
    accepted: bool,
    rejected: bool,
    #[graphql(complexity = "cost::list(REASONS_WEIGHT, child_complexity)")]
    rejection_reasons: Vec<String>,
}

impl From<Feedback> for SuggestionFeedback {
    fn from(f: Feedback) -> Self {
        SuggestionFeedback {
            time: uuid_time(&f.id),
            wiki: f.wiki,
            page_id: f.page_id,
            filename: f.filename,
            id: f.id,
            origin_wiki: f.origin_wiki,
            user_name: f.user_name,
            accepted: f.is_accepted,
            rejected: f.is_rejected,
            rejection_reasons: f.rejection_reasons,
        }
    }
}

#[ComplexObject]
impl SuggestionFeedback {
    /// The token subject who gave it; null for a caller without a token
    /// (reviewers' names are shown to signed-in users only).
    async fn user(&self, ctx: &Context<'_>) -> Option<&str> {
        let signed_in = ctx
            .data_opt::<Principal>()
            .is_some_and(Principal::signed_in);
        signed_in.then_some(self.user_name.as_str())
    }
}

/// An image suggested for an encyclopedia page by one dataset.
pub struct ImageSuggestion(Reviewed);

#[Object]
impl ImageSuggestion {
    async fn wiki(&self) -> &str {
        &self.0.suggestion.wiki
    }
    async fn page_id(&self) -> i32 {
        self.0.suggestion.page_id
    }
    /// The file name of the image.
    async fn image(&self) -> &str {
        &self.0.suggestion.image
    }
    /// The wiki the image lives on.
    async fn origin_wiki(&self) -> &str {
        &self.0.suggestion.origin_wiki
    }
    /// 0 to 1.
    async fn confidence(&self) -> f64 {
        self.0.suggestion.confidence
    }
    /// Wikis whose page on the same item shows the image.
    #[graphql(complexity = "cost::list(SHORT_LIST_WEIGHT, child_complexity)")]
    async fn found_on(&self) -> &[String] {
        &self.0.suggestion.found_on
    }
    #[graphql(complexity = "cost::list(SHORT_LIST_WEIGHT, child_complexity)")]
    async fn kind(&self) -> &[String] {
        &self.0.suggestion.kind
    }
    /// The revision of the page the dataset was computed from.
    async fn page_revision(&self) -> Option<i32> {
        self.0.suggestion.page_rev
    }
    #[graphql(deprecation = "use `pageRevision`")]
    async fn page_rev(&self) -> Option<i32> {
        self.0.suggestion.page_rev
    }
    async fn section_heading(&self) -> Option<&str> {
        self.0.suggestion.section_heading.as_deref()
    }
    async fn section_index(&self) -> Option<i32> {
        self.0.suggestion.section_index
    }
    async fn page_qid(&self) -> Option<&str> {
        self.0.suggestion.page_qid.as_deref()
    }
    /// The dataset (one import; a time-based UUID).
    async fn dataset_id(&self) -> &str {
        &self.0.suggestion.id
    }
    /// When the dataset was started (RFC 3339, from its id).
    async fn dataset_time(&self) -> Option<String> {
        uuid_time(&self.0.suggestion.id)
    }
    /// Feedback on this image for this page (only with `includeReviewed`).
    #[graphql(complexity = "cost::list(SHORT_LIST_WEIGHT, child_complexity)")]
    async fn feedback(&self) -> Vec<Metered<SuggestionFeedback>> {
        self.0
            .feedback
            .iter()
            .cloned()
            .map(|f| Metered(f.into()))
            .collect()
    }
}

/// The suggestions of one page.
#[derive(SimpleObject)]
pub struct PageSuggestions {
    page_id: i32,
    #[graphql(complexity = "cost::list(SUGGESTIONS_WEIGHT, child_complexity)")]
    suggestions: Vec<Metered<ImageSuggestion>>,
}

/// One import of a wiki's suggestions.
#[derive(SimpleObject)]
pub struct SuggestionDataset {
    id: String,
    state: DatasetState,
    /// Rows imported.
    rows: f64,
    bad_lines: f64,
    started: String,
    finished: Option<String>,
    source: Option<String>,
    /// Whether readers see this one now.
    current: bool,
}

fn dataset(d: Dataset, current: Option<&str>) -> SuggestionDataset {
    SuggestionDataset {
        current: current == Some(d.id.as_str()),
        id: d.id,
        state: d.state,
        rows: d.rows as f64,
        bad_lines: d.bad_lines as f64,
        started: d.started,
        finished: d.finished,
        source: d.source,
    }
}

fn wrap(v: Vec<Reviewed>) -> Vec<Metered<ImageSuggestion>> {
    v.into_iter().map(|r| Metered(ImageSuggestion(r))).collect()
}

#[derive(Default)]
pub struct SuggestionsQuery;

#[Object]
impl SuggestionsQuery {
    /// A page's image suggestions in the wiki's current dataset, by page id
    /// or by title (exactly one), highest confidence first. Images that have
    /// feedback for the page are left out unless `includeReviewed`.
    #[graphql(complexity = "cost::list(SUGGESTIONS_WEIGHT, child_complexity)")]
    async fn image_suggestions(
        &self,
        ctx: &Context<'_>,
        wiki: String,
        page_id: Option<i32>,
        title: Option<String>,
        min_confidence: Option<f64>,
        include_reviewed: Option<bool>,
    ) -> Result<Vec<Metered<ImageSuggestion>>> {
        let s = service(ctx);
        let page = match (page_id, title) {
            (Some(p), None) => p,
            (None, Some(t)) => match s.title(&wiki, &t).await? {
                Some((p, _)) => p,
                None => return Ok(Vec::new()),
            },
            _ => {
                return Err(ApiError::bad_input("give exactly one of pageId and title").into());
            }
        };
        let mut pages = load_pages(
            ctx,
            &wiki,
            &[page],
            include_reviewed.unwrap_or(false),
            min_confidence,
        )
        .await?;
        Ok(wrap(pages.pop().unwrap_or_default()))
    }

    /// The suggestions of up to 100 pages at once (concurrent single-page
    /// reads: one wave for the pages' feedback, one for their suggestions).
    #[graphql(complexity = "cost::per_argument_item(page_ids.len(), 1, child_complexity)")]
    async fn image_suggestions_for_pages(
        &self,
        ctx: &Context<'_>,
        wiki: String,
        page_ids: Vec<i32>,
        min_confidence: Option<f64>,
    ) -> Result<Vec<Metered<PageSuggestions>>> {
        if page_ids.len() > MAX_PAGES {
            return Err(ApiError::bad_input(format!("at most {MAX_PAGES} pages")).into());
        }
        let pages = load_pages(ctx, &wiki, &page_ids, false, min_confidence).await?;
        Ok(page_ids
            .into_iter()
            .zip(pages)
            .map(|(page_id, s)| {
                Metered(PageSuggestions {
                    page_id,
                    suggestions: wrap(s),
                })
            })
            .collect())
    }

    /// Pages of the current dataset that still have unreviewed suggestions,
    /// sampled at random (for editors' task feeds); `count` at most 50.
    #[graphql(
        complexity = "cost::counted(count, 10, crate::domains::suggestions::service::MAX_RANDOM, child_complexity)"
    )]
    async fn random_pages_with_suggestions(
        &self,
        ctx: &Context<'_>,
        wiki: String,
        count: Option<i32>,
    ) -> Result<Metered<Vec<i32>>> {
        let count = usize::try_from(count.unwrap_or(10)).unwrap_or(0);
        Ok(Metered(service(ctx).random_pages(&wiki, count).await?))
    }

    /// The wiki's datasets, newest first.
    #[graphql(complexity = "cost::list(SHORT_LIST_WEIGHT, child_complexity)")]
    async fn suggestion_datasets(
        &self,
        ctx: &Context<'_>,
        wiki: String,
    ) -> Result<Vec<Metered<SuggestionDataset>>> {
        let s = service(ctx);
        let (all, current) = futures::try_join!(s.datasets(&wiki), s.current(&wiki))?;
        Ok(all
            .into_iter()
            .map(|d| Metered(dataset(d, current.as_deref())))
            .collect())
    }
}

#[derive(Default)]
pub struct SuggestionsMutation;

#[Object]
impl SuggestionsMutation {
    /// Accepts or rejects an image for a page (editor or contributor; the user
    /// is the token's subject). From then on the image is not suggested for
    /// the page again, in this dataset and the next ones.
    async fn record_suggestion_feedback(
        &self,
        ctx: &Context<'_>,
        wiki: String,
        page_id: i32,
        filename: String,
        accepted: bool,
        rejection_reasons: Option<Vec<String>>,
    ) -> Result<Metered<SuggestionFeedback>> {
        let f = service(ctx)
            .record_feedback(
                caller(ctx),
                FeedbackInput {
                    wiki,
                    page_id,
                    filename,
                    accepted,
                    rejection_reasons: rejection_reasons.unwrap_or_default(),
                },
            )
            .await?;
        Ok(Metered(f.into()))
    }
}
