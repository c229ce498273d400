//! The accept path's writer: webhooks that arrive together are deduplicated together (one
//! pipelined Redis round trip of `SET NX`), committed to the inbox together (one `INSERT` and
//! one commit per batch) and enqueued with one bulk push.
//!
//! Each webhook request waits for its own result before answering, so nothing is
//! acknowledged that is not committed (SPEC §2) and nothing here must survive a restart: a
//! pod that dies with a batch in flight has answered none of its requests, and the
//! providers retry them. Batches form only under load; a lone webhook is written at once.

use crate::queue::InboundQueue;
use std::sync::Arc;
use switchboard_coord::{Redis, dedup};
use switchboard_store::PgPool;
use switchboard_store::inbox::{self, NewEvent};
use tokio::sync::{Mutex, mpsc, oneshot};
use uuid::Uuid;

/// Most webhooks written by one statement.
pub const MAX_BATCH: usize = 256;
/// Writers running at once per pod: one batch can be in Postgres while the next forms.
pub const WRITERS: usize = 2;

/// Why an event could not be committed.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// The inbox insert failed; nothing was stored.
    #[error("could not commit the inbound event: {0}")]
    Store(String),
    /// The pod is stopping and no longer writes.
    #[error("the inbox writer has stopped")]
    Stopped,
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
    pub fn start(db: PgPool, redis: Redis, queue: InboundQueue) -> Self {
        let (tx, rx) = mpsc::channel::<Pending>(MAX_BATCH * 8);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WRITERS {
            let (db, redis, queue, rx) = (db.clone(), redis.clone(), queue.clone(), rx.clone());
            tokio::spawn(async move {
                while let Some(batch) = next_batch(&rx).await {
                    write(&db, &redis, &queue, batch).await;
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

async fn write(db: &PgPool, redis: &Redis, queue: &InboundQueue, batch: Vec<Pending>) {
    // 1. The fast filter. Without Redis every event goes on to Postgres, which is the truth
    // (and there is no claim to undo if the commit fails).
    let mut scopes = Vec::with_capacity(batch.len());
    let mut pending = Vec::with_capacity(batch.len());
    for p in batch {
        scopes.push(p.dedup_scope);
        pending.push((p.event, p.reply));
    }
    // Per event: Some(new?) as Redis answered, or None when it could not be asked.
    let fresh: Vec<Option<bool>> = match dedup::claim_many(redis, &scopes).await {
        Ok(fresh) => fresh.into_iter().map(Some).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "dedup filter unavailable; relying on Postgres");
            vec![None; scopes.len()]
        }
    };
    let mut claimed_scopes = Vec::new();
    let mut events = Vec::with_capacity(pending.len());
    let mut replies = Vec::with_capacity(pending.len());
    for (((event, reply), scope), fresh) in pending.into_iter().zip(scopes).zip(fresh) {
        match fresh {
            Some(false) => {
                let _ = reply.send(Ok(None));
                continue;
            }
            Some(true) => claimed_scopes.push(scope),
            None => {}
        }
        events.push(event);
        replies.push(reply);
    }
    if events.is_empty() {
        return;
    }

    // 2. One statement, one commit.
    metrics::histogram!("inbox_batch_size").record(events.len() as f64);
    match inbox::insert_batch(db, &events).await {
        Ok(ids) => {
            // 3. Enqueue after the commit; the sweeper covers a failed push.
            let jobs: Vec<Uuid> = ids
                .iter()
                .zip(&events)
                .filter_map(|(id, e)| id.filter(|_| !e.processed))
                .collect();
            if !jobs.is_empty() {
                if let Err(e) = queue.push_events(&jobs).await {
                    tracing::warn!(count = jobs.len(), error = %e, "enqueue failed; the inbox sweeper will pick these up");
                }
            }
            for (reply, id) in replies.into_iter().zip(ids) {
                let _ = reply.send(Ok(id));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, count = events.len(), "inbox batch insert failed");
            // Not committed: forget the claims so the providers' retries are not duplicates.
            if let Err(release) = dedup::release_many(redis, &claimed_scopes).await {
                tracing::warn!(error = %release, "could not release dedup claims");
            }
            let message = e.to_string();
            for reply in replies {
                let _ = reply.send(Err(IntakeError::Store(message.clone())));
            }
        }
    }
}
