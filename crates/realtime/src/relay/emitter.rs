//! The pod's [`Emitter`]: a commit wakes the relay, and events emitted outside any business
//! transaction are stored in call order by one writer task (retried while Postgres fails
//! over, counted when dropped).

use super::Relay;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use switchboard_domain::backoff::Backoff;
use switchboard_domain::{Emitter, Event};
use switchboard_store::{PgPool, event_outbox};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// Events waiting for the emit writer.
const EMIT_DEPTH: usize = 4096;

/// An event emitted outside any business transaction.
#[derive(Debug)]
struct Pending {
    org_id: Uuid,
    event: Event,
}

/// The pod's [`Emitter`]: wakes the relay, and stores out-of-transaction emits in call
/// order through one writer task.
pub(crate) struct RealtimeEmitter {
    relay: Arc<Relay>,
    tx: mpsc::Sender<Pending>,
    rx: Mutex<Option<mpsc::Receiver<Pending>>>,
    tracker: TaskTracker,
}

impl RealtimeEmitter {
    pub(crate) fn new(relay: Arc<Relay>, tracker: TaskTracker) -> Self {
        let (tx, rx) = mpsc::channel(EMIT_DEPTH);
        Self {
            relay,
            tx,
            rx: Mutex::new(Some(rx)),
            tracker,
        }
    }

    /// Starts the relay loop and the emit writer (once). The relay makes one last pass
    /// after `token` is cancelled, so what the pod committed while draining still goes out.
    pub(crate) fn spawn(&self, token: &CancellationToken) {
        let Some(mut rx) = self
            .rx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        let relay = self.relay.clone();
        let stop = token.clone();
        self.tracker.spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = relay.wake.notified() => {}
                    () = tokio::time::sleep(relay.idle_wait()) => {}
                }
                relay.drain().await;
            }
            relay.drain().await;
        });
        let relay = self.relay.clone();
        let stop = token.clone();
        self.tracker.spawn(async move {
            loop {
                let first = tokio::select! {
                    biased;
                    next = rx.recv() => match next {
                        Some(first) => first,
                        None => break,
                    },
                    // Stop taking emits; what is queued is still stored below.
                    () = stop.cancelled() => {
                        rx.close();
                        continue;
                    }
                };
                let mut batch = vec![first];
                while batch.len() < 256 {
                    match rx.try_recv() {
                        Ok(more) => batch.push(more),
                        Err(_) => break,
                    }
                }
                let rows: Vec<(Uuid, Event)> =
                    batch.into_iter().map(|p| (p.org_id, p.event)).collect();
                store_with_retry(&relay.db, &rows).await;
                relay.wake.notify_one();
            }
        });
    }
}

/// Pauses between attempts to store emitted events (Postgres failing over): 200 ms, 400 ms,
/// 800 ms, 1.6 s, 3 s.
const STORE_RETRY: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(3));
/// Retries before the events are dropped (counted and alerted).
const STORE_RETRIES: u32 = 5;

async fn store_with_retry(db: &PgPool, rows: &[(Uuid, Event)]) {
    let mut attempt = 0;
    loop {
        let Err(error) = event_outbox::enqueue_many(db, rows).await else {
            return;
        };
        if attempt == STORE_RETRIES {
            metrics::counter!("realtime_events_dropped_total").increment(rows.len() as u64);
            tracing::error!(count = rows.len(), %error, "emitted events dropped: they could not be stored");
            return;
        }
        tracing::warn!(count = rows.len(), %error, "storing emitted events failed; retrying");
        attempt += 1;
        tokio::time::sleep(STORE_RETRY.delay(attempt)).await;
    }
}

impl Emitter for RealtimeEmitter {
    fn emit(&self, org_id: Uuid, event: Event) {
        let pending = Pending { org_id, event };
        if let Err(e) = self.tx.try_send(pending) {
            // Full or closed: store it from a task of its own (order within a burst that
            // overflows the writer is not kept; the seq still orders what clients see).
            metrics::counter!("realtime_emit_overflow_total").increment(1);
            let pending = match e {
                mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p) => p,
            };
            let relay = self.relay.clone();
            self.tracker.spawn(async move {
                store_with_retry(&relay.db, &[(pending.org_id, pending.event)]).await;
                relay.wake.notify_one();
            });
        }
    }

    fn wake(&self) {
        self.relay.wake.notify_one();
    }
}
