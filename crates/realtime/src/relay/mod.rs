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
//! 3. publish the batch through the Redis adapter in order, then record `published_seq`,
//!    which only ever moves over a gap-free prefix of the org's log.
//!
//! A commit wakes its own pod's relay at once ([`Emitter::wake`]); a relay that finds the
//! lease taken leaves the work to the holder, which always looks at the outbox once more
//! after a cycle under the lease (so it sees every commit made before the lease was tried),
//! and every pod also polls, which catches the events of a pod that died before waking
//! anyone. Delivery on the wire is at-least-once per socket and best effort across
//! disconnects; `GET /events` fills any gap.
//!
//! While Redis is away the relay rests rather than spins: a failed publish pauses
//! publishing ([`Pause`]), and Redis is asked again after 100 ms, doubling up to 1 s, with
//! one command on the adapter's connection (no lease, no Postgres). A paused relay takes
//! the lease only to number outbox rows, so its poll costs what it costs at rest. Every
//! pod meanwhile serves its own sockets from the log, each org from its own cursor so that
//! one org's backlog never holds up another's. The outage is logged when it starts and when
//! it ends, and counted in between (`realtime_relay_paused`, `realtime_relay_retries_total`,
//! `realtime_relay_local_events_total`).

mod emitter;
mod pause;
mod publisher;

use crate::Adapter;
use crate::driver::PubSubDriver;
use crate::events;
use crate::watchdog::HealthCell;
pub(crate) use emitter::RealtimeEmitter;
use pause::Pause;
use publisher::Publisher;
use serde_json::Value;
use socketioxide::SocketIo;
use sqlx::Acquire;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use switchboard_store::org_event_seq::{self, Numbered};
use switchboard_store::{PgPool, event_outbox, relay_lease};
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

/// How long the relay lease lasts unrenewed: how long the events of a pod killed in the
/// middle of a cycle wait for another pod's relay. Renewed every third of it while a cycle
/// runs; a cycle lets it go when it ends.
const LEASE: Duration = Duration::from_secs(5);
/// Most outbox rows one relay cycle moves.
const BATCH: i64 = 500;
/// Most numbered events one read of the log takes per org (left-over events to publish, or
/// the local fallback's), and most orgs per read: a read stays bounded however many orgs
/// wait, and every org gets its share of it.
const PER_ORG: i64 = 100;
const ORGS: i64 = 100;
/// How long the local fallback waits, per burst, for a socket whose buffer is full.
const LOCAL_STALL: Duration = Duration::from_millis(500);
/// How long asking Redis whether it answers may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What one relay cycle did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cycle {
    /// Nothing waited (that this relay could move); the lease was not taken.
    Idle,
    /// Another pod's relay holds the lease. It looks at the outbox again after letting go,
    /// and what this pod committed before trying the lease is there by then: it moves it.
    Busy,
    /// Numbered outbox rows or moved a published mark: more may wait.
    Worked,
    /// Held the lease and moved nothing: the publish failed (publishing now rests), or no
    /// mark could move yet. Not progress, so the drain stops: a cycle that cannot publish
    /// must not run again at once (it did, thousands of times a second, in an outage).
    Stalled,
}

/// What one cycle reports to the drain.
struct Outcome {
    cycle: Cycle,
    /// The first look found numbered events this pod has not served from the log yet.
    news: bool,
    /// Left-over events this cycle published.
    leftovers: usize,
}

impl Outcome {
    fn of(cycle: Cycle) -> Outcome {
        Outcome {
            cycle,
            news: false,
            leftovers: 0,
        }
    }
}

/// What one cycle's publishing did.
#[derive(Debug, Default)]
struct Published {
    /// Events that went out.
    count: usize,
    /// A published mark moved.
    moved: bool,
    /// A publish failed: publishing now rests.
    failed: bool,
}

/// The log's unpublished events for `cursors`, at most [`PER_ORG`] per org for at most
/// [`ORGS`] orgs, those after `after` first (see `org_event_seq::unpublished`).
async fn unpublished<'e>(
    db: impl sqlx::PgExecutor<'e>,
    cursors: &Cursors,
    after: Uuid,
) -> Result<Vec<Numbered>, sqlx::Error> {
    org_event_seq::unpublished(db, cursors.view(), after, ORGS, PER_ORG).await
}

/// Whether a read of [`unpublished`] was full (an org got its whole share, or the read its
/// whole number of orgs), so that more may wait behind it.
fn full(rows: &[Numbered]) -> bool {
    let mut orgs = 0;
    for org in rows.chunk_by(|a, b| a.org_id == b.org_id) {
        if org.len() as i64 >= PER_ORG {
            return true;
        }
        orgs += 1;
    }
    orgs >= ORGS
}

/// A cycle's events in publishing order: by org and number, each org's only as far as they
/// follow each other. After a gap (the batch just numbered, behind left-overs the read did
/// not reach) the rest wait for a later cycle, which reads from `published_seq + 1`: nothing
/// goes out of order, and the mark never passes a number that was not published.
fn unbroken(mut events: Vec<Numbered>) -> Vec<Numbered> {
    events.sort_by_key(|e| (e.org_id, e.seq));
    let mut kept: Vec<Numbered> = Vec::with_capacity(events.len());
    let mut broken: Option<Uuid> = None;
    for e in events {
        if broken == Some(e.org_id) {
            continue;
        }
        if let Some(last) = kept.last()
            && last.org_id == e.org_id
            && e.seq != last.seq + 1
        {
            broken = Some(e.org_id);
            continue;
        }
        kept.push(e);
    }
    kept
}

/// This pod's local-fallback cursors as statement parameters.
#[derive(Debug, Default)]
struct Cursors {
    orgs: Vec<Uuid>,
    seqs: Vec<i64>,
}

impl Cursors {
    fn view(&self) -> org_event_seq::Cursors<'_> {
        org_event_seq::Cursors {
            orgs: &self.orgs,
            seqs: &self.seqs,
        }
    }
}

/// What this pod delivered to its own sockets from the log while it serves them itself.
#[derive(Debug, Default)]
struct Local {
    /// Per org, the highest number delivered.
    delivered: HashMap<Uuid, i64>,
    /// The last org of the previous read; the next read starts after it.
    after: Uuid,
}

/// The relay of one pod.
pub(crate) struct Relay {
    pub(super) db: PgPool,
    /// This relay's name in `relay_lease`.
    holder: Uuid,
    publisher: Publisher,
    pub(super) wake: Notify,
    poll: Duration,
    /// The watchdog's view of the adapter's subscriptions.
    health: Arc<HealthCell>,
    /// The adapter's connection: asked whether Redis answers while publishing rests.
    redis: PubSubDriver,
    pause: Mutex<Pause>,
    /// While this pod serves its own sockets from the log (no publish reaches them).
    local: Mutex<Local>,
}

impl Relay {
    pub(crate) fn new(
        db: PgPool,
        io: SocketIo<Adapter>,
        poll: Duration,
        health: Arc<HealthCell>,
        redis: PubSubDriver,
    ) -> Relay {
        Relay {
            db,
            holder: Uuid::new_v4(),
            publisher: Publisher { io },
            wake: Notify::new(),
            poll,
            health,
            redis,
            pause: Mutex::default(),
            local: Mutex::default(),
        }
    }

    fn pause(&self) -> MutexGuard<'_, Pause> {
        self.pause.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn local(&self) -> MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long the relay loop waits for a wake before it looks again: the poll, or less
    /// when Redis is due to be asked again sooner.
    pub(super) fn idle_wait(&self) -> Duration {
        let retry_at = self.pause().retry_at;
        retry_at.map_or(self.poll, |at| {
            at.saturating_duration_since(Instant::now()).min(self.poll)
        })
    }

    /// Runs cycles until nothing waits, until another pod's relay holds the lease (it then
    /// moves what waits: see [`Cycle::Busy`]; waiting for it here only cost each idle pod a
    /// query every few milliseconds while the other published), or until a cycle cannot
    /// publish; then serves this pod's sockets from the log if no publish reaches them.
    ///
    /// While publishing rests, Redis is asked again once its pause is over: one command on
    /// the adapter's connection, nothing in Postgres, so the relay waits neither on a dead
    /// Redis nor on the watchdog. The answer can take up to [`PROBE_TIMEOUT`]; the work that
    /// needs no Redis (numbering, the local fallback) goes on meanwhile.
    pub(crate) async fn drain(&self) {
        let publishing = if self.retry_due() {
            let (answered, ()) = tokio::join!(self.probe(), self.drain_with(false));
            if !answered {
                return;
            }
            true
        } else {
            !self.pause().paused()
        };
        self.drain_with(publishing).await;
    }

    /// Whether publishing rests and its pause is over; if so, it is taken (Redis is not
    /// asked twice at once: the answer sets the next time).
    fn retry_due(&self) -> bool {
        let mut pause = self.pause();
        let now = Instant::now();
        match pause.retry_at {
            Some(at) if now >= at => {
                pause.retries += 1;
                pause.retry_at = Some(now + PROBE_TIMEOUT);
                true
            }
            _ => false,
        }
    }

    /// Whether Redis answers on the adapter's connection; a failure extends the pause.
    async fn probe(&self) -> bool {
        metrics::counter!("realtime_relay_retries_total").increment(1);
        let error = match tokio::time::timeout(PROBE_TIMEOUT, self.redis.own_subscriptions()).await
        {
            Ok(Ok(_)) => return true,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {PROBE_TIMEOUT:?}"),
        };
        self.pause().failed(Instant::now(), &error);
        false
    }

    async fn drain_with(&self, publishing: bool) {
        let failures = self.pause().failures;
        let serving = self.serving_locally();
        let cursors = if serving {
            self.cursors()
        } else {
            Cursors::default()
        };
        let news = self.drain_outbox(publishing, serving, &cursors).await;
        let failed = self.pause().failures != failures;
        if publishing && !failed {
            self.pause().recovered(Instant::now());
        }
        if !self.serving_locally() {
            let mut local = self.local();
            if !local.delivered.is_empty() {
                *local = Local::default();
            }
            return;
        }
        // A pod that has just begun serving did not ask the first look.
        if news || !serving {
            if let Err(error) = self.local_catch_up().await {
                tracing::warn!(%error, "realtime: serving this pod's sockets from the log failed");
            }
        }
    }

    /// Whether this pod serves its own sockets from the log: its relay's publishing rests,
    /// or the watchdog found its subscriptions missing, so no publish reaches them.
    fn serving_locally(&self) -> bool {
        if self.pause().paused() {
            return true;
        }
        let health = self.health.get();
        !health.ok && health.checked_at.is_some()
    }

    fn cursors(&self) -> Cursors {
        let local = self.local();
        Cursors {
            orgs: local.delivered.keys().copied().collect(),
            seqs: local.delivered.values().copied().collect(),
        }
    }

    /// While no publish reaches this pod's sockets: delivers them the numbered events
    /// nobody could publish, each once, in order per org, every org from its own cursor.
    /// (When Redis returns, the relay publishes them to every pod; a socket here may then
    /// see a number twice, which the `seq` tells it.) Reads again at once only while a read
    /// came back full: each one moves the cursors on.
    async fn local_catch_up(&self) -> Result<(), sqlx::Error> {
        loop {
            let (cursors, after) = (self.cursors(), self.local().after);
            let rows = unpublished(&self.db, &cursors, after).await?;
            let Some(last) = rows.last() else {
                return Ok(());
            };
            self.local().after = last.org_id;
            let mut served = 0;
            for org in rows.chunk_by(|a, b| a.org_id == b.org_id) {
                let burst: Vec<(&str, Value)> = org
                    .iter()
                    .filter(|e| self.delivered_locally(e.org_id, e.seq))
                    .map(|e| {
                        let data = events::wire_payload(e.org_id, e.seq, &e.payload);
                        (e.event.as_str(), data)
                    })
                    .collect();
                if let Some(first) = org.first() {
                    served += self.publisher.local(first.org_id, &burst).await;
                }
            }
            metrics::counter!("realtime_relay_local_events_total").increment(served);
            self.pause().served += served;
            if !full(&rows) {
                return Ok(());
            }
        }
    }

    /// Records that this pod's sockets have event `seq` of `org_id`; false when they had it.
    fn delivered_locally(&self, org_id: Uuid, seq: i64) -> bool {
        let mut local = self.local();
        let last = local.delivered.entry(org_id).or_insert(0);
        let fresh = seq > *last;
        *last = (*last).max(seq);
        fresh
    }

    /// Runs cycles while they make progress; returns whether this pod's local fallback has
    /// something new (when `serving`, the first look asks).
    async fn drain_outbox(&self, publishing: bool, serving: bool, cursors: &Cursors) -> bool {
        let failures = self.pause().failures;
        let mut news = false;
        let mut leftovers = 0;
        loop {
            // A publish that failed in this drain pauses the cycles after it.
            let publishing = publishing && self.pause().failures == failures;
            match self.cycle(publishing, serving, cursors).await {
                Ok(outcome) => {
                    news |= outcome.news;
                    leftovers += outcome.leftovers;
                    if outcome.cycle != Cycle::Worked {
                        break;
                    }
                    news = true;
                }
                Err(error) => {
                    metrics::counter!("realtime_relay_errors_total").increment(1);
                    tracing::warn!(%error, "realtime relay cycle failed; the next one retries");
                    break;
                }
            }
        }
        if leftovers > 0 {
            tracing::info!(
                count = leftovers,
                "realtime relay published events numbered earlier (a relay died, or Redis was away)"
            );
        }
        news
    }

    /// One cycle under the lease. It is claimed in the same round trip that looks for work,
    /// so an idle pod's poll costs one statement that writes nothing, and so does a paused
    /// relay's while the outbox is empty: left-over events are work only for a relay that
    /// may publish.
    async fn cycle(
        &self,
        publishing: bool,
        serving: bool,
        cursors: &Cursors,
    ) -> Result<Outcome, sqlx::Error> {
        let mut conn = self.db.acquire().await?;
        let relay_lease::Claim {
            leftovers,
            claimed,
            news,
        } = relay_lease::claim(
            &mut conn,
            self.holder,
            LEASE,
            publishing,
            serving,
            cursors.view(),
        )
        .await?;
        let cycle = match claimed {
            None => Cycle::Idle,
            Some(false) => Cycle::Busy,
            Some(true) => Cycle::Worked,
        };
        if cycle != Cycle::Worked {
            return Ok(Outcome {
                news,
                ..Outcome::of(cycle)
            });
        }
        let renew = || async {
            if let Err(error) = relay_lease::renew(&self.db, self.holder, LEASE).await {
                tracing::warn!(%error, "realtime relay could not renew its lease");
            }
        };
        let work = self.locked_cycle(&mut conn, publishing && leftovers, publishing);
        let result = switchboard_domain::lease::hold(LEASE, renew, work).await;
        // Let go at once, so the next commit on any pod is relayed without waiting for the
        // lease to run out. When this fails the lease runs out by itself.
        let released = relay_lease::release(&mut conn, self.holder).await;
        if let Err(error) = released {
            tracing::debug!(%error, "realtime relay lease left to run out");
        }
        result.map(|outcome| Outcome {
            news: news || outcome.news,
            ..outcome
        })
    }

    async fn locked_cycle(
        &self,
        conn: &mut sqlx::PgConnection,
        leftovers: bool,
        publishing: bool,
    ) -> Result<Outcome, sqlx::Error> {
        let mut out = if leftovers {
            unpublished(&mut *conn, &Cursors::default(), Uuid::nil()).await?
        } else {
            Vec::new()
        };
        let left = out.len();
        let mut tx = conn.begin().await?;
        let rows = event_outbox::take_under_lease(&mut tx, BATCH, self.holder).await?;
        let mut orgs: Vec<Uuid> = Vec::new();
        for row in &rows {
            if !orgs.contains(&row.org_id) {
                orgs.push(row.org_id);
            }
        }
        for org_id in orgs {
            let group: Vec<(&str, &Value)> = rows
                .iter()
                .filter(|r| r.org_id == org_id)
                .map(|r| (r.event.as_str(), &r.payload))
                .collect();
            let appended = events::append_in(&mut tx, org_id, &group).await?;
            // A paused relay numbers without publishing: the local fallback reads the log.
            if !publishing {
                continue;
            }
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
        let numbered = !rows.is_empty();
        let mut settled = false;
        if leftovers && out.is_empty() {
            // Numbers past the mark that the log no longer holds (retention deleted them
            // while nobody could publish): nobody ever can, so the mark moves on rather
            // than bring the relay here at every poll.
            settled = org_event_seq::settle_gone(&mut *conn).await?;
        }
        let published = if publishing {
            self.publish(conn, out).await?
        } else {
            Published::default()
        };
        Ok(Outcome {
            cycle: if numbered || settled || published.moved {
                Cycle::Worked
            } else {
                Cycle::Stalled
            },
            // What a failed publish did not deliver, the local fallback does.
            news: published.failed,
            leftovers: published.count.min(left),
        })
    }

    /// Publishes in order per org, then records how far each org's log is published. The
    /// first failed publish (Redis away) pauses publishing and ends the cycle's.
    async fn publish(
        &self,
        conn: &mut sqlx::PgConnection,
        events: Vec<Numbered>,
    ) -> Result<Published, sqlx::Error> {
        let mut result = Published::default();
        // Per org: the first and the last number published in this cycle, unbroken.
        let mut runs: Vec<org_event_seq::Run> = Vec::new();
        for e in unbroken(events) {
            let data = events::wire_payload(e.org_id, e.seq, &e.payload);
            if let Err(error) = self.publisher.broadcast(e.org_id, &e.event, &data).await {
                self.pause().failed(Instant::now(), &error);
                result.failed = true;
                break;
            }
            match runs.last_mut() {
                Some(run) if run.org_id == e.org_id => run.last = e.seq,
                _ => runs.push(org_event_seq::Run {
                    org_id: e.org_id,
                    first: e.seq,
                    last: e.seq,
                }),
            }
        }
        result.count = runs.iter().map(|r| (r.last - r.first + 1) as usize).sum();
        if runs.is_empty() {
            return Ok(result);
        }
        result.moved = org_event_seq::mark_published(conn, &runs).await?;
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(org_id: Uuid, seq: i64) -> Numbered {
        Numbered {
            org_id,
            seq,
            event: "message_created".into(),
            payload: Value::Null,
        }
    }

    fn seqs(events: &[Numbered], org: Uuid) -> Vec<i64> {
        events
            .iter()
            .filter(|e| e.org_id == org)
            .map(|e| e.seq)
            .collect()
    }

    #[test]
    fn an_org_is_published_only_as_far_as_its_numbers_follow_each_other() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        // Left-overs of `a` read up to 3, then this cycle's batch from 7: 4..=6 are in the
        // log but not in hand, so 7 and 8 wait. `b` is unbroken and goes out whole.
        let events = vec![
            numbered(a, 7),
            numbered(b, 5),
            numbered(a, 1),
            numbered(a, 2),
            numbered(b, 4),
            numbered(a, 3),
            numbered(a, 8),
        ];
        let kept = unbroken(events);
        assert_eq!(seqs(&kept, a), vec![1, 2, 3]);
        assert_eq!(seqs(&kept, b), vec![4, 5]);
        assert!(
            kept.windows(2)
                .all(|w| (w[0].org_id, w[0].seq) < (w[1].org_id, w[1].seq))
        );
    }

    #[test]
    fn a_read_is_full_when_an_org_filled_its_share_or_the_read_its_orgs() {
        let one_org: Vec<Numbered> = (1..=PER_ORG).map(|s| numbered(Uuid::nil(), s)).collect();
        assert!(full(&one_org));
        assert!(!full(&one_org[1..]));
        let many_orgs: Vec<Numbered> = (0..ORGS as u128)
            .map(|o| numbered(Uuid::from_u128(o), 1))
            .collect();
        assert!(full(&many_orgs));
        assert!(!full(&many_orgs[1..]));
        assert!(!full(&[]));
    }
}
