//! Who has a conversation open: ephemeral, across pods, and never shown to another org.
//!
//! The console emits `viewing {conversation_id}` when it opens a conversation and
//! `stopped_viewing` when it leaves it. Each pod keeps its sockets' entries in Redis, one
//! sorted set per conversation (`{prefix}:presence:{conversation_id}`) whose members are the
//! viewing sockets and whose scores are their expiry times: any pod reads the same viewers,
//! so presence needs no sticky sessions. Presence is not durable and does not go through
//! the event outbox: a lost entry costs one heartbeat of staleness, not a message.
//!
//! An entry lives [`TTL`]; the pod refreshes its own sockets' entries every [`HEARTBEAT`]
//! and re-announces those conversations. A socket that leaves or disconnects is removed at
//! once by its pod and the conversation re-announced; a killed pod's entries are past their
//! score within [`TTL`] and drop out of the next announcement (the console also forgets a
//! conversation's viewers after `ttl_secs` without an announcement, for a conversation no
//! live pod announces any more).
//!
//! A `viewing` is admitted only for a conversation of an org the socket is a member of,
//! and the `presence` event goes to that org's room only, so no other org sees it.
//! Payloads are strict: anything else is refused (in the ack when the client asked for
//! one) and changes nothing.

use crate::Adapter;
use crate::handshake::org_room;
use crate::sessions::Session;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use socketioxide::SocketIo;
use socketioxide::extract::{AckSender, SocketRef, TryData};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchboard_coord::{CoordError, Redis};
use switchboard_domain::periodic;
use switchboard_store::{PgPool, conversations, users};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// How long an entry lives without a refresh: a killed pod's viewers are gone after this.
pub const TTL: Duration = Duration::from_secs(10);
/// How often each pod refreshes its sockets' entries and re-announces their conversations.
pub const HEARTBEAT: Duration = Duration::from_secs(3);

/// The `presence` event: everyone viewing the conversation now (each user once).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PresenceEvent {
    /// The conversation.
    pub conversation_id: Uuid,
    /// Who has it open, by name; empty when nobody does any more.
    pub viewers: Vec<Viewer>,
    /// Forget these viewers if no new `presence` for the conversation arrives within this.
    pub ttl_secs: u64,
}

/// One user viewing a conversation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Viewer {
    /// The user.
    pub user_id: Uuid,
    /// Their display name, else their email.
    pub name: String,
}

/// The `viewing` payload.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewingRequest {
    conversation_id: Uuid,
}

/// One socket's entry, as stored in the sorted set (the exact string is kept to remove it).
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    sid: String,
    user_id: Uuid,
    name: String,
}

/// What one socket is viewing.
#[derive(Debug, Clone)]
struct Viewing {
    conversation_id: Uuid,
    org_id: Uuid,
    member: String,
}

/// A socket's presence state (a socket extension). Behind one lock so that a `viewing`
/// and a `stopped_viewing` sent back to back are applied in order.
#[derive(Clone, Default)]
struct SocketPresence(Arc<tokio::sync::Mutex<State>>);

#[derive(Default)]
struct State {
    viewing: Option<Viewing>,
    name: Option<String>,
    /// Changes of conversation in the current [`CHANGE_WINDOW`], and when it started.
    changes: u32,
    window: Option<std::time::Instant>,
}

/// A socket may switch conversations this often per [`CHANGE_WINDOW`]: each switch reads
/// Postgres and announces twice, so a client looping over ids is refused, not served.
const CHANGES_PER_WINDOW: u32 = 20;
const CHANGE_WINDOW: Duration = Duration::from_secs(10);

impl State {
    /// Counts one change of conversation; `false` when over the allowance.
    fn allow_change(&mut self) -> bool {
        let now = std::time::Instant::now();
        match self.window {
            Some(start) if now.duration_since(start) < CHANGE_WINDOW => {}
            _ => {
                self.window = Some(now);
                self.changes = 0;
            }
        }
        self.changes += 1;
        self.changes <= CHANGES_PER_WINDOW
    }
}

/// Why a `viewing` was refused (the ack's `error`).
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("expected {{\"conversation_id\": \"<uuid>\"}}")]
    BadPayload,
    #[error("no such conversation")]
    NotFound,
    #[error("presence is unavailable, retry shortly")]
    Unavailable,
    #[error("too many conversations opened; slow down")]
    TooFast,
}

/// The pod's presence keeper.
#[derive(Clone)]
pub(crate) struct Presence {
    redis: Redis,
    db: PgPool,
}

impl Presence {
    pub(crate) fn new(redis: Redis, db: PgPool) -> Self {
        Self { redis, db }
    }

    fn key(&self, conversation_id: Uuid) -> String {
        self.redis.key(&format!("presence:{conversation_id}"))
    }

    /// Registers the socket's `viewing` and `stopped_viewing` handlers.
    pub(crate) fn attach(&self, socket: &SocketRef<Adapter>) {
        socket.extensions.insert(SocketPresence::default());
        let presence = self.clone();
        socket.on(
            "viewing",
            async move |socket: SocketRef<Adapter>,
                        data: TryData<Value>,
                        ack: AckSender<Adapter>| {
                let outcome = presence.view(&socket, data.0.ok()).await;
                let answer = match &outcome {
                    Ok(viewers) => serde_json::json!({ "ok": true, "viewers": viewers }),
                    Err(refusal) => {
                        tracing::debug!(sid = %socket.id, reason = %refusal, "viewing refused");
                        serde_json::json!({ "ok": false, "error": refusal.to_string() })
                    }
                };
                let _ = ack.send(&answer);
            },
        );
        let presence = self.clone();
        socket.on(
            "stopped_viewing",
            async move |socket: SocketRef<Adapter>, ack: AckSender<Adapter>| {
                let ok = presence.stop(&socket).await.is_ok();
                let _ = ack.send(&serde_json::json!({ "ok": ok }));
            },
        );
    }

    /// The socket disconnected: its entry goes at once.
    pub(crate) async fn disconnected(&self, socket: &SocketRef<Adapter>) {
        if let Err(e) = self.stop(socket).await {
            tracing::debug!(sid = %socket.id, error = %e, "presence entry left to expire");
        }
    }

    async fn view(
        &self,
        socket: &SocketRef<Adapter>,
        data: Option<Value>,
    ) -> Result<Vec<Viewer>, Refusal> {
        let request: ViewingRequest = data
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or(Refusal::BadPayload)?;
        let (Some(state), Some(session)) = (
            socket.extensions.get::<SocketPresence>(),
            socket.extensions.get::<Session>(),
        ) else {
            return Err(Refusal::Unavailable);
        };
        let mut state = state.0.lock().await;
        // A view that took the lock after the disconnect's cleanup would leave an entry
        // for a closed socket.
        if !socket.connected() {
            return Err(Refusal::Unavailable);
        }
        if let Some(current) = &state.viewing
            && current.conversation_id == request.conversation_id
        {
            // Idempotent: the heartbeat keeps the entry; nothing to announce.
            return self
                .viewers(current.conversation_id, None)
                .await
                .map_err(|_| Refusal::Unavailable);
        }
        if !state.allow_change() {
            return Err(Refusal::TooFast);
        }
        let conversation = conversations::get(&self.db, request.conversation_id)
            .await
            .map_err(|_| Refusal::Unavailable)?
            .ok_or(Refusal::NotFound)?;
        // Another org's conversation reads exactly like a missing one.
        if !session
            .memberships
            .iter()
            .any(|m| m.org_id == conversation.org_id)
        {
            return Err(Refusal::NotFound);
        }
        let name = match &state.name {
            Some(name) => name.clone(),
            None => {
                let user = users::get(&self.db, session.user_id)
                    .await
                    .map_err(|_| Refusal::Unavailable)?
                    .ok_or(Refusal::Unavailable)?;
                let name = user.display_name.unwrap_or(user.email);
                state.name = Some(name.clone());
                name
            }
        };
        if let Some(old) = state.viewing.take() {
            self.remove_and_announce(socket, &old).await;
        }
        let member = serde_json::to_string(&Entry {
            sid: socket.id.to_string(),
            user_id: session.user_id,
            name,
        })
        .map_err(|_| Refusal::Unavailable)?;
        let viewing = Viewing {
            conversation_id: conversation.id,
            org_id: conversation.org_id,
            member,
        };
        let viewers = self
            .viewers(viewing.conversation_id, Some(&[viewing.member.as_str()]))
            .await
            .map_err(|_| Refusal::Unavailable)?;
        announce(socket, viewing.org_id, viewing.conversation_id, &viewers).await;
        state.viewing = Some(viewing);
        Ok(viewers)
    }

    async fn stop(&self, socket: &SocketRef<Adapter>) -> Result<(), CoordError> {
        let Some(state) = socket.extensions.get::<SocketPresence>() else {
            return Ok(());
        };
        let mut state = state.0.lock().await;
        if let Some(old) = state.viewing.take() {
            self.remove(&old).await?;
            self.announce_current(socket, &old).await;
        }
        Ok(())
    }

    async fn remove(&self, viewing: &Viewing) -> Result<(), CoordError> {
        let mut conn = self.redis.conn();
        let () = redis::cmd("ZREM")
            .arg(self.key(viewing.conversation_id))
            .arg(&viewing.member)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    async fn remove_and_announce(&self, socket: &SocketRef<Adapter>, viewing: &Viewing) {
        if let Err(e) = self.remove(viewing).await {
            tracing::debug!(error = %e, "presence entry left to expire");
        }
        self.announce_current(socket, viewing).await;
    }

    async fn announce_current(&self, socket: &SocketRef<Adapter>, viewing: &Viewing) {
        if let Ok(viewers) = self.viewers(viewing.conversation_id, None).await {
            announce(socket, viewing.org_id, viewing.conversation_id, &viewers).await;
        }
    }

    /// Refreshes `members` (if any), drops expired entries and reads who is left, in one
    /// round trip on the conversation's key.
    async fn viewers(
        &self,
        conversation_id: Uuid,
        members: Option<&[&str]>,
    ) -> Result<Vec<Viewer>, CoordError> {
        let key = self.key(conversation_id);
        let mut pipe = redis::pipe();
        fill(&mut pipe, &key, members.unwrap_or_default());
        let (lists,): (Vec<String>,) = pipe.query_async(&mut self.redis.conn()).await?;
        Ok(distinct_viewers(&lists))
    }

    /// One heartbeat: refreshes this pod's sockets' entries and announces each of their
    /// conversations to its org.
    async fn beat(&self, io: &SocketIo<Adapter>) -> Result<(), CoordError> {
        let Some(ns) = io.of("/") else {
            return Ok(());
        };
        let mut by_key: HashMap<String, (Uuid, Uuid, Vec<String>)> = HashMap::new();
        for socket in ns.clone().local().sockets() {
            let Some(state) = socket.extensions.get::<SocketPresence>() else {
                continue;
            };
            let Ok(state) = state.0.try_lock() else {
                continue; // changing right now; that change refreshes and announces
            };
            if let Some(v) = &state.viewing {
                by_key
                    .entry(self.key(v.conversation_id))
                    .or_insert_with(|| (v.conversation_id, v.org_id, Vec::new()))
                    .2
                    .push(v.member.clone());
            }
        }
        if by_key.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = by_key.keys().cloned().collect();
        let lists: Vec<Vec<String>> = self
            .redis
            .pipeline_per_key(&keys, |pipe, key| {
                let members: Vec<&str> = by_key[key].2.iter().map(String::as_str).collect();
                fill(pipe, key, &members);
            })
            .await?;
        for (key, list) in keys.iter().zip(lists) {
            let (conversation_id, org_id, _) = by_key[key];
            let event = PresenceEvent {
                conversation_id,
                viewers: distinct_viewers(&list),
                ttl_secs: TTL.as_secs(),
            };
            if let Err(e) = ns
                .clone()
                .to(org_room(org_id))
                .emit("presence", &event)
                .await
            {
                tracing::debug!(error = %e, "presence heartbeat not announced");
            }
        }
        Ok(())
    }

    /// Starts the pod's heartbeat.
    pub(crate) fn spawn(
        &self,
        io: SocketIo<Adapter>,
        token: &CancellationToken,
        tracker: &TaskTracker,
    ) {
        let presence = self.clone();
        periodic::every(
            "realtime presence heartbeat",
            HEARTBEAT,
            token,
            tracker,
            move || {
                let (presence, io) = (presence.clone(), io.clone());
                async move { presence.beat(&io).await }
            },
        );
    }
}

/// The pipeline of one conversation's key: refresh `members`, keep the key alive, drop the
/// expired, read the rest. Only the read answers.
fn fill(pipe: &mut redis::Pipeline, key: &str, members: &[&str]) {
    let now = chrono::Utc::now().timestamp_millis();
    let expires = now + i64::try_from(TTL.as_millis()).unwrap_or(i64::MAX);
    for member in members {
        pipe.cmd("ZADD").arg(key).arg(expires).arg(*member).ignore();
    }
    if !members.is_empty() {
        pipe.cmd("PEXPIRE")
            .arg(key)
            .arg(u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX))
            .ignore();
    }
    pipe.cmd("ZREMRANGEBYSCORE")
        .arg(key)
        .arg("-inf")
        .arg(now)
        .ignore();
    pipe.cmd("ZRANGE").arg(key).arg(0).arg(-1);
}

/// The viewers in a set's members, each user once, in name order.
fn distinct_viewers(members: &[String]) -> Vec<Viewer> {
    let mut viewers: Vec<Viewer> = members
        .iter()
        .filter_map(|m| serde_json::from_str::<Entry>(m).ok())
        .map(|e| Viewer {
            user_id: e.user_id,
            name: e.name,
        })
        .collect();
    // One per user (their sockets may carry names from before a rename), then by name.
    viewers.sort_by_key(|v| v.user_id);
    viewers.dedup_by_key(|v| v.user_id);
    viewers.sort_by(|a, b| a.name.cmp(&b.name).then(a.user_id.cmp(&b.user_id)));
    viewers
}

/// Sends the conversation's viewers to its org's sockets on every pod.
async fn announce(
    socket: &SocketRef<Adapter>,
    org_id: Uuid,
    conversation_id: Uuid,
    viewers: &[Viewer],
) {
    let event = PresenceEvent {
        conversation_id,
        viewers: viewers.to_vec(),
        ttl_secs: TTL.as_secs(),
    };
    if let Err(e) = socket
        .within(org_room(org_id))
        .emit("presence", &event)
        .await
    {
        tracing::debug!(error = %e, "presence not announced");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewers_are_distinct_users_and_skip_garbage() {
        let a = Uuid::new_v4();
        let entry = |sid: &str, user_id, name: &str| {
            serde_json::to_string(&Entry {
                sid: sid.into(),
                user_id,
                name: name.into(),
            })
            .expect("an entry serialises")
        };
        let members = vec![
            entry("s1", a, "Ann"),
            entry("s2", a, "Ann"),
            "not json".into(),
        ];
        assert_eq!(
            distinct_viewers(&members),
            vec![Viewer {
                user_id: a,
                name: "Ann".into()
            }]
        );
    }

    #[test]
    fn switching_conversations_is_limited_per_window() {
        let mut state = State::default();
        for _ in 0..CHANGES_PER_WINDOW {
            assert!(state.allow_change());
        }
        assert!(!state.allow_change());
        state.window = Some(std::time::Instant::now() - CHANGE_WINDOW);
        assert!(state.allow_change(), "a new window starts afresh");
    }

    #[test]
    fn viewing_payload_is_strict() {
        assert!(
            serde_json::from_value::<ViewingRequest>(serde_json::json!({"conversation_id": "x"}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<ViewingRequest>(
                serde_json::json!({"conversation_id": Uuid::nil(), "extra": 1})
            )
            .is_err()
        );
    }
}
