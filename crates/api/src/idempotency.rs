//! `Idempotency-Key` on the console's POSTs (AA3): a double click, a retried request or a
//! client that lost the answer never does the work twice, on any pod.
//!
//! The key is scoped per (org, user, key) and stored in Postgres with a hash of the method,
//! path and body. The first request claims the key (committed before it runs, with a lease
//! so a pod that dies mid-request does not block the key for ever) and stores its response
//! in the same transaction as its effect, so "done" and "answered" cannot disagree. A
//! retry then gets that response back (`Idempotent-Replayed: true`); the same key with
//! another request gets 422 `idempotency_mismatch`; a retry while the first still runs gets
//! 409 `idempotency_in_progress`. A refusal (4xx but 429) is an answer too and is stored;
//! a request that fails on the server's side gives the key back. Keys go after
//! `IDEMPOTENCY_TTL_HOURS` (at least 24).
//!
//! A request slower than its claim's lease can find the key taken over by a retry. Its
//! answer and its giving back name its own claim (a token written at claim time), so they
//! change nothing then: the request rolls its effect back and answers
//! `idempotency_in_progress`, and the retry's answer is the key's.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;
use switchboard_store::idempotency::{self, Existing, KeyRef};
use switchboard_store::{PgPool, StoreError};
use uuid::Uuid;

/// The header clients send.
pub const HEADER: &str = "idempotency-key";
/// How long a claimed key is held for a request still running.
const LEASE: Duration = Duration::from_secs(60);

/// A JSON request body (an empty body reads as `{}`) with its `Idempotency-Key`.
#[derive(Debug)]
pub struct Idempotent<T> {
    /// The parsed body.
    pub body: T,
    key: Option<String>,
    hash: String,
}

impl<S, T> FromRequest<S> for Idempotent<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let key = match req.headers().get(HEADER) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .map(str::trim)
                    .filter(|k| !k.is_empty() && k.len() <= 255)
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "invalid_idempotency_key",
                            "Idempotency-Key must be 1 to 255 visible ASCII characters",
                        )
                    })?
                    .to_owned(),
            ),
        };
        let mut hash = Sha256::new();
        hash.update(req.method().as_str().as_bytes());
        hash.update(b"\n");
        hash.update(req.uri().path().as_bytes());
        hash.update(b"\n");
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large()
            } else {
                ApiError::bad_request("invalid_body", r.body_text())
            }
        })?;
        hash.update(&bytes);
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        let body = serde_json::from_slice(text)
            .map_err(|e| ApiError::bad_request("invalid_json", e.to_string()))?;
        Ok(Idempotent {
            body,
            key,
            hash: hex::encode(hash.finalize()),
        })
    }
}

/// What [`Idempotent::begin`] decided.
pub enum Begin {
    /// Run the request; store its answer through the guard (if a key was sent).
    Run(Option<KeyGuard>),
    /// Answer this instead: the stored response, or why the key cannot be used now.
    Answer(Response),
}

impl<T> Idempotent<T> {
    /// Claims the key for `user_id` in `org_id`, or says what to answer instead.
    pub async fn begin(&self, db: &PgPool, org_id: Uuid, user_id: Uuid) -> Result<Begin, ApiError> {
        let Some(key) = &self.key else {
            return Ok(Begin::Run(None));
        };
        let scope = KeyRef {
            org_id,
            user_id,
            key,
        };
        Ok(
            match idempotency::claim(db, scope, &self.hash, LEASE).await? {
                Existing::Claimed { token } => Begin::Run(Some(KeyGuard {
                    org_id,
                    user_id,
                    key: key.clone(),
                    token,
                })),
                Existing::InProgress => Begin::Answer(in_progress().into_response()),
                Existing::Mismatch => Begin::Answer(
                    ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "idempotency_mismatch",
                        "this Idempotency-Key was used for a different request",
                    )
                    .into_response(),
                ),
                Existing::Done { status, body } => Begin::Answer(replay(status, body)),
            },
        )
    }
}

/// Another request holds the key right now.
fn in_progress() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "idempotency_in_progress",
        "a request with this Idempotency-Key is still running; retry shortly",
    )
}

fn replay(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

/// Why [`KeyGuard::complete_in`] stored no answer.
#[derive(Debug, thiserror::Error)]
pub enum CompleteError {
    /// Postgres failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The claim outlived its lease and a retry took the key over: the retry's answer will
    /// be the key's.
    #[error("the Idempotency-Key claim was taken over by a retry")]
    TakenOver,
}

impl From<CompleteError> for ApiError {
    fn from(error: CompleteError) -> Self {
        match error {
            CompleteError::Store(e) => e.into(),
            CompleteError::TakenOver => in_progress(),
        }
    }
}

/// A claimed key, to be completed with the request's answer.
#[derive(Debug)]
pub struct KeyGuard {
    org_id: Uuid,
    user_id: Uuid,
    key: String,
    /// Names this request's claim in every write after it.
    token: Uuid,
}

impl KeyGuard {
    fn key_ref(&self) -> KeyRef<'_> {
        KeyRef {
            org_id: self.org_id,
            user_id: self.user_id,
            key: &self.key,
        }
    }

    /// Stores the answer in the transaction that carries the request's effect. When the
    /// claim was taken over meanwhile (it outlived its lease and a retry claimed the key),
    /// nothing is stored and the error answers `idempotency_in_progress`: the caller's `?`
    /// drops its transaction, so the effect is rolled back and only the retry's counts.
    pub async fn complete_in(
        &self,
        tx: &mut sqlx::PgConnection,
        status: StatusCode,
        body: &Value,
    ) -> Result<(), CompleteError> {
        let stored =
            idempotency::complete(&mut *tx, self.key_ref(), self.token, status.as_u16(), body)
                .await?;
        if !stored {
            tracing::warn!(
                "an Idempotency-Key claim was taken over before its request finished; its effect is rolled back"
            );
            return Err(CompleteError::TakenOver);
        }
        Ok(())
    }

    /// Settles the key after the request failed: a refusal (4xx other than 429) is the
    /// request's answer and is stored for retries; anything else gives the key back. Either
    /// only while this request's claim still holds the key.
    pub async fn fail(self, db: &PgPool, error: &ApiError) {
        let status = error.status();
        let result = if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
            let body = error.body();
            idempotency::complete(db, self.key_ref(), self.token, status.as_u16(), &body).await
        } else {
            idempotency::release(db, self.key_ref(), self.token).await
        };
        match result {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(
                    "an Idempotency-Key was already answered or taken over; left as it is"
                )
            }
            Err(e) => tracing::warn!(error = %e, "could not settle an Idempotency-Key"),
        }
    }
}
