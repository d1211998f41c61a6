//! The caller of a request as the REST routes and resolvers take it: what
//! reading its bearer token gave (`Authenticated`, put into the request's
//! extensions by the edge), `Caller`, the extractor that turns a refused
//! token into a 401, and `caller`, the same for a resolver.

use async_graphql::Context;

use crate::kernel::error::ApiError;
use crate::kernel::roles::Principal;

/// What reading a request's bearer token gave: put into the request's
/// extensions once by the HTTP layer (`Err` is why the token is refused).
#[derive(Clone, Debug)]
pub struct Authenticated(pub Result<Principal, String>);

/// The caller of a REST route, from [`Authenticated`]: a refused token is a 401.
pub struct Caller(pub Principal);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Authenticated>() {
            Some(Authenticated(Ok(p))) => Ok(Caller(p.clone())),
            Some(Authenticated(Err(m))) => Err(ApiError::InvalidToken(m.clone())),
            None => {
                tracing::error!("a route that needs its caller is served without authentication");
                Err(ApiError::Internal)
            }
        }
    }
}

/// The caller of a resolver's request (the edge puts it into every request).
pub fn caller<'a>(ctx: &Context<'a>) -> &'a Principal {
    ctx.data_unchecked::<Principal>()
}
