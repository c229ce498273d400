//! A JSON extractor whose rejections use the API's error shape: 413 for bodies over the
//! limit, 400 `invalid_json` for anything that is not the expected JSON.

use crate::error::ApiError;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// `axum::Json` with [`ApiError`] rejections; also a response type.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Json(value)),
            Err(rejection) => Err(reject(rejection)),
        }
    }
}

fn reject(rejection: JsonRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::payload_too_large();
    }
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::bad_request(
            "invalid_json",
            "expected a request body with Content-Type: application/json",
        ),
        other => ApiError::bad_request("invalid_json", other.body_text()),
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `axum::extract::Path` with a 400 `invalid_path` rejection in the API's error shape.
#[derive(Debug, Clone, Copy)]
pub struct Path<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| Path(v))
            .map_err(|r| ApiError::bad_request("invalid_path", r.body_text()))
    }
}

/// `axum::extract::Query` in the API's error shape: a query whose values do not parse
/// (a status or kind that is not one of its spellings, a malformed id or number) is 422
/// `validation`, with serde's message naming the parameter and what it accepts.
#[derive(Debug, Clone, Copy)]
pub struct Query<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| Query(v))
            .map_err(|r| ApiError::validation(r.body_text()))
    }
}

/// For `#[serde(default, deserialize_with = "crate::extract::empty_as_none")]` on an
/// optional query filter: `?status=` is no filter, anything else must deserialize as `T`
/// (one of an enum's spellings).
pub(crate) fn empty_as_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    use serde::de::IntoDeserializer;
    match Option::<String>::deserialize(deserializer)?.as_deref() {
        None | Some("") => Ok(None),
        Some(raw) => T::deserialize(raw.into_deserializer()).map(Some),
    }
}

/// The request's `x-request-id` (set by the router's middleware before any handler runs),
/// for audit rows.
#[derive(Debug, Clone, Default)]
pub struct RequestId(pub Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for RequestId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(RequestId(
            parts
                .headers
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        ))
    }
}

/// `If-Match: "<version>"` (or `W/"<version>"`; `*` or no header: any version), for
/// optimistic concurrency on a queue item: the action applies only to the version the
/// client saw. Anything else is 400 `invalid_if_match`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IfMatch(pub Option<i32>);

impl IfMatch {
    /// Parses one header value.
    pub fn parse(value: &str) -> Result<IfMatch, ApiError> {
        let value = value.trim();
        if value == "*" {
            return Ok(IfMatch(None));
        }
        let tag = value.strip_prefix("W/").unwrap_or(value);
        tag.strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .and_then(|v| v.parse::<i32>().ok())
            .map(|v| IfMatch(Some(v)))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_if_match",
                    "If-Match must be one entity tag as an ETag gave it, e.g. \"3\"",
                )
            })
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let mut values = parts.headers.get_all(axum::http::header::IF_MATCH).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return match parts.headers.contains_key(axum::http::header::IF_MATCH) {
                true => Err(ApiError::bad_request(
                    "invalid_if_match",
                    "send one If-Match header",
                )),
                false => Ok(IfMatch(None)),
            };
        };
        let text = value.to_str().map_err(|_| {
            ApiError::bad_request("invalid_if_match", "If-Match is not visible ASCII")
        })?;
        IfMatch::parse(text)
    }
}

/// The `ETag` of a queue item at `version`.
pub fn etag(version: i32) -> axum::http::HeaderValue {
    axum::http::HeaderValue::from_str(&format!("\"{version}\""))
        .unwrap_or_else(|_| axum::http::HeaderValue::from_static("\"0\""))
}

#[cfg(test)]
mod tests {
    use super::IfMatch;

    #[test]
    fn if_match_takes_one_quoted_version() {
        assert_eq!(IfMatch::parse("\"7\"").ok().and_then(|m| m.0), Some(7));
        assert_eq!(IfMatch::parse("W/\"7\"").ok().and_then(|m| m.0), Some(7));
        assert_eq!(IfMatch::parse("*").ok().map(|m| m.0), Some(None));
        for bad in ["7", "\"x\"", "\"1\", \"2\"", ""] {
            assert!(IfMatch::parse(bad).is_err(), "{bad}");
        }
    }
}
