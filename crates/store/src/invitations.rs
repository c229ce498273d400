//! Invitations to join an org, and the one-time tokens that invitation and password-reset
//! links carry. A token is 32 random bytes, sent once (in the link) and stored only as its
//! SHA-256: whoever reads the table cannot use what they read.
//!
//! Accepting is one `UPDATE … WHERE <still pending> RETURNING` ([`accept`]), so a link
//! clicked twice, or on two pods at once, makes one member.

use crate::StoreError;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use rand::RngCore;
use rand::rngs::OsRng;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgExecutor;
use switchboard_domain::Role;
use uuid::Uuid;

/// A new one-time token: the text for the link, and the hash to store.
pub fn new_token() -> (String, Vec<u8>) {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    let token = URL_SAFE_NO_PAD.encode(bytes);
    let hash = token_hash(&token);
    (token, hash)
}

/// The stored form of a token someone presents.
pub fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.trim().as_bytes()).to_vec()
}

/// An invitation as admins see it (never the token).
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Invitation {
    /// Primary key.
    pub id: Uuid,
    /// The org.
    pub org_id: Uuid,
    /// The address invited.
    pub email: String,
    /// The role the invitee gets.
    pub role: Role,
    /// The admin who invited.
    pub invited_by: Option<Uuid>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// The link stops working then.
    pub expires_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, org_id, email, role, invited_by, created_at, expires_at";

/// Creates an invitation, revoking any open one for the same org and address first (the
/// newest link is the one that works). Run it in a transaction: the revocation and the
/// insert go together, and a concurrent invitation for the same address is a
/// [`StoreError::Conflict`] (`invitations_open`).
pub async fn create(
    tx: &mut sqlx::PgConnection,
    org_id: Uuid,
    email: &str,
    role: Role,
    invited_by: Uuid,
    token_sha256: &[u8],
    expires_at: DateTime<Utc>,
) -> Result<Invitation, StoreError> {
    sqlx::query(
        "UPDATE invitations SET revoked_at = now()
         WHERE org_id = $1 AND lower(email) = lower($2)
           AND accepted_at IS NULL AND revoked_at IS NULL",
    )
    .bind(org_id)
    .bind(email)
    .execute(&mut *tx)
    .await?;
    Ok(sqlx::query_as(&format!(
        "INSERT INTO invitations (org_id, email, role, invited_by, token_sha256, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
    ))
    .bind(org_id)
    .bind(email)
    .bind(role)
    .bind(invited_by)
    .bind(token_sha256)
    .bind(expires_at)
    .fetch_one(&mut *tx)
    .await?)
}

/// The pending (not accepted, revoked or expired) invitations of `org_id`, newest first.
pub async fn pending<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
) -> Result<Vec<Invitation>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM invitations
         WHERE org_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()
         ORDER BY created_at DESC"
    ))
    .bind(org_id)
    .fetch_all(db)
    .await?)
}

/// Revokes a pending invitation of `org_id`; `None` when there is no such pending one.
pub async fn revoke<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    id: Uuid,
) -> Result<Option<Invitation>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "UPDATE invitations SET revoked_at = now()
         WHERE org_id = $1 AND id = $2 AND accepted_at IS NULL AND revoked_at IS NULL
         RETURNING {COLUMNS}"
    ))
    .bind(org_id)
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// Where an invitation presented by its token stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It can be accepted.
    Pending,
    /// Already accepted (each link works once).
    Used,
    /// Past its expiry.
    Expired,
    /// Revoked by an admin, or replaced by a newer invitation.
    Revoked,
}

/// An invitation found by its token, with the org's name for the accept page.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Found {
    /// The invitation.
    #[sqlx(flatten)]
    pub invitation: Invitation,
    /// The org's name.
    pub org_name: String,
    /// Whether accepted.
    pub accepted: bool,
    /// Whether revoked.
    pub revoked: bool,
    /// Whether expired.
    pub expired: bool,
}

impl Found {
    /// Where it stands.
    pub fn standing(&self) -> Standing {
        if self.accepted {
            Standing::Used
        } else if self.revoked {
            Standing::Revoked
        } else if self.expired {
            Standing::Expired
        } else {
            Standing::Pending
        }
    }
}

/// The invitation a token belongs to, whatever its standing; `None` for an unknown token.
pub async fn find<'e>(db: impl PgExecutor<'e>, token: &str) -> Result<Option<Found>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT i.id, i.org_id, i.email, i.role, i.invited_by, i.created_at, i.expires_at,
                o.name AS org_name, i.accepted_at IS NOT NULL AS accepted,
                i.revoked_at IS NOT NULL AS revoked, i.expires_at <= now() AS expired
         FROM invitations i JOIN orgs o ON o.id = i.org_id WHERE i.token_sha256 = $1",
    )
    .bind(token_hash(token))
    .fetch_optional(db)
    .await?)
}

/// Marks the invitation accepted by `user_id`, if it is still pending; `false` when it no
/// longer is (accepted, revoked or expired since it was read).
pub async fn accept<'e>(
    db: impl PgExecutor<'e>,
    id: Uuid,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE invitations SET accepted_at = now(), accepted_by = $2
         WHERE id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()",
    )
    .bind(id)
    .bind(user_id)
    .execute(db)
    .await?
    .rows_affected();
    Ok(done > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_stored_hashed() {
        let (a, hash_a) = new_token();
        let (b, _) = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43, "32 bytes, base64url without padding");
        assert_eq!(hash_a, token_hash(&a));
        // SHA-256 of "abc" (FIPS 180-2): the stored value is the digest, not the token.
        assert_eq!(
            hex::encode(token_hash("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
