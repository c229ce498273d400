//! The job's statements, shared between the pod's concurrent jobs: a backlog drains with
//! one claim and one draft statement for many events (see `switchboard_jobs::coalesce`). Each event
//! keeps its own outcome: a batch that fails (a deadlock between two pods' batches, one
//! event's bad data) is run again one event at a time, so one event's failure is its own.
//!
//! A job still takes its turn (`switchboard_jobs::pressure`) before handing in a statement, so while
//! the pod is busy answering webhooks one job at a time reaches Postgres and its batches
//! are of one. Taking the turn per batch instead drained a sustained 2 000 webhooks/s
//! faster (111 s against 152 s) but let each turn carry dozens of events, and the webhooks'
//! p99 went from 122 ms to 3.5 s.

use super::JobError;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use switchboard_jobs::coalesce::{Coalescer, Stopped};
use switchboard_store::drafts::{self, DraftRow};
use switchboard_store::inbox::{self, InboundEvent};
use switchboard_store::messages::{self, MessageRow, StoredMessage};
use switchboard_store::{PgPool, StoreError};
use uuid::Uuid;

/// Most events one batched statement carries: the pod's jobs run at most
/// `WORKER_CONCURRENCY` at once, so this is reached only with a larger setting.
pub const MAX_BATCH: usize = 64;

/// The pod's batched inbound statements; cheap to clone.
#[derive(Clone, Debug)]
pub struct Batches {
    claims: Coalescer<Uuid, Result<Option<InboundEvent>, JobError>>,
    messages: Coalescer<MessageRow, Result<StoredMessage, JobError>>,
    drafts: Coalescer<DraftRow, Result<Option<bool>, JobError>>,
}

impl Batches {
    /// Starts the batch tasks on the current runtime; `pod` is the id the journey's steps
    /// written by the claims and drafts name.
    pub fn start(db: PgPool, lease: Duration, pod: Arc<str>) -> Self {
        let (claim_db, message_db) = (db.clone(), db.clone());
        let claim_pod = pod.clone();
        Self {
            claims: Coalescer::spawn(
                MAX_BATCH,
                |id: &Uuid| *id,
                move |ids| claim(claim_db.clone(), ids, lease, claim_pod.clone()),
            ),
            messages: Coalescer::spawn(
                MAX_BATCH,
                |row: &MessageRow| {
                    let customer = &row.message.customer_external_id;
                    (row.org_id, row.channel, customer.clone())
                },
                move |rows| store_messages(message_db.clone(), rows),
            ),
            drafts: Coalescer::spawn(
                MAX_BATCH,
                |row: &DraftRow| row.conversation_id,
                move |rows| store_drafts(db.clone(), rows, pod.clone()),
            ),
        }
    }

    /// Takes the event for the lease (see [`inbox::claim_many`]).
    pub async fn claim(&self, event_id: Uuid) -> Result<Option<InboundEvent>, JobError> {
        self.claims.call(event_id).await?
    }

    /// Stores the customer message with its customer, conversation, history, reopened item
    /// and events (see `switchboard_store::messages::store_batch`).
    pub async fn store_message(&self, row: MessageRow) -> Result<StoredMessage, JobError> {
        self.messages.call(row).await?
    }

    /// Stores the draft with its queue item and completes its event. `Some(on hold)` when
    /// it was stored now; `None` when another run stored this message's draft first, and
    /// the event is only marked processed.
    pub async fn store_draft(&self, row: DraftRow) -> Result<Option<bool>, JobError> {
        self.drafts.call(row).await?
    }
}

impl From<Stopped> for JobError {
    fn from(_: Stopped) -> Self {
        JobError::Stopped
    }
}

async fn claim(
    db: PgPool,
    ids: Vec<Uuid>,
    lease: Duration,
    pod: Arc<str>,
) -> Vec<Result<Option<InboundEvent>, JobError>> {
    each_on_failure(&ids, |ids| {
        let (db, pod) = (db.clone(), pod.clone());
        Box::pin(async move {
            let mut taken = inbox::claim_many(&db, ids, lease, &pod).await?;
            Ok(ids
                .iter()
                .map(|id| {
                    let at = taken.iter().position(|e| e.id == *id)?;
                    Some(taken.swap_remove(at))
                })
                .collect())
        })
    })
    .await
}

async fn store_messages(db: PgPool, rows: Vec<MessageRow>) -> Vec<Result<StoredMessage, JobError>> {
    each_on_failure(&rows, |rows| {
        let db = db.clone();
        Box::pin(async move {
            Ok(
                messages::store_batch(&db, rows, super::HISTORY_LEN, super::RECENT_LEN as i64)
                    .await?,
            )
        })
    })
    .await
}

async fn store_drafts(
    db: PgPool,
    rows: Vec<DraftRow>,
    pod: Arc<str>,
) -> Vec<Result<Option<bool>, JobError>> {
    each_on_failure(&rows, |rows| {
        let (db, pod) = (db.clone(), pod.clone());
        Box::pin(async move {
            let stored = drafts::store_batch(&db, rows, super::HISTORY_LEN, &pod).await?;
            Ok(rows
                .iter()
                .map(|r| {
                    stored
                        .iter()
                        .find(|(id, _)| *id == r.event_id)
                        .map(|(_, held)| *held)
                })
                .collect())
        })
    })
    .await
}

/// Runs `run` on the whole batch and, if that fails on something about its events (one
/// event's data, a deadlock with another pod's batch), on each event alone, so that every
/// event gets its own outcome. When Postgres itself is away, every event gets that error at
/// once rather than one more failing round trip each. `run` returns one answer per item, in
/// order.
async fn each_on_failure<T, A>(
    items: &[T],
    run: impl for<'a> Fn(&'a [T]) -> BoxFuture<'a, Result<Vec<A>, JobError>>,
) -> Vec<Result<A, JobError>> {
    if items.len() > 1 {
        match run(items).await {
            Ok(answers) if answers.len() == items.len() => {
                return answers.into_iter().map(Ok).collect();
            }
            Ok(answers) => {
                metrics::counter!("coalesced_batch_failures_total").increment(1);
                tracing::warn!(
                    answers = answers.len(),
                    size = items.len(),
                    "batch gave the wrong number of answers; running its events one by one"
                );
            }
            Err(JobError::Store(e)) if e.is_unavailable() && !e.is_transaction_retry() => {
                let e = Arc::new(e);
                return items
                    .iter()
                    .map(|_| Err(JobError::Batch(e.clone())))
                    .collect();
            }
            Err(e) => {
                metrics::counter!("coalesced_batch_failures_total").increment(1);
                tracing::debug!(error = %e, size = items.len(), "batch failed; running its events one by one");
            }
        }
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(run(std::slice::from_ref(item)).await.and_then(|one| {
            one.into_iter().next().ok_or_else(|| {
                StoreError::Unexpected("a batch of one gave no answer".into()).into()
            })
        }));
    }
    out
}
