//! The API error type: one variant per client-visible failure, each with a
//! fixed GraphQL `extensions.code` and HTTP status. Store and engine failures
//! are logged here and shown to the client only as UNAVAILABLE or INTERNAL.

///
/// It deliberately does not implement `Display`: async-graphql converts any
/// `Display` type into an error without a code, and a resolver's `?` must
/// never take that path. `message()` is the client-facing text.
#[derive(Debug)]
pub enum ApiError {
    Unauthenticated,
    InvalidToken(String),
    Forbidden(&'static str),
    NotFound(String),
    BadUserInput(String),
    Conflict {
        message: String,
        current: Option<String>,
    },
    InvalidTransition(String),
    PayloadTooLarge(String),
    /// The request is not one this route takes: wrong method (405), content
    /// type (415) or acceptable media type (406).
    MethodNotAllowed(String),
    UnsupportedMediaType(String),
    NotAcceptable(String),
    /// A paging cursor this server did not make for this query.
    BadCursor,
    /// The client was too slow to send its request, or the request ran past its limit.
    Timeout(String),
    Unavailable,
    /// A limit of the server was reached: `code` names it (e.g.
    /// `RESPONSE_TOO_LARGE`, `TOO_MANY_SOCKETS`), the message says which
    /// setting holds it and what the caller can do.
    Limit {
        code: &'static str,
        status: u16,
        message: String,
    },
    /// Nothing to do that would be worth recording: `code` names what (e.g.
    /// `NOTHING_TO_RELEASE`); nothing was changed.
    Refused {
        code: &'static str,
        message: String,
    },
    /// A subscription's `after` is older than the feed's replay window: the
    /// client reloads its page and subscribes without `after`.
    ReplayTooOld(String),
    /// Resuming subscriptions hold the whole replay budget: try again soon.
    ReplayBusy(String),
    /// The store's disk is full: writes fail until space is freed; reads go on.
    StorageFull,
    Internal,
}

impl ApiError {
    /// The text shown to the client (never a driver or engine message).
    pub fn message(&self) -> String {
        match self {
            ApiError::Unauthenticated => "authentication required: send a bearer token".into(),
            ApiError::Forbidden(role) => format!("this operation needs the role {role}"),
            ApiError::NotFound(what) => format!("{what} not found"),
            ApiError::InvalidToken(m)
            | ApiError::BadUserInput(m)
            | ApiError::InvalidTransition(m)
            | ApiError::PayloadTooLarge(m)
            | ApiError::Timeout(m)
            | ApiError::ReplayTooOld(m)
            | ApiError::ReplayBusy(m)
            | ApiError::MethodNotAllowed(m)
            | ApiError::UnsupportedMediaType(m)
            | ApiError::NotAcceptable(m) => m.clone(),
            ApiError::Conflict { message, .. }
            | ApiError::Limit { message, .. }
            | ApiError::Refused { message, .. } => {
                message.clone()
            }
            ApiError::BadCursor => {
                "the cursor is not one this server gave out for this query".into()
            }
            ApiError::Unavailable => "the store is unavailable, try again".into(),
            ApiError::StorageFull => {
                "the store's disk is full: nothing was written; reads still work, retry once space is freed".into()
            }
            ApiError::Internal => "internal error".into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthenticated | ApiError::InvalidToken(_) => "UNAUTHENTICATED",
            ApiError::Forbidden(_) => "FORBIDDEN",
            ApiError::NotFound(_) => "NOT_FOUND",
            ApiError::BadUserInput(_)
            | ApiError::MethodNotAllowed(_)
            | ApiError::UnsupportedMediaType(_)
            | ApiError::NotAcceptable(_) => "BAD_USER_INPUT",
            ApiError::Conflict { .. } => "CONFLICT",
            ApiError::InvalidTransition(_) => "INVALID_TRANSITION",
            ApiError::PayloadTooLarge(_) => "PAYLOAD_TOO_LARGE",
            ApiError::Timeout(_) => "TIMEOUT",
            ApiError::BadCursor => "BAD_CURSOR",
            ApiError::Unavailable => "UNAVAILABLE",
            ApiError::Limit { code, .. } | ApiError::Refused { code, .. } => code,
            ApiError::ReplayTooOld(_) => "REPLAY_TOO_OLD",
            ApiError::ReplayBusy(_) => "REPLAY_BUSY",
            ApiError::StorageFull => "STORAGE_FULL",
            ApiError::Internal => "INTERNAL",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            ApiError::Unauthenticated | ApiError::InvalidToken(_) => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::NotFound(_) => 404,
            ApiError::BadUserInput(_) => 400,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::NotAcceptable(_) => 406,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Conflict { .. } | ApiError::InvalidTransition(_) => 409,
            ApiError::PayloadTooLarge(_) => 413,
            ApiError::Timeout(_) => 408,
            ApiError::BadCursor => 400,
            ApiError::Limit { status, .. } => *status,
            ApiError::Refused { .. } => 409,
            ApiError::Unavailable | ApiError::ReplayBusy(_) => 503,
            ApiError::ReplayTooOld(_) => 410,
            ApiError::StorageFull => 507,
            ApiError::Internal => 500,
        }
    }

    pub fn bad_input(msg: impl Into<String>) -> Self {
        ApiError::BadUserInput(msg.into())
    }

    /// A limit reached: `code` names it, `message` says which setting and what to do.
    pub fn limit(code: &'static str, status: u16, message: impl Into<String>) -> Self {
        ApiError::Limit {
            code,
            status,
            message: message.into(),
        }
    }
}

impl From<ApiError> for async_graphql::Error {
    fn from(e: ApiError) -> Self {
        crate::kernel::metrics::graphql_error(e.code());
        let code = e.code();
        let current = match &e {
            ApiError::Conflict { current, .. } => current.clone(),
            _ => None,
        };
        async_graphql::ErrorExtensions::extend_with(
            async_graphql::Error::new(e.message()),
            |_, ext| {
                ext.set("code", code);
                if let Some(c) = current {
                    ext.set("currentStatus", c);
                }
            },
        )
    }
}

/// The REST shape of an error: `{"error": {"code", "message"}}` with the code's status.
impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        crate::kernel::metrics::graphql_error(self.code());
        let status = axum::http::StatusCode::from_u16(self.status())
            .unwrap_or(axum::http::StatusCode::BAD_REQUEST);
        let body = serde_json::json!({"error": {"code": self.code(), "message": self.message()}});
        (status, axum::Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
