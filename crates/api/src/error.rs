//! The one error type of the HTTP surface: JSON `{code, message}` with a stable `code`.
//! Client errors say what was wrong; internal errors are logged with their cause and
//! answered with an opaque 500.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::time::Duration;
use switchboard_store::StoreError;

/// An error answered to the client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<Duration>,
    extra: Option<Box<(&'static str, serde_json::Value)>>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(flatten)]
    extra: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ApiError {
    /// A client error with a status, a stable code and a human message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
            extra: None,
            source: None,
        }
    }

    /// Adds one more field to the JSON body, e.g. a 409's `current` state, so a client can
    /// act on the refusal without another request.
    pub fn with_field(mut self, name: &'static str, value: &impl serde::Serialize) -> Self {
        // A derived `Serialize` of plain data cannot fail; were one to, the error still
        // answers, without the field, and says why in the log.
        match serde_json::to_value(value) {
            Ok(value) => self.extra = Some(Box::new((name, value))),
            Err(e) => tracing::error!(field = name, error = %e, "error field not serializable"),
        }
        self
    }

    /// Adds a `Retry-After` header.
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// The JSON body this error answers with (what an Idempotency-Key replays).
    pub fn body(&self) -> serde_json::Value {
        serde_json::to_value(self.wire()).unwrap_or(serde_json::Value::Null)
    }

    fn wire(&self) -> Body<'_> {
        Body {
            code: self.code,
            message: &self.message,
            extra: self.extra.as_deref().map(|(name, value)| {
                let mut map = serde_json::Map::new();
                map.insert((*name).to_owned(), value.clone());
                map
            }),
        }
    }

    /// 400 with a specific code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 422 `validation_failed`: well-formed JSON with values that cannot be accepted.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
            message,
        )
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403 `forbidden`: the resource exists but belongs to another org, or the role is too low.
    pub fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "you do not have access to this resource",
        )
    }

    /// 404 `not_found`.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 413 `payload_too_large`.
    pub fn payload_too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "request body is larger than the server accepts",
        )
    }

    /// 429 `rate_limit` with `Retry-After`.
    pub fn rate_limited(retry_after: Duration) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit",
            "too many requests, retry later",
        );
        e.retry_after = Some(retry_after);
        e
    }

    /// 503 with a specific code.
    pub fn unavailable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
    }

    /// 503 `dependency_unavailable` with `Retry-After: 5`: Postgres (or the inbox behind it)
    /// is away or restarting, which says nothing about the request, so clients and
    /// providers retry; never a 500.
    pub fn dependency_unavailable(message: &'static str) -> Self {
        Self::unavailable("dependency_unavailable", message)
            .with_retry_after(Duration::from_secs(5))
    }

    /// An opaque 500; `source` is logged, never sent.
    pub fn internal(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            source: Some(Box::new(source)),
            ..Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal server error",
            )
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict => {
                ApiError::conflict("a resource with these values already exists")
            }
            StoreError::MissingReference => {
                ApiError::validation("a referenced resource does not exist")
            }
            // Postgres away or restarting says nothing about the request: 503 and a retry,
            // never a 500 (the cause is logged, not sent).
            other if other.is_unavailable() => {
                tracing::warn!(error = %other, "database unavailable");
                ApiError::dependency_unavailable("the database is unavailable; retry later")
            }
            other => ApiError::internal(other),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(source) = &self.source {
            tracing::error!(error = %source, code = self.code, "request failed");
        }
        let mut response = (self.status, axum::Json(self.wire())).into_response();
        if let Some(after) = self.retry_after {
            let secs = after.as_secs().max(1);
            if let Ok(value) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

/// The error body every endpoint answers with, as documented in the OpenAPI document.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Stable, machine-readable (`conflict`, `forbidden`, `validation_failed`, …).
    pub code: String,
    /// For humans.
    pub message: String,
}

/// The answers most routes share, each one response of the OpenAPI document named once
/// here (`responses((status = 200, body = …), Unauthorized, NotAdmin)`). Never built: the
/// handlers answer an `ApiError`.
pub mod responses {
    use super::ErrorBody;

    /// 401 on every route behind a bearer token.
    #[derive(utoipa::IntoResponses)]
    #[response(status = 401, description = "No valid bearer token")]
    #[allow(dead_code)]
    pub struct Unauthorized(ErrorBody);

    /// 403 on a route for an org's admins.
    #[derive(utoipa::IntoResponses)]
    #[response(status = 403, description = "Not an admin of the org")]
    #[allow(dead_code)]
    pub struct NotAdmin(ErrorBody);

    /// 403 on a route for an org's members of a role.
    #[derive(utoipa::IntoResponses)]
    #[response(
        status = 403,
        description = "Another org's resource, or the role is too low"
    )]
    #[allow(dead_code)]
    pub struct OutOfScope(ErrorBody);
}

/// A 409 from a queue item action: the item's state now, so the client can refresh it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ConflictBody {
    /// `conflict`, `no_draft`, `stale_draft`, `precondition_failed` (412) or
    /// `idempotency_in_progress`.
    pub code: String,
    /// For humans.
    pub message: String,
    /// Absent for `idempotency_in_progress`; the whole item (as `GET /expert-queue/{id}`
    /// answers) for `no_draft`, `stale_draft` and `precondition_failed`.
    pub current: Option<CurrentState>,
}

/// A queue item's state as a conflict reports it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CurrentState {
    /// The state.
    pub status: switchboard_domain::QueueStatus,
    /// The version.
    pub version: i32,
    /// Who holds it.
    pub claimed_by: Option<uuid::Uuid>,
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;
