//! A request's `Idempotency-Key` (AA3) as the flows that take one use it: claimed before the
//! flow runs, answered in the flow's own transaction (so "done" and "answered" cannot
//! disagree), and settled after a failure. The HTTP side (the header, the request's hash,
//! replaying an answer) is `switchboard_api::idempotency`; the rows are
//! `switchboard_store::idempotency`.

use serde_json::Value;
use std::time::Duration;
use switchboard_store::idempotency::{self, Existing, KeyRef};
use switchboard_store::{PgPool, StoreError};
use uuid::Uuid;

/// How long a claimed key is held for a request still running.
const LEASE: Duration = Duration::from_secs(60);

/// A request's key, scoped to who sent it, with the hash of the request it came with.
#[derive(Debug, Clone)]
pub struct Key {
    /// The org the request acts in.
    pub org_id: Uuid,
    /// Who sent it.
    pub user_id: Uuid,
    /// The header's value.
    pub key: String,
    /// The method, path and body, hashed: the same key with another request is refused.
    pub hash: String,
}

/// An answer as a key stores it: the first request's, which every retry gets again.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: Value,
}

/// What a keyed flow came to.
#[derive(Debug)]
pub enum Keyed<T> {
    /// It ran; its answer was stored under the key with its effect.
    Ran(T),
    /// A retry of a request the key answered already.
    Replayed(Answer),
}

/// Why a key cannot be used now.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Another request with this key is running, or took the key over while this one ran.
    #[error("a request with this Idempotency-Key is still running")]
    InProgress,
    /// The key was used for a different request.
    #[error("this Idempotency-Key was used for a different request")]
    Mismatch,
    /// Postgres failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why [`Guard::complete_in`] stored no answer.
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

impl From<CompleteError> for KeyError {
    fn from(error: CompleteError) -> Self {
        match error {
            CompleteError::Store(e) => KeyError::Store(e),
            CompleteError::TakenOver => KeyError::InProgress,
        }
    }
}

/// An error as the caller answers it. A refusal is the request's answer too, stored so that
/// a retry gets it again; a failure a retry may fix gives the key back.
pub trait Refusal {
    /// The answer to store under the key, or `None` to give the key back.
    fn refusal(&self) -> Option<Answer>;
}

/// What [`claim`] decided.
#[derive(Debug)]
pub enum Claim {
    /// Run the request; store its answer through the guard (if a key was sent).
    Run(Option<Guard>),
    /// Answer this instead: the key's first request's answer.
    Replay(Answer),
}

/// Claims `key` for its request (nothing to claim without one), or says what the key
/// answered already.
pub async fn claim(db: &PgPool, key: Option<&Key>) -> Result<Claim, KeyError> {
    let Some(key) = key else {
        return Ok(Claim::Run(None));
    };
    let scope = KeyRef {
        org_id: key.org_id,
        user_id: key.user_id,
        key: &key.key,
    };
    match idempotency::claim(db, scope, &key.hash, LEASE).await? {
        Existing::Claimed { token } => Ok(Claim::Run(Some(Guard {
            org_id: key.org_id,
            user_id: key.user_id,
            key: key.key.clone(),
            token,
        }))),
        Existing::InProgress => Err(KeyError::InProgress),
        Existing::Mismatch => Err(KeyError::Mismatch),
        Existing::Done { status, body } => Ok(Claim::Replay(Answer { status, body })),
    }
}

/// Runs `work` under `key`: claims it, hands `work` the guard to store its answer with (in
/// its transaction), and settles the key after an error (a refusal is stored, anything else
/// gives the key back). A retry of a key answered already gets that answer and runs nothing.
pub async fn keyed<T, E>(
    db: &PgPool,
    key: Option<&Key>,
    work: impl AsyncFnOnce(Option<&Guard>) -> Result<T, E>,
) -> Result<Keyed<T>, E>
where
    E: From<KeyError> + Refusal,
{
    let guard = match claim(db, key).await? {
        Claim::Run(guard) => guard,
        Claim::Replay(first) => return Ok(Keyed::Replayed(first)),
    };
    let outcome = work(guard.as_ref()).await;
    if let (Some(guard), Err(error)) = (guard, &outcome) {
        guard.fail(db, error.refusal()).await;
    }
    outcome.map(Keyed::Ran)
}

/// A claimed key, to be completed with the request's answer.
#[derive(Debug)]
pub struct Guard {
    org_id: Uuid,
    user_id: Uuid,
    key: String,
    /// Names this request's claim in every write after it.
    token: Uuid,
}

impl Guard {
    fn key_ref(&self) -> KeyRef<'_> {
        KeyRef {
            org_id: self.org_id,
            user_id: self.user_id,
            key: &self.key,
        }
    }

    /// Stores the answer in the transaction that carries the request's effect. When the
    /// claim was taken over meanwhile (it outlived its lease and a retry claimed the key),
    /// nothing is stored and the error says so: the caller drops its transaction, so the
    /// effect is rolled back and only the retry's counts.
    pub async fn complete_in(
        &self,
        tx: &mut sqlx::PgConnection,
        status: u16,
        body: &Value,
    ) -> Result<(), CompleteError> {
        let stored =
            idempotency::complete(&mut *tx, self.key_ref(), self.token, status, body).await?;
        if !stored {
            tracing::warn!(
                "an Idempotency-Key claim was taken over before its request finished; its effect is rolled back"
            );
            return Err(CompleteError::TakenOver);
        }
        Ok(())
    }

    /// Settles the key after the request failed: stores `refusal` as its answer, or without
    /// one gives the key back. Either only while this request's claim still holds the key.
    pub async fn fail(self, db: &PgPool, refusal: Option<Answer>) {
        let result = match refusal {
            Some(Answer { status, body }) => {
                idempotency::complete(db, self.key_ref(), self.token, status, &body).await
            }
            None => idempotency::release(db, self.key_ref(), self.token).await,
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
