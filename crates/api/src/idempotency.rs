//! `Idempotency-Key` on the console's POSTs (AA3): a double click, a retried request or a
//! client that lost the answer never does the work twice, on any pod. This module reads the
//! header and turns what the key says into responses; claiming it and storing the answer
//! are `switchboard_flows::idempotency`'s, which a flow that takes a key
//! (`switchboard_flows::expert::perform`, `switchboard_flows::notes::add`) uses in its own
//! transaction.
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
use switchboard_flows::idempotency::{self, Answer, Claim, Guard, Key, KeyError, Refusal};
use switchboard_store::PgPool;
use uuid::Uuid;

pub use switchboard_flows::idempotency::CompleteError;

/// The header clients send.
pub const HEADER: &str = "idempotency-key";

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
    /// The key as a flow claims it, for `user_id` in `org_id`; `None` without the header.
    pub fn key(&self, org_id: Uuid, user_id: Uuid) -> Option<Key> {
        self.key.as_ref().map(|key| Key {
            org_id,
            user_id,
            key: key.clone(),
            hash: self.hash.clone(),
        })
    }

    /// Claims the key for `user_id` in `org_id`, or says what to answer instead.
    pub async fn begin(&self, db: &PgPool, org_id: Uuid, user_id: Uuid) -> Result<Begin, ApiError> {
        let key = self.key(org_id, user_id);
        Ok(match idempotency::claim(db, key.as_ref()).await {
            Ok(Claim::Run(guard)) => Begin::Run(guard.map(KeyGuard)),
            Ok(Claim::Replay(answer)) => Begin::Answer(replayed(answer)),
            Err(KeyError::Store(e)) => return Err(e.into()),
            Err(refused) => Begin::Answer(ApiError::from(refused).into_response()),
        })
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

/// The key's first answer again, marked `Idempotent-Replayed: true`.
pub fn replayed(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut response = (status, axum::Json(answer.body)).into_response();
    response
        .headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

impl From<KeyError> for ApiError {
    fn from(error: KeyError) -> Self {
        match error {
            KeyError::InProgress => in_progress(),
            KeyError::Mismatch => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_mismatch",
                "this Idempotency-Key was used for a different request",
            ),
            KeyError::Store(e) => e.into(),
        }
    }
}

impl From<CompleteError> for ApiError {
    fn from(error: CompleteError) -> Self {
        KeyError::from(error).into()
    }
}

/// A refusal (4xx other than 429) is the request's answer and is stored for retries;
/// anything else gives the key back.
impl Refusal for ApiError {
    fn refusal(&self) -> Option<Answer> {
        let status = self.status();
        (status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS).then(|| Answer {
            status: status.as_u16(),
            body: self.body(),
        })
    }
}

/// A claimed key, to be completed with the request's answer.
#[derive(Debug)]
pub struct KeyGuard(Guard);

impl KeyGuard {
    /// Stores the answer with the request's effect ([`Guard::complete_in`]); a claim a retry
    /// took over answers `idempotency_in_progress`, and the caller's `?` drops its
    /// transaction, so only the retry's effect counts.
    pub async fn complete_in(
        &self,
        tx: &mut sqlx::PgConnection,
        status: StatusCode,
        body: &Value,
    ) -> Result<(), CompleteError> {
        self.0.complete_in(tx, status.as_u16(), body).await
    }

    /// Settles the key after the request failed: a refusal (4xx other than 429) is the
    /// request's answer and is stored for retries; anything else gives the key back. Either
    /// only while this request's claim still holds the key.
    pub async fn fail(self, db: &PgPool, error: &ApiError) {
        self.0.fail(db, error.refusal()).await;
    }
}
