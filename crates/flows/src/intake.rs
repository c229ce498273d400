//! The accept path's writer: webhooks that arrive together are committed to the inbox
//! together (one `INSERT` and one commit per batch) and enqueued with one bulk push.
//!
//! Each webhook request waits for its own result before answering, so nothing is
//! acknowledged that is not committed (SPEC §2) and nothing here must survive a restart: a
//! pod that dies with a batch in flight has answered none of its requests, and the
//! providers retry them. Batches form only under load; a lone webhook is written at once.

use crate::queue::InboundQueue;
use std::sync::Arc;
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
    pub fn start(db: PgPool, queue: InboundQueue) -> Self {
        let (tx, rx) = mpsc::channel::<Pending>(MAX_BATCH * 8);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WRITERS {
            let (db, queue, rx) = (db.clone(), queue.clone(), rx.clone());
            tokio::spawn(async move {
                while let Some(batch) = next_batch(&rx).await {
                    write(&db, &queue, batch).await;
                }
            });
        }
        Self { tx }
    }

    /// Commits one event; `Ok(None)` when it is a duplicate. Returns once the event is
    /// committed and (best effort) enqueued.
    pub async fn submit(&self, event: NewEvent) -> Result<Option<Uuid>, IntakeError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Pending { event, reply })
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

async fn write(db: &PgPool, queue: &InboundQueue, batch: Vec<Pending>) {
    let events: Vec<NewEvent> = batch.iter().map(|p| p.event.clone()).collect();
    metrics::histogram!("inbox_batch_size").record(events.len() as f64);
    match inbox::insert_batch(db, &events).await {
        Ok(ids) => {
            let jobs: Vec<Uuid> = ids
                .iter()
                .zip(&events)
                .filter_map(|(id, e)| id.filter(|_| !e.processed))
                .collect();
            if !jobs.is_empty() {
                if let Err(e) = queue.push_many(&jobs).await {
                    tracing::warn!(count = jobs.len(), error = %e, "enqueue failed; the inbox sweeper will pick these up");
                }
            }
            for (pending, id) in batch.into_iter().zip(ids) {
                let _ = pending.reply.send(Ok(id));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, count = events.len(), "inbox batch insert failed");
            let message = e.to_string();
            for pending in batch {
                let _ = pending.reply.send(Err(IntakeError::Store(message.clone())));
            }
        }
    }
}
