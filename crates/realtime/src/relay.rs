//! The realtime relay: committed events go from the event outbox to the org's numbered log
//! (`events`) and out to sockets on every pod.
//!
//! Flows store their events in `event_outbox` inside the transaction that causes them, so
//! an event exists exactly when its cause committed, and a pod killed right after a commit
//! loses nothing: any pod's relay delivers it. The relay runs on every pod, one at a time
//! across pods (a lease row, `relay_lease`, held from numbering through publishing and
//! renewed while it works; no session state, so it holds behind a transaction-mode pooler),
//! so numbers are gap-free and published in order:
//!
//! 1. publish what an earlier relay numbered but did not publish (it died, or its publish
//!    failed): `org_event_seq.published_seq < seq`;
//! 2. take a batch of the outbox (oldest first), number it per org and store it in
//!    `events` in one transaction ([`events::append_in`]);
//! 3. publish the batch through the Redis adapter in order, then record `published_seq`.
//!
//! A commit wakes its own pod's relay at once ([`Emitter::wake`]); a relay that finds the
//! lease taken leaves the work to the holder, which always looks at the outbox once more
//! after a cycle under the lease (so it sees every commit made before the lease was tried),
//! and every pod also polls, which catches the events of a pod that died before waking
//! anyone. Delivery on the wire is at-least-once per socket and best effort across
//! disconnects; `GET /events` fills any gap.

use crate::Adapter;
use crate::events;
use crate::handshake::org_room;
use crate::watchdog::HealthCell;
use serde_json::Value;
use socketioxide::{BroadcastError, SocketIo};
use sqlx::Acquire;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use switchboard_domain::{Emitter, EventKind};
use switchboard_store::{PgPool, event_outbox};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// How long the relay lease lasts unrenewed: how long the events of a pod killed in the
/// middle of a cycle wait for another pod's relay. Renewed every third of it while a cycle
/// runs; a cycle lets it go when it ends.
const LEASE: Duration = Duration::from_secs(5);
/// Most outbox rows one relay cycle moves.
const BATCH: i64 = 500;
/// A cross-pod publish slower than this is given up; the event is delivered locally.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(3);
/// After a failed publish, how long the relay serves sockets from the log instead of trying
/// Redis again (the watchdog's check decides after that).
const DEGRADED_FOR: Duration = Duration::from_secs(2);
/// Events waiting for the emit writer.
const EMIT_DEPTH: usize = 4096;

/// Publishes numbered events to the org's room on every pod.
pub(crate) struct Publisher {
    pub(crate) io: SocketIo<Adapter>,
}

impl Publisher {
    /// Publishes through the adapter; returns false when the publish failed and the event
    /// reached only this pod's sockets. The adapter publishes before it delivers locally, so
    /// when the publish fails (Redis away) this pod's own sockets are served directly.
    async fn broadcast(&self, org_id: Uuid, event: &str, data: &Value) -> bool {
        let Some(ns) = self.io.of("/") else {
            tracing::debug!(event, "sockets closed; event kept for GET /events");
            return true;
        };
        let sent = tokio::time::timeout(PUBLISH_TIMEOUT, ns.to(org_room(org_id)).emit(event, data));
        let error = match sent.await {
            // Out; some local socket may not have taken it (closing, full).
            Ok(Ok(()) | Err(BroadcastError::Socket(_))) => {
                metrics::counter!("realtime_emits_total", "event" => metric_name(event))
                    .increment(1);
                return true;
            }
            Ok(Err(e @ BroadcastError::Serialize(_))) => {
                tracing::error!(event, error = %e, "realtime event could not be encoded");
                return true;
            }
            Ok(Err(BroadcastError::Adapter(e))) => e.to_string(),
            Err(_) => format!("publish timed out after {PUBLISH_TIMEOUT:?}"),
        };
        metrics::counter!("realtime_adapter_errors_total", "op" => "publish").increment(1);
        tracing::warn!(event, %error, "cross-pod publish failed; delivering to this pod's sockets only");
        self.local(org_id, event, data).await;
        false
    }

    /// Delivers to this pod's sockets only.
    async fn local(&self, org_id: Uuid, event: &str, data: &Value) {
        if let Some(ns) = self.io.of("/") {
            match ns.local().to(org_room(org_id)).emit(event, data).await {
                Ok(()) | Err(BroadcastError::Socket(_)) => {
                    metrics::counter!("realtime_emits_total", "event" => metric_name(event))
                        .increment(1);
                }
                Err(e) => tracing::warn!(event, error = %e, "local delivery failed"),
            }
        }
    }
}

/// Event names as metric labels, from the fixed set only.
fn metric_name(event: &str) -> &'static str {
    event
        .parse::<EventKind>()
        .map_or("other", EventKind::as_str)
}

/// What one relay cycle did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cycle {
    /// Nothing waited; the lease was not taken.
    Idle,
    /// Another pod's relay holds the lease. It looks at the outbox again after letting go,
    /// and what this pod committed before trying the lease is there by then: it moves it.
    Busy,
    /// Moved and published outbox rows, or left-over numbered events.
    Worked,
}

/// One numbered event on its way to the sockets.
struct Numbered {
    org_id: Uuid,
    seq: i64,
    event: String,
    payload: Value,
}

/// Numbered events not yet published (`published_seq < seq`), oldest first per org.
async fn unpublished<'e>(db: impl sqlx::PgExecutor<'e>) -> Result<Vec<Numbered>, sqlx::Error> {
    let rows: Vec<(Uuid, i64, String, Value)> = sqlx::query_as(
        "SELECT e.org_id, e.seq, e.event, e.payload
         FROM org_event_seq s JOIN events e ON e.org_id = s.org_id AND e.seq > s.published_seq
         WHERE s.published_seq < s.seq
         ORDER BY e.org_id, e.seq LIMIT $1",
    )
    .bind(BATCH)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(org_id, seq, event, payload)| Numbered {
            org_id,
            seq,
            event,
            payload,
        })
        .collect())
}

/// The relay of one pod.
pub(crate) struct Relay {
    pub(crate) db: PgPool,
    /// This relay's name in `relay_lease`.
    pub(crate) holder: Uuid,
    pub(crate) publisher: Publisher,
    pub(crate) wake: Notify,
    pub(crate) poll: Duration,
    /// The watchdog's view of the adapter's subscriptions.
    pub(crate) health: Arc<HealthCell>,
    /// While Redis is away, the highest number this pod delivered to its own sockets, per
    /// org: every pod serves its own sockets from the log, since no publish reaches them.
    pub(crate) local: Mutex<HashMap<Uuid, i64>>,
    /// Until when publishing through the adapter is not tried (it just failed).
    pub(crate) degraded_until: Mutex<Option<tokio::time::Instant>>,
}

impl Relay {
    /// Runs cycles until nothing waits, or until another pod's relay holds the lease (it
    /// then moves what waits: see [`Cycle::Busy`]; waiting for it here only cost each idle
    /// pod a query every few milliseconds while the other published).
    pub(crate) async fn drain(&self) {
        self.drain_outbox().await;
        if !self.adapter_up() {
            if let Err(error) = self.local_catch_up().await {
                tracing::warn!(%error, "realtime: serving this pod's sockets from the log failed");
            }
        }
    }

    /// Whether publishing through Redis is worth trying: no publish failed just now, and the
    /// watchdog (once it has checked) saw the subscriptions.
    fn adapter_up(&self) -> bool {
        let degraded = *self
            .degraded_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let health = self.health.get();
        let watchdog_ok = health.ok || health.checked_at.is_none();
        watchdog_ok && degraded.is_none_or(|until| tokio::time::Instant::now() >= until)
    }

    /// While Redis is away: delivers numbered events nobody could publish to this pod's own
    /// sockets, each once. (When Redis returns, the relay publishes them to every pod; a
    /// socket here may then see a number twice, which the `seq` tells it.)
    async fn local_catch_up(&self) -> Result<(), sqlx::Error> {
        for e in unpublished(&self.db).await? {
            if self.delivered_locally(e.org_id, e.seq) {
                let data = events::wire_payload(e.org_id, e.seq, &e.payload);
                self.publisher.local(e.org_id, &e.event, &data).await;
            }
        }
        Ok(())
    }

    /// Records that this pod's sockets have event `seq` of `org_id`; false when they had it.
    fn delivered_locally(&self, org_id: Uuid, seq: i64) -> bool {
        let mut local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        let last = local.entry(org_id).or_insert(0);
        let fresh = seq > *last;
        *last = (*last).max(seq);
        fresh
    }

    async fn drain_outbox(&self) {
        loop {
            match self.cycle().await {
                Ok(Cycle::Worked) => {}
                Ok(Cycle::Idle | Cycle::Busy) => return,
                Err(error) => {
                    metrics::counter!("realtime_relay_errors_total").increment(1);
                    tracing::warn!(%error, "realtime relay cycle failed; the next one retries");
                    return;
                }
            }
        }
    }

    /// One cycle under the lease. It is claimed in the same round trip that looks for work,
    /// so an idle pod's poll costs one statement that writes nothing.
    async fn cycle(&self) -> Result<Cycle, sqlx::Error> {
        let mut conn = self.db.acquire().await?;
        // It also says whether numbered events wait unpublished (a relay died or its publish
        // failed), so the usual cycle skips looking for them.
        // The outbox is looked at through its primary key, not with `EXISTS`: every row it
        // ever held is deleted by the relay, and until vacuum a sequential scan reads all of
        // them (1 180 pages, 4.5 ms, after a drain), while the index scan marks the dead
        // entries it meets and skips them from then on (17 pages).
        // A concurrent claim by another pod makes this UPDATE wait for it and then look at
        // the row again, so one of them gets it.
        let (leftovers, claimed): (bool, Option<bool>) = sqlx::query_as(
            "WITH w AS (
               SELECT EXISTS (SELECT 1 FROM org_event_seq WHERE published_seq < seq) AS l,
                      (SELECT id FROM event_outbox ORDER BY id LIMIT 1) IS NOT NULL AS o),
             c AS (
               UPDATE relay_lease
               SET holder = $1, locked_until = now() + make_interval(secs => $2)
               WHERE (SELECT l OR o FROM w) AND (locked_until < now() OR holder = $1)
               RETURNING 1)
             SELECT l, CASE WHEN l OR o THEN EXISTS (SELECT 1 FROM c) END FROM w",
        )
        .bind(self.holder)
        .bind(LEASE.as_secs_f64())
        .fetch_one(&mut *conn)
        .await?;
        match claimed {
            None => return Ok(Cycle::Idle),
            Some(false) => return Ok(Cycle::Busy),
            Some(true) => {}
        }
        let renew = || async {
            let renewed = sqlx::query(
                "UPDATE relay_lease SET locked_until = now() + make_interval(secs => $2)
                 WHERE holder = $1 AND locked_until > now()",
            )
            .bind(self.holder)
            .bind(LEASE.as_secs_f64())
            .execute(&self.db)
            .await;
            if let Err(error) = renewed {
                tracing::warn!(%error, "realtime relay could not renew its lease");
            }
        };
        let result =
            switchboard_domain::lease::hold(LEASE, renew, self.locked_cycle(&mut conn, leftovers))
                .await;
        // Let go at once, so the next commit on any pod is relayed without waiting for the
        // lease to run out. When this fails the lease runs out by itself.
        let released =
            sqlx::query("UPDATE relay_lease SET locked_until = '-infinity' WHERE holder = $1")
                .bind(self.holder)
                .execute(&mut *conn)
                .await;
        if let Err(error) = released {
            tracing::debug!(%error, "realtime relay lease left to run out");
        }
        result
    }

    async fn locked_cycle(
        &self,
        conn: &mut sqlx::PgConnection,
        leftovers: bool,
    ) -> Result<Cycle, sqlx::Error> {
        let mut out = if leftovers {
            self.unpublished(conn).await?
        } else {
            Vec::new()
        };
        let mut tx = conn.begin().await?;
        // Only while the lease is still this relay's: a relay that stalled past its lease
        // moves nothing, so two relays never number at once.
        let mut rows: Vec<(i64, Uuid, String, Value)> = sqlx::query_as(
            "DELETE FROM event_outbox WHERE id IN (
               SELECT id FROM event_outbox ORDER BY id LIMIT $1)
             AND EXISTS (SELECT 1 FROM relay_lease WHERE holder = $2 AND locked_until > now())
             RETURNING id, org_id, event, payload",
        )
        .bind(BATCH)
        .bind(self.holder)
        .fetch_all(&mut *tx)
        .await?;
        rows.sort_by_key(|r| r.0);
        let mut orgs: Vec<Uuid> = Vec::new();
        for (_, org, _, _) in &rows {
            if !orgs.contains(org) {
                orgs.push(*org);
            }
        }
        for org_id in orgs {
            let group: Vec<(&str, &Value)> = rows
                .iter()
                .filter(|r| r.1 == org_id)
                .map(|r| (r.2.as_str(), &r.3))
                .collect();
            let appended = events::append_in(&mut tx, org_id, &group).await?;
            for ((event, payload), a) in group.into_iter().zip(appended) {
                if a.fresh {
                    out.push(Numbered {
                        org_id,
                        seq: a.seq,
                        event: event.to_owned(),
                        payload: payload.clone(),
                    });
                }
            }
        }
        tx.commit().await?;
        self.publish(conn, out).await?;
        Ok(Cycle::Worked)
    }

    /// Events an earlier relay numbered but did not publish.
    async fn unpublished(
        &self,
        conn: &mut sqlx::PgConnection,
    ) -> Result<Vec<Numbered>, sqlx::Error> {
        let rows = unpublished(&mut *conn).await?;
        if !rows.is_empty() {
            tracing::info!(
                count = rows.len(),
                "realtime relay publishing events a previous relay left"
            );
        }
        Ok(rows)
    }

    /// Publishes in order, then records how far each org's log is published.
    async fn publish(
        &self,
        conn: &mut sqlx::PgConnection,
        events: Vec<Numbered>,
    ) -> Result<(), sqlx::Error> {
        if events.is_empty() {
            return Ok(());
        }
        // Per org: the first and the last number published in this cycle.
        let mut published: Vec<(Uuid, i64, i64)> = Vec::new();
        let mut stopped: Vec<Uuid> = Vec::new();
        for e in &events {
            // Once an org's publish failed, its later events wait too: published_seq only
            // ever covers a gap-free prefix. Redis being away is the local catch-up's case.
            if stopped.contains(&e.org_id) || !self.adapter_up() {
                if !stopped.contains(&e.org_id) {
                    stopped.push(e.org_id);
                }
                continue;
            }
            let data = events::wire_payload(e.org_id, e.seq, &e.payload);
            if self.publisher.broadcast(e.org_id, &e.event, &data).await {
                match published.iter_mut().find(|(org, _, _)| *org == e.org_id) {
                    Some(entry) => entry.2 = entry.2.max(e.seq),
                    None => published.push((e.org_id, e.seq, e.seq)),
                }
            } else {
                stopped.push(e.org_id);
                // It reached this pod's sockets; the local catch-up must not repeat it.
                self.delivered_locally(e.org_id, e.seq);
                *self
                    .degraded_until
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    Some(tokio::time::Instant::now() + DEGRADED_FOR);
            }
        }
        if published.is_empty() {
            return Ok(());
        }
        let orgs: Vec<Uuid> = published.iter().map(|p| p.0).collect();
        let firsts: Vec<i64> = published.iter().map(|p| p.1).collect();
        let lasts: Vec<i64> = published.iter().map(|p| p.2).collect();
        // The mark moves only over a gap-free prefix: when numbers before this cycle's first
        // are still unpublished (a relay's publish failed after this cycle's check), the
        // next cycle publishes from there, repeating these, rather than skip them.
        // Committed without waiting for the WAL flush: the mark lost to a crash only makes
        // the next relay publish those events again, which the `seq` lets clients drop.
        sqlx::query(concat!(
            switchboard_store::async_commit!(),
            "
             UPDATE org_event_seq s SET published_seq = GREATEST(s.published_seq, t.last)
             FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[]) AS t(org_id, first, last),
                  async_commit
             WHERE s.org_id = t.org_id AND s.published_seq >= t.first - 1"
        ))
        .bind(&orgs)
        .bind(&firsts)
        .bind(&lasts)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// An event emitted outside any business transaction.
#[derive(Debug)]
struct Pending {
    org_id: Uuid,
    event: EventKind,
    payload: Value,
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
                    () = tokio::time::sleep(relay.poll) => {}
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
                let rows: Vec<(Uuid, EventKind, Value)> = batch
                    .into_iter()
                    .map(|p| (p.org_id, p.event, p.payload))
                    .collect();
                store_with_retry(&relay.db, &rows).await;
                relay.wake.notify_one();
            }
        });
    }
}
/// Pauses between attempts to store emitted events (Postgres failing over).
const STORE_BACKOFF: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

async fn store_with_retry(db: &PgPool, rows: &[(Uuid, EventKind, Value)]) {
    let mut attempt = 0;
    loop {
        match event_outbox::enqueue_many(db, rows).await {
            Ok(()) => return,
            Err(error) => match STORE_BACKOFF.get(attempt) {
                Some(pause) => {
                    tracing::warn!(count = rows.len(), %error, "storing emitted events failed; retrying");
                    attempt += 1;
                    tokio::time::sleep(*pause).await;
                }
                None => {
                    metrics::counter!("realtime_events_dropped_total").increment(rows.len() as u64);
                    tracing::error!(count = rows.len(), %error, "emitted events dropped: they could not be stored");
                    return;
                }
            },
        }
    }
}

impl Emitter for RealtimeEmitter {
    fn emit(&self, org_id: Uuid, event: EventKind, payload: Value) {
        let pending = Pending {
            org_id,
            event,
            payload,
        };
        if let Err(e) = self.tx.try_send(pending) {
            // Full or closed: store it from a task of its own (order within a burst that
            // overflows the writer is not kept; the seq still orders what clients see).
            metrics::counter!("realtime_emit_overflow_total").increment(1);
            let pending = match e {
                mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p) => p,
            };
            let relay = self.relay.clone();
            self.tracker.spawn(async move {
                store_with_retry(
                    &relay.db,
                    &[(pending.org_id, pending.event, pending.payload)],
                )
                .await;
                relay.wake.notify_one();
            });
        }
    }

    fn wake(&self) {
        self.relay.wake.notify_one();
    }
}
