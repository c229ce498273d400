//! The Socket.IO handshake: `auth: {token}` carries the login JWT; a refused socket gets a
//! `connect_error` whose message says why; an accepted one joins its rooms.
//!
//! Rooms are always scoped to one org, so no emit can reach another org's sockets:
//! `org:{org_id}` for every membership, and `org:{org_id}:experts` where the user is an
//! expert. (SPEC §3 names the latter `experts`; an unscoped room would mix orgs the first
//! time anything is emitted to it, so it is scoped like the others.)
//!
//! A socket lives no longer than the token it was admitted with: it is closed when the token
//! expires, and when the token is revoked (a logout, a logout everywhere, a deactivation, a
//! membership removal). Each socket joins `user:{user_id}`, which nothing is ever emitted
//! to; it is how a revocation closes the user's sockets on every pod at once (through the
//! Redis adapter). That broadcast can be missed, so each pod also re-checks its own sockets
//! every few seconds ([`crate::sessions`]).
//!
//! A handshake reads the user's standing (token version, deactivation, logged-out tokens,
//! memberships) to know its rooms, joins them, and then reads it again: a removal that
//! committed between the first read and the join (whose broadcast found no socket to close)
//! is seen by the second read, which refuses the socket and takes it out of the rooms; one
//! that commits after the second read finds a socket the pod's session check knows about.
//! Two reads per handshake are the price of having no window in which a removed member's
//! socket sits in the org's room.
use crate::Adapter;
use serde::Deserialize;
use socketioxide::extract::{SocketRef, TryData};
use std::sync::Arc;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_store::PgPool;
use switchboard_store::users::{self, Membership, Revocation};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Well-formed and correctly signed, but past its expiry.
    Expired,
    /// Anything else: bad signature, malformed, wrong algorithm, missing claims.
    Invalid,
}

/// What a valid token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenClaims {
    /// The user.
    pub user_id: Uuid,
    /// When the token expires (seconds since the epoch); the socket is closed then.
    pub expires_at: i64,
    /// The user's token version when the token was issued; an older one than the user's
    /// current version is revoked.
    pub version: i64,
    /// The token's id; revoked when on the logout denylist.
    pub jti: Uuid,
}

/// Verifies a login token. The API owns the JWT keys; realtime only needs this one question
/// answered.
pub type TokenVerifier = Arc<dyn Fn(&str) -> Result<TokenClaims, TokenError> + Send + Sync>;

/// The room of every socket of one user (never emitted to; see the module docs).
pub fn user_room(user_id: Uuid) -> String {
    format!("user:{user_id}")
}

/// Cancelled when the socket disconnects, which ends its expiry timer.
#[derive(Clone)]
struct Expiry(CancellationToken);

/// The room of every socket of `org_id`.
pub fn org_room(org_id: Uuid) -> String {
    format!("org:{org_id}")
}

/// The room of the experts of `org_id`.
pub fn experts_room(org_id: Uuid) -> String {
    format!("org:{org_id}:experts")
}

/// The rooms a user with these memberships joins.
pub fn rooms_for(memberships: &[Membership]) -> Vec<String> {
    let mut rooms = Vec::with_capacity(memberships.len() * 2);
    for m in memberships {
        rooms.push(org_room(m.org_id));
        if m.role == Role::Expert {
            rooms.push(experts_room(m.org_id));
        }
    }
    rooms
}

#[derive(Debug, Deserialize)]
pub(crate) struct Auth {
    #[serde(default)]
    token: Option<String>,
}

/// A refused handshake; `Display` is the `connect_error` message the client sees.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("authentication required: connect with auth: {{ token: <JWT from POST /auth/login> }}")]
    MissingToken,
    #[error("token expired: log in again")]
    Expired,
    #[error("invalid token")]
    Invalid,
    #[error("this user belongs to no org")]
    NoOrg,
    #[error("session revoked ({}): log in again", .0.as_str())]
    Revoked(Revocation),
    #[error("memberships changed while connecting; connect again")]
    MembershipsChanged,
    #[error("temporarily unavailable, retry shortly")]
    Unavailable,
    #[error("this server is shutting down; connect again")]
    ShuttingDown,
    #[error("too many open connections for this user; close one and connect again")]
    TooManyForUser,
    #[error("too many open connections from this address; close one and connect again")]
    TooManyForAddress,
}

/// What the handshake needs: the token check, Postgres for the user's standing, the
/// tracker its expiry timers run on, and the tests' hold point.
pub(crate) struct Gate {
    pub(crate) db: PgPool,
    pub(crate) verify: TokenVerifier,
    pub(crate) tracker: TaskTracker,
    pub(crate) hold: HoldPoint,
    pub(crate) caps: crate::caps::SocketCaps,
}

impl Gate {
    /// The connect middleware: the standing is read fresh from Postgres, so a change made on
    /// any pod applies to the next connection; read again once the rooms are joined (see
    /// the module docs).
    pub(crate) async fn admit(
        &self,
        socket: &SocketRef<Adapter>,
        auth: TryData<Auth>,
    ) -> Result<(), Refusal> {
        let token = auth
            .0
            .ok()
            .and_then(|a| a.token)
            .filter(|t| !t.trim().is_empty())
            .ok_or(Refusal::MissingToken)?;
        let claims = (self.verify)(token.trim()).map_err(|e| match e {
            TokenError::Expired => Refusal::Expired,
            TokenError::Invalid => Refusal::Invalid,
        })?;
        let user_id = claims.user_id;
        // Counted before any database read: a client over its cap costs nothing more.
        let address = socket
            .req_parts()
            .extensions
            .get::<crate::caps::ClientAddress>()
            .map(|a| a.0.clone());
        let ticket = self
            .caps
            .take(user_id, address.as_deref())
            .map_err(|full| match full {
                crate::caps::Full::User => Refusal::TooManyForUser,
                crate::caps::Full::Address => Refusal::TooManyForAddress,
            })?;
        let memberships = self.memberships(&claims).await?;
        if memberships.is_empty() {
            return Err(Refusal::NoOrg);
        }
        let mut rooms = rooms_for(&memberships);
        rooms.push(user_room(user_id));
        socket.join(rooms);
        self.hold.pass().await;
        let now = match self.memberships(&claims).await {
            Ok(now) => now,
            Err(refusal) => {
                socket.leave_all();
                return Err(refusal);
            }
        };
        if !memberships.iter().all(|m| now.contains(m)) {
            socket.leave_all();
            return Err(Refusal::MembershipsChanged);
        }
        socket.extensions.insert(crate::sessions::Session {
            user_id,
            version: claims.version,
            jti: claims.jti,
            memberships: memberships.into(),
        });
        self.close_at_expiry(socket, claims.expires_at);
        // The place is given back when the socket, and its extensions, are dropped.
        socket.extensions.insert(ticket);
        tracing::debug!(%user_id, sid = %socket.id, "socket admitted");
        Ok(())
    }

    /// The memberships the token gives access to now, or why it gives none.
    async fn memberships(&self, claims: &TokenClaims) -> Result<Vec<Membership>, Refusal> {
        let standing = users::standing(&self.db, claims.user_id)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "socket handshake could not read the user's standing");
                Refusal::Unavailable
            })?
            .ok_or(Refusal::Revoked(Revocation::UserGone))?;
        standing
            .admit(claims.version, claims.jti)
            .map(<[Membership]>::to_vec)
            .map_err(Refusal::Revoked)
    }

    /// Closes `socket` when its token expires, unless it disconnects first.
    fn close_at_expiry(&self, socket: &SocketRef<Adapter>, expires_at: i64) {
        let left = u64::try_from(expires_at - chrono::Utc::now().timestamp()).unwrap_or(0);
        let stop = CancellationToken::new();
        socket.extensions.insert(Expiry(stop.clone()));
        let socket = socket.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep(Duration::from_secs(left)) => {
                    tracing::debug!(sid = %socket.id, "token expired: closing the socket");
                    metrics::counter!("realtime_sockets_expired_total").increment(1);
                    let _ = socket.disconnect();
                }
            }
        });
    }
}

/// Where a test can stop the next handshake: after it joined its rooms, before it reads the
/// user's standing again, so a removal can be committed exactly in the window the second
/// read closes. Unarmed, passing it is one uncontended lock.
#[derive(Default)]
pub(crate) struct HoldPoint(std::sync::Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>);

impl HoldPoint {
    /// Arms the hold point for the next handshake.
    pub(crate) fn arm(&self) -> HandshakeHold {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((reached_tx, release_rx));
        HandshakeHold { reached, release }
    }

    async fn pass(&self) {
        let armed = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some((reached, release)) = armed {
            let _ = reached.send(());
            let _ = release.await;
        }
    }
}

/// A handshake stopped at its hold point (tests only): see [`crate::Realtime::hold_next_handshake`].
#[derive(Debug)]
pub struct HandshakeHold {
    reached: oneshot::Receiver<()>,
    release: oneshot::Sender<()>,
}

impl HandshakeHold {
    /// Waits up to `wait` until a handshake has joined its rooms and stopped; `false` if none
    /// did.
    pub async fn reached(&mut self, wait: Duration) -> bool {
        matches!(
            tokio::time::timeout(wait, &mut self.reached).await,
            Ok(Ok(()))
        )
    }

    /// Lets the stopped handshake go on to its second read.
    pub fn release(self) {
        let _ = self.release.send(());
    }
}

/// Wraps [`Gate::admit`] as a socketioxide connect middleware.
pub(crate) fn middleware(
    gate: Arc<Gate>,
) -> impl Fn(
    SocketRef<Adapter>,
    TryData<Auth>,
) -> futures::future::BoxFuture<'static, Result<(), Refusal>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |socket, auth| {
        let gate = gate.clone();
        Box::pin(async move {
            let outcome = gate.admit(&socket, auth).await;
            if let Err(refusal) = &outcome {
                metrics::counter!("realtime_handshake_refused_total").increment(1);
                tracing::debug!(reason = %refusal, "socket refused");
            }
            outcome
        })
    }
}

/// The middleware of a pod whose sockets were closed for shutdown: it admits nobody.
pub(crate) async fn closed() -> Result<(), Refusal> {
    Err(Refusal::ShuttingDown)
}

/// The connect handler, run once a socket is admitted: it counts the socket while it lives
/// and takes its presence (`viewing`, `stopped_viewing`), removed when it goes.
pub(crate) async fn on_connect(socket: SocketRef<Adapter>, presence: crate::presence::Presence) {
    metrics::gauge!("realtime_connected_sockets").increment(1.0);
    presence.attach(&socket);
    socket.on_disconnect(async move |socket: SocketRef<Adapter>| {
        metrics::gauge!("realtime_connected_sockets").decrement(1.0);
        if let Some(Expiry(stop)) = socket.extensions.get::<Expiry>() {
            stop.cancel();
        }
        presence.disconnected(&socket).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooms_are_scoped_per_org() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let rooms = rooms_for(&[
            Membership {
                org_id: a,
                role: Role::Admin,
            },
            Membership {
                org_id: b,
                role: Role::Expert,
            },
        ]);
        assert_eq!(
            rooms,
            vec![org_room(a), org_room(b), format!("org:{b}:experts")]
        );
    }
}

#[cfg(test)]
mod proptests;
