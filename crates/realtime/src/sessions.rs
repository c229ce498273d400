//! Each pod's check of its own sockets: a revocation holds within seconds whatever Redis is
//! doing.
//!
//! A revocation (a logout, a logout everywhere, a deactivation, a membership removal) is a
//! row in Postgres, and the pod that makes it closes the user's sockets on every pod through
//! the Redis adapter. That broadcast is best effort: Redis may be away at that moment, the
//! pod may die between its commit and its broadcast (or the CLI made the change and has no
//! adapter at all), and a handshake in flight has no socket to close yet. Whatever was
//! missed, every pod re-checks the sockets it holds every [`CHECK_INTERVAL`] against
//! Postgres and closes those whose token is revoked or whose user lost one of the
//! memberships the socket was admitted with, so a socket outlives its revocation by at most
//! one interval and one query.
//!
//! One check is one statement for all of the pod's sockets (`users::standings` over the
//! distinct users), never one per socket, and none when the pod holds no socket: ten
//! thousand sockets of a few users cost one small query every two seconds per pod.

use crate::Adapter;
use socketioxide::SocketIo;
use socketioxide::extract::SocketRef;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_domain::periodic;
use switchboard_store::users::{self, Membership, Revocation};
use switchboard_store::{PgPool, StoreError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// How often each pod re-checks its sockets: with the query, well within the 5 s SPEC §11
/// allows a revoked session's socket.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// What a socket was admitted with (a socket extension, set by the handshake).
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) user_id: Uuid,
    pub(crate) version: i64,
    pub(crate) jti: Uuid,
    /// The memberships whose rooms the socket joined.
    pub(crate) memberships: Arc<[Membership]>,
}

/// What one check found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionCheck {
    /// Admitted sockets on this pod.
    pub sockets: usize,
    /// Their distinct users (the size of the one query).
    pub users: usize,
    /// Sockets closed by this check.
    pub closed: usize,
}

/// Why a check closes a socket (a metric label).
fn verdict(session: &Session, standing: Option<&users::Standing>) -> Result<(), &'static str> {
    let standing = standing.ok_or(Revocation::UserGone.as_str())?;
    let now = standing
        .admit(session.version, session.jti)
        .map_err(Revocation::as_str)?;
    if session.memberships.iter().all(|m| now.contains(m)) {
        Ok(())
    } else {
        Err("membership_lost")
    }
}

/// Checks every admitted socket of this pod once; closes the revoked ones.
pub(crate) async fn check(io: &SocketIo<Adapter>, db: &PgPool) -> Result<SessionCheck, StoreError> {
    let started = Instant::now();
    let sockets: Vec<(SocketRef<Adapter>, Session)> = io
        .of("/")
        .map(|ns| ns.local().sockets())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| {
            let session = s.extensions.get::<Session>()?;
            Some((s, session))
        })
        .collect();
    if sockets.is_empty() {
        return Ok(SessionCheck::default());
    }
    let user_ids: Vec<Uuid> = sockets
        .iter()
        .map(|(_, s)| s.user_id)
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let standings = users::standings(db, &user_ids).await?;
    let mut closed = 0;
    for (socket, session) in &sockets {
        if let Err(reason) = verdict(session, standings.get(&session.user_id)) {
            tracing::info!(user_id = %session.user_id, sid = %socket.id, reason, "closing a revoked socket");
            metrics::counter!("realtime_sockets_revoked_total", "reason" => reason).increment(1);
            // Out of the rooms first: nothing more reaches it even if the disconnect packet
            // cannot be queued now (the next check tries the disconnect again).
            socket.leave_all();
            let _ = socket.clone().disconnect();
            closed += 1;
        }
    }
    metrics::histogram!("realtime_session_check_seconds").record(started.elapsed().as_secs_f64());
    Ok(SessionCheck {
        sockets: sockets.len(),
        users: user_ids.len(),
        closed,
    })
}

/// Runs [`check`] every `interval` until `token` is cancelled. A failed check (Postgres
/// away) closes nothing and is logged once per outage.
pub(crate) fn spawn(
    io: SocketIo<Adapter>,
    db: PgPool,
    interval: Duration,
    token: CancellationToken,
    tracker: &TaskTracker,
) {
    periodic::every(
        "realtime session check",
        interval,
        &token,
        tracker,
        move || {
            let (io, db) = (io.clone(), db.clone());
            async move {
                check(&io, &db).await.map(drop).inspect_err(|_| {
                    metrics::counter!("realtime_session_checks_failed_total").increment(1);
                })
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_domain::Role;

    fn session(orgs: &[(Uuid, Role)]) -> Session {
        Session {
            user_id: Uuid::new_v4(),
            version: 3,
            jti: Uuid::new_v4(),
            memberships: orgs
                .iter()
                .map(|&(org_id, role)| Membership { org_id, role })
                .collect(),
        }
    }

    fn standing(version: i64, orgs: &[(Uuid, Role)], revoked: Vec<Uuid>) -> users::Standing {
        users::Standing {
            token_version: version,
            deactivated: false,
            memberships: orgs
                .iter()
                .map(|&(org_id, role)| Membership { org_id, role })
                .collect(),
            revoked,
        }
    }

    #[test]
    fn a_socket_is_closed_for_what_its_token_or_memberships_lost() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let s = session(&[(a, Role::Expert)]);
        let both = [(a, Role::Expert), (b, Role::Admin)];
        assert_eq!(verdict(&s, Some(&standing(3, &both, vec![]))), Ok(()));
        // A newer login after a sweep's read is not older than the user's version.
        assert_eq!(verdict(&s, Some(&standing(2, &both, vec![]))), Ok(()));
        assert_eq!(
            verdict(&s, Some(&standing(4, &both, vec![]))),
            Err("superseded")
        );
        assert_eq!(
            verdict(&s, Some(&standing(3, &both, vec![s.jti]))),
            Err("logged_out")
        );
        assert_eq!(
            verdict(&s, Some(&standing(3, &[(b, Role::Admin)], vec![]))),
            Err("membership_lost")
        );
        assert_eq!(
            verdict(&s, Some(&standing(3, &[(a, Role::Admin)], vec![]))),
            Err("membership_lost"),
            "a changed role changes the rooms"
        );
        let mut gone = standing(3, &both, vec![]);
        gone.deactivated = true;
        assert_eq!(verdict(&s, Some(&gone)), Err("deactivated"));
        assert_eq!(verdict(&s, None), Err("user_gone"));
    }
}
