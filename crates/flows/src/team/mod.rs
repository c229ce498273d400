//! The team: an org's members ([`members`]), invitations into it ([`invitations`]), a
//! user's password ([`passwords`]) and sessions ([`sessions`]). Each change is one
//! transaction with its audit row; a change that ends sessions (a removal, a deactivation,
//! a new password, logging out everywhere) bumps the user's token version in it, and after
//! the commit their sockets are closed on every pod ([`Sessions`]).
//!
//! What the caller proves first stays the caller's: that the password given is right (under
//! its rate limits and hashing turns), and the hash of a new one; the flows take the
//! verified user and the finished hash.

pub mod invitations;
pub mod members;
pub mod passwords;
pub mod sessions;

use crate::Deps;
use async_trait::async_trait;
use switchboard_channels::system_mail::Mailer;
use switchboard_store::StoreError;
use switchboard_store::audit::Actor;
use switchboard_store::password_resets::Refusal;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// The pods' sockets, which close a user's sessions once their tokens are revoked.
#[async_trait]
pub trait Sessions: Send + Sync {
    /// Closes every socket of `user_id` on every pod.
    async fn disconnect_user(&self, user_id: Uuid);
}

/// What the team's flows need beside [`Deps`]: the pod's system mailer, the console's
/// address for the links mailed, the pod's sockets, and its task tracker (a mail sent
/// after the answer must not outlive the pod's shutdown).
#[derive(Clone, Copy)]
pub struct Team<'a> {
    /// The flows' dependencies.
    pub deps: &'a Deps,
    /// Invitations and reset links; may be unconfigured.
    pub mailer: &'a Mailer,
    /// `PUBLIC_BASE_URL`, where the console is served.
    pub console_url: &'a str,
    /// Closes revoked sessions.
    pub sessions: &'a dyn Sessions,
    /// Runs the mail of a password reset after its answer.
    pub tasks: &'a TaskTracker,
}

impl Team<'_> {
    /// `{PUBLIC_BASE_URL}/#/{route}`: a console page.
    pub fn console_link(&self, route: &str) -> String {
        format!("{}/#/{route}", self.console_url.trim_end_matches('/'))
    }
}

/// The audit actor of a user acting on their own account or sessions (no org).
fn own(user_id: Uuid, request_id: Option<&str>) -> Actor<'_> {
    Actor {
        org_id: None,
        user_id: Some(user_id),
        request_id,
    }
}

/// Why a team change was refused.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    /// The org's last active admin would be demoted, deactivated or removed.
    #[error("an org keeps at least one active admin: make someone else admin first")]
    LastAdmin,
    /// The user is not a member of the org.
    #[error("not a member")]
    NotMember,
    /// The invited address is a member of the org already.
    #[error("this address is a member of the org already")]
    AddressIsMember,
    /// The org has no such pending invitation.
    #[error("no such pending invitation")]
    NoInvitation,
    /// The invitation was accepted meanwhile.
    #[error("this invitation was accepted already: log in instead")]
    InvitationUsed,
    /// The invitee is a member of the org already.
    #[error("you are a member of this org already: log in instead")]
    AlreadyMember,
    /// An account with the invited address was made between the check and the insert.
    #[error("an account with this address was just made: try again")]
    AccountJustMade,
    /// The password changed since the caller checked the current one.
    #[error("the password changed meanwhile; log in again")]
    PasswordChanged,
    /// The user is gone.
    #[error("user no longer exists")]
    UserGone,
    /// A reset link that cannot be used.
    #[error("the reset link cannot be used: {0:?}")]
    Reset(Refusal),
    /// Checking a password stopped before it finished.
    #[error("password check: {0}")]
    Hashing(#[from] tokio::task::JoinError),
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
}
