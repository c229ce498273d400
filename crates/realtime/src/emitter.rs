//! The realtime [`Emitter`]: each event gets the org's next number in Postgres, then goes to
//! the room `org:{org_id}` through the Redis adapter, so sockets on every pod receive it.
//!
//! `emit` is called by the flows after their transaction commits and must not block, so it
//! hands the event to one of a few ordered lanes (chosen by org: one org's events keep their
//! order on this pod) worked by tasks on the pod's `TaskTracker`. If a lane is full, a task
//! waits for room in that same lane: an org's events are always stored by its one lane per
//! pod, so a burst never turns into many transactions queueing on the org's counter lock
//! (each holding a pooled connection the jobs need). If the lane is already closed
//! (shutdown), the event is delivered by a task of its own, so nothing a job emits while
//! the pod drains is dropped. Delivery on the wire is
//! at-least-once per socket connection and best effort across disconnects; `GET /events`
//! is how a client fills a gap.

use crate::Adapter;
use crate::events;
use crate::handshake::org_room;
use serde_json::Value;
use socketioxide::{BroadcastError, SocketIo};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use switchboard_flows::emit::Emitter;
use switchboard_store::PgPool;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// Lanes per pod: emits of different orgs proceed in parallel up to this many.
const LANES: usize = 4;
/// Events waiting per lane before `emit` hands the event to a task that waits for room.
const LANE_DEPTH: usize = 1024;
/// Most events a lane stores with one transaction.
const LANE_BATCH: usize = 128;
/// A cross-pod publish slower than this is given up; the event is delivered locally.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(3);
/// Pauses between attempts to store an event (Postgres failing over, pool exhausted).
const STORE_BACKOFF: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

/// An event on its way out.
#[derive(Debug)]
pub(crate) struct Pending {
    org_id: Uuid,
    event: &'static str,
    payload: Value,
}

/// Stores and broadcasts events; shared by the lanes and the fallback tasks.
pub(crate) struct Delivery {
    pub(crate) db: PgPool,
    pub(crate) io: SocketIo<Adapter>,
}

impl Delivery {
    async fn deliver(&self, event: Pending) {
        self.deliver_batch(vec![event]).await;
    }

    /// Stores the events of each org with one transaction (numbers in arrival order), then
    /// broadcasts them in that order. Under load a lane hands over everything it holds, so
    /// an org's burst costs one counter lock instead of one per event.
    async fn deliver_batch(&self, batch: Vec<Pending>) {
        let mut orgs: Vec<Uuid> = Vec::new();
        for e in &batch {
            if !orgs.contains(&e.org_id) {
                orgs.push(e.org_id);
            }
        }
        for org_id in orgs {
            let group: Vec<&Pending> = batch.iter().filter(|e| e.org_id == org_id).collect();
            let Some(seqs) = self.store(org_id, &group).await else {
                continue;
            };
            for (event, seq) in group.iter().zip(seqs) {
                let data = events::wire_payload(org_id, seq, &event.payload);
                self.broadcast(org_id, event.event, &data).await;
            }
        }
    }

    async fn store(&self, org_id: Uuid, group: &[&Pending]) -> Option<Vec<i64>> {
        let items: Vec<(&str, &Value)> = group.iter().map(|e| (e.event, &e.payload)).collect();
        let mut attempt = 0;
        loop {
            match events::append_batch(&self.db, org_id, &items).await {
                Ok(appended) => return Some(appended.into_iter().map(|a| a.seq).collect()),
                Err(error) => match STORE_BACKOFF.get(attempt) {
                    Some(pause) => {
                        tracing::warn!(%org_id, count = items.len(), %error, "storing realtime events failed; retrying");
                        attempt += 1;
                        tokio::time::sleep(*pause).await;
                    }
                    None => {
                        metrics::counter!("realtime_events_dropped_total")
                            .increment(items.len() as u64);
                        tracing::error!(%org_id, count = items.len(), %error, "realtime events dropped: they could not be stored");
                        return None;
                    }
                },
            }
        }
    }

    /// Publishes through the adapter. The adapter publishes before it delivers locally, so
    /// when the publish fails (Redis away) this pod's own sockets are served directly: local
    /// delivery never depends on Redis.
    async fn broadcast(&self, org_id: Uuid, event: &'static str, data: &Value) {
        let room = org_room(org_id);
        let Some(ns) = self.io.of("/") else {
            tracing::debug!(event, "sockets closed; event kept for GET /events");
            return;
        };
        let error = match tokio::time::timeout(
            PUBLISH_TIMEOUT,
            ns.to(room.clone()).emit(event, data),
        )
        .await
        {
            Ok(Ok(())) => {
                metrics::counter!("realtime_emits_total", "event" => event).increment(1);
                return;
            }
            // The publish went out; some local socket could not take it (closing, full).
            Ok(Err(BroadcastError::Socket(errors))) => {
                tracing::debug!(?errors, "some local sockets missed an event");
                metrics::counter!("realtime_emits_total", "event" => event).increment(1);
                return;
            }
            Ok(Err(e @ BroadcastError::Serialize(_))) => {
                tracing::error!(event, error = %e, "realtime event could not be encoded");
                return;
            }
            Ok(Err(BroadcastError::Adapter(e))) => e.to_string(),
            Err(_) => format!("publish timed out after {PUBLISH_TIMEOUT:?}"),
        };
        metrics::counter!("realtime_adapter_errors_total", "op" => "publish").increment(1);
        tracing::warn!(event, %error, "cross-pod publish failed; delivering to this pod's sockets only");
        let local = self.io.of("/").map(|ns| ns.local().to(room));
        if let Some(local) = local {
            match local.emit(event, data).await {
                Ok(()) | Err(BroadcastError::Socket(_)) => {
                    metrics::counter!("realtime_emits_total", "event" => event).increment(1);
                }
                Err(e) => tracing::warn!(event, error = %e, "local delivery failed"),
            }
        }
    }
}

/// The pod's [`Emitter`].
pub(crate) struct RealtimeEmitter {
    lanes: Vec<mpsc::Sender<Pending>>,
    receivers: Mutex<Option<Vec<mpsc::Receiver<Pending>>>>,
    delivery: Arc<Delivery>,
    tracker: TaskTracker,
}

impl RealtimeEmitter {
    pub(crate) fn new(delivery: Arc<Delivery>, tracker: TaskTracker) -> Self {
        let (lanes, receivers) = (0..LANES).map(|_| mpsc::channel(LANE_DEPTH)).unzip();
        Self {
            lanes,
            receivers: Mutex::new(Some(receivers)),
            delivery,
            tracker,
        }
    }

    /// Starts the lane workers (once). Each stops taking new events when `token` is
    /// cancelled, delivers what it already holds, and exits.
    pub(crate) fn spawn_lanes(&self, token: &CancellationToken) {
        let receivers = self
            .receivers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        for mut rx in receivers.into_iter().flatten() {
            let delivery = self.delivery.clone();
            let token = token.clone();
            self.tracker.spawn(async move {
                loop {
                    tokio::select! {
                        biased;
                        next = rx.recv() => match next {
                            Some(event) => {
                                let mut batch = vec![event];
                                while batch.len() < LANE_BATCH {
                                    match rx.try_recv() {
                                        Ok(more) => batch.push(more),
                                        Err(_) => break,
                                    }
                                }
                                delivery.deliver_batch(batch).await;
                            }
                            None => return,
                        },
                        () = token.cancelled() => break,
                    }
                }
                rx.close();
                while let Some(event) = rx.recv().await {
                    delivery.deliver(event).await;
                }
            });
        }
    }
}

impl Emitter for RealtimeEmitter {
    fn emit(&self, org_id: Uuid, event: &'static str, payload: Value) {
        let lanes = self.lanes.len().max(1) as u128;
        let lane = usize::try_from(org_id.as_u128() % lanes).unwrap_or(0);
        let pending = Pending {
            org_id,
            event,
            payload,
        };
        let Some(tx) = self.lanes.get(lane) else {
            return;
        };
        let pending = match tx.try_send(pending) {
            Ok(()) => return,
            Err(TrySendError::Full(p)) => {
                metrics::counter!("realtime_lane_full_total").increment(1);
                let (tx, delivery) = (tx.clone(), self.delivery.clone());
                self.tracker.spawn(async move {
                    if let Err(closed) = tx.send(p).await {
                        delivery.deliver(closed.0).await;
                    }
                });
                return;
            }
            Err(TrySendError::Closed(p)) => p,
        };
        let delivery = self.delivery.clone();
        self.tracker
            .spawn(async move { delivery.deliver(pending).await });
    }
}
