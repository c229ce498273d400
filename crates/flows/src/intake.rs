//! The accept path's writer: webhooks that arrive together are deduplicated together (one
//! pipelined Redis round trip of `SET NX`), committed to the inbox together (one `INSERT` and
//! one commit per batch) and enqueued with one bulk push.
//!
//! Each webhook request waits for its own result before answering, so nothing is
//! acknowledged that is not committed (SPEC §2) and nothing here must survive a restart: a
//! pod that dies with a batch in flight has answered none of its requests, and the
//! providers retry them. Batches form only under load; a lone webhook is written at once.

use std::sync::Arc;
use switchboard_coord::Redis;
use switchboard_coord::dedup::{self, Seen};
use switchboard_domain::faults::Faults;
use switchboard_domain::jobs::InboundJob;
use switchboard_domain::periodic;
use switchboard_jobs::queue::InboundQueue;
use switchboard_store::inbox::{self, NewEvent};
use switchboard_store::{PgPool, StoreError};
use tokio::sync::{Mutex, mpsc, oneshot};
use uuid::Uuid;

/// Most webhooks written by one statement.
pub const MAX_BATCH: usize = 256;
/// Writers running at once per pod: one batch can be in Postgres while the next forms.
pub const WRITERS: usize = 2;

/// Why an event could not be committed.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// The batch could not be committed (Postgres away or restarting, most likely);
    /// nothing was stored and a retry may succeed.
    #[error("could not commit the inbound event: {0}")]
    Store(#[source] Arc<StoreError>),
    /// Postgres refused this event's own data, even alone; the rest of its batch is stored.
    #[error("the inbound event was refused: {0}")]
    Refused(#[source] StoreError),
    /// The pod is stopping and no longer writes.
    #[error("the inbox writer has stopped")]
    Stopped,
}

impl IntakeError {
    /// Whether the failure is Postgres being away (unreachable, restarting, out of
    /// connections), as opposed to anything about the event.
    pub fn is_unavailable(&self) -> bool {
        match self {
            IntakeError::Store(e) => e.is_unavailable(),
            IntakeError::Refused(_) => false,
            IntakeError::Stopped => true,
        }
    }
}

struct Pending {
    event: NewEvent,
    dedup_scope: String,
    reply: oneshot::Sender<Result<Option<Uuid>, IntakeError>>,
}

/// Handle used by the webhook handler; cheap to clone.
#[derive(Clone)]
pub struct Intake {
    tx: mpsc::Sender<Pending>,
}

impl std::fmt::Debug for Intake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Intake")
    }
}

impl Intake {
    /// Starts the writers. They stop when every handle is dropped (after the HTTP server,
    /// whose in-flight requests they serve, has finished).
    /// `pod` is the id the journey's intake steps name.
    pub fn start(
        db: PgPool,
        redis: Redis,
        queue: InboundQueue,
        faults: Faults,
        pod: Arc<str>,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<Pending>(MAX_BATCH * 8);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WRITERS {
            let writer = Writer {
                db: db.clone(),
                redis: redis.clone(),
                queue: queue.clone(),
                faults: faults.clone(),
                pod: pod.clone(),
            };
            let rx = rx.clone();
            periodic::detach(async move {
                while let Some(batch) = next_batch(&rx).await {
                    writer.write(batch).await;
                }
            });
        }
        Self { tx }
    }

    /// Commits one event; `Ok(None)` when it is a duplicate (of `dedup:{dedup_scope}` in
    /// Redis, or of a stored event). Returns once the event is committed and (best effort)
    /// enqueued.
    pub async fn submit(
        &self,
        event: NewEvent,
        dedup_scope: String,
    ) -> Result<Option<Uuid>, IntakeError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Pending {
                event,
                dedup_scope,
                reply,
            })
            .await
            .map_err(|_| IntakeError::Stopped)?;
        answer.await.map_err(|_| IntakeError::Stopped)?
    }
}

/// Waits for one event, then takes whatever else is already queued, up to [`MAX_BATCH`].
async fn next_batch(rx: &Mutex<mpsc::Receiver<Pending>>) -> Option<Vec<Pending>> {
    let mut rx = rx.lock().await;
    let first = rx.recv().await?;
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(p) => batch.push(p),
            Err(_) => break,
        }
    }
    Some(batch)
}

struct Writer {
    db: PgPool,
    redis: Redis,
    queue: InboundQueue,
    faults: Faults,
    pod: Arc<str>,
}

impl Writer {
    async fn write(&self, batch: Vec<Pending>) {
        // 1. The fast filter: only a key promoted after a commit answers "duplicate" here.
        // A pending key (a commit in flight, or one that never happened) and Redis being
        // away both leave the answer to Postgres' unique index.
        let mut scopes = Vec::with_capacity(batch.len());
        let mut pending = Vec::with_capacity(batch.len());
        for p in batch {
            scopes.push(p.dedup_scope);
            pending.push((p.event, p.reply));
        }
        let seen: Vec<Option<Seen>> = match dedup::claim_many(&self.redis, &scopes).await {
            Ok(seen) => seen.into_iter().map(Some).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "dedup filter unavailable; relying on Postgres");
                vec![None; scopes.len()]
            }
        };
        let mut events = Vec::with_capacity(pending.len());
        let mut replies = Vec::with_capacity(pending.len());
        let mut event_scopes = Vec::with_capacity(pending.len());
        let mut claimed = Vec::with_capacity(pending.len());
        for (((event, reply), scope), seen) in pending.into_iter().zip(scopes).zip(seen) {
            if seen == Some(Seen::Done) {
                let _ = reply.send(Ok(None));
                continue;
            }
            claimed.push(seen == Some(Seen::New));
            events.push(event);
            replies.push(reply);
            event_scopes.push(scope);
        }
        if events.is_empty() {
            return;
        }
        if self.faults.intake_crashes_after_claim() {
            tracing::warn!(
                count = events.len(),
                "fault injected: the batch stops before its commit"
            );
            return;
        }

        // 2. One statement, one commit; a row Postgres refuses fails alone.
        metrics::histogram!("inbox_batch_size").record(events.len() as f64);
        match inbox::insert_isolating(&self.db, &events, &self.pod).await {
            Ok(outcomes) => {
                self.committed(&events, replies, event_scopes, claimed, outcomes)
                    .await
            }
            Err(e) => {
                tracing::error!(error = %e, count = events.len(), "inbox batch insert failed");
                // Not committed: forget the claims so the providers' retries skip the trip to
                // Postgres (if this fails too, the retries ask Postgres, which has nothing).
                let ours: Vec<String> = event_scopes
                    .into_iter()
                    .zip(claimed)
                    .filter_map(|(scope, ours)| ours.then_some(scope))
                    .collect();
                if let Err(release) = dedup::release_many(&self.redis, &ours).await {
                    tracing::warn!(error = %release, "could not release dedup claims");
                }
                let e = Arc::new(e);
                for reply in replies {
                    let _ = reply.send(Err(IntakeError::Store(e.clone())));
                }
            }
        }
    }

    /// After the commit: enqueue, answer, then promote the keys of what Postgres now holds.
    async fn committed(
        &self,
        events: &[NewEvent],
        replies: Vec<oneshot::Sender<Result<Option<Uuid>, IntakeError>>>,
        scopes: Vec<String>,
        claimed: Vec<bool>,
        outcomes: Vec<inbox::RowOutcome>,
    ) {
        // 3. Enqueue after the commit; the sweeper covers a failed push. Each job carries
        // its webhook's trace, for whichever pod runs it.
        let jobs: Vec<InboundJob> = outcomes
            .iter()
            .zip(events)
            .filter_map(|(outcome, e)| {
                let event_id = outcome.as_ref().ok().copied().flatten();
                event_id
                    .filter(|_| !e.processed)
                    .map(|event_id| InboundJob {
                        event_id,
                        traceparent: e.traceparent,
                    })
            })
            .collect();
        if !jobs.is_empty() {
            let count = jobs.len();
            if let Err(e) = self.queue.push_many(jobs).await {
                tracing::warn!(count, error = %e, "enqueue failed; the inbox sweeper will pick these up");
            }
        }
        let mut stored = Vec::with_capacity(scopes.len());
        let mut refused = Vec::new();
        for (((reply, outcome), scope), ours) in
            replies.into_iter().zip(outcomes).zip(scopes).zip(claimed)
        {
            match outcome {
                Ok(id) => {
                    stored.push(scope);
                    let _ = reply.send(Ok(id));
                }
                Err(e) => {
                    tracing::error!(error = %e, "inbox refused one event of a batch");
                    if ours {
                        refused.push(scope);
                    }
                    let _ = reply.send(Err(IntakeError::Refused(e)));
                }
            }
        }
        if let Err(e) = dedup::confirm_many(&self.redis, &stored).await {
            tracing::debug!(error = %e, "could not mark dedup keys done; retries will ask Postgres");
        }
        if let Err(e) = dedup::release_many(&self.redis, &refused).await {
            tracing::debug!(error = %e, "could not release refused events' dedup claims");
        }
    }
}
