//! `viewer`: who the request's token says the caller is, so that a client
//! (the curators' UI) can show the user and offer only what their roles allow.
//! The rules themselves stay in the services; this only reports the token.

use async_graphql::{ComplexObject, Context, Object, SimpleObject};

use crate::kernel::roles::Principal;

#[derive(Default)]
pub struct ViewerQuery;

/// The roles a token can carry: five at most.
const ROLES_WEIGHT: usize = 5;

/// The caller of a request, as its bearer token says.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct Viewer {
    /// The token's subject (its `sub` claim): the creator recorded on writes.
    pub subject: String,
    /// The token's roles (contributor, archive, machine, editor, admin), sorted.
    #[graphql(complexity = "crate::api::graphql::cost::list(ROLES_WEIGHT, child_complexity)")]
    pub roles: Vec<String>,
}

/// The JWT claim's abbreviation, kept one release for clients not yet moved.
#[ComplexObject]
impl Viewer {
    #[graphql(deprecation = "use `subject`")]
    async fn sub(&self) -> &str {
        &self.subject
    }
}

#[Object]
impl ViewerQuery {
    /// The caller; null for a request without a token (a reader).
    async fn viewer(&self, ctx: &Context<'_>) -> Option<Viewer> {
        let principal = ctx.data_opt::<Principal>()?;
        Some(Viewer {
            subject: principal.sub.clone()?,
            roles: principal
                .roles
                .iter()
                .map(|r| r.name().to_owned())
                .collect(),
        })
    }
}
