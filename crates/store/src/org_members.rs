//! An org's members as its admins manage them: the list, role changes and per-org
//! deactivation, and the rule that an org always keeps an active admin.
//!
//! The last-admin rule is a check across rows (how many active admins are left), which two
//! admins demoting each other on two pods would both pass if each only read. So every change
//! that can take an admin away first locks the org's row ([`lock_org`]) in its transaction:
//! such changes to one org run one after another, and each sees the other's result.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use switchboard_domain::Role;
use uuid::Uuid;

/// One member of an org, as the Members page lists them.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct OrgMember {
    /// The user.
    pub user_id: Uuid,
    /// Login address.
    pub email: String,
    /// Optional display name.
    pub display_name: Option<String>,
    /// The role in this org.
    pub role: Role,
    /// When they were deactivated in this org; `None` when active.
    pub deactivated_at: Option<DateTime<Utc>>,
    /// Whether an operator locked the user out of every org (`admin deactivate-user`).
    pub account_deactivated: bool,
    /// When they joined this org.
    pub joined_at: DateTime<Utc>,
}

const SELECT: &str = "SELECT m.user_id, u.email, u.display_name, m.role, m.deactivated_at,
        u.deactivated_at IS NOT NULL AS account_deactivated, m.created_at AS joined_at
     FROM org_members m JOIN users u ON u.id = m.user_id";

/// The members of `org_id`, oldest first.
pub async fn list<'e>(db: impl PgExecutor<'e>, org_id: Uuid) -> Result<Vec<OrgMember>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "{SELECT} WHERE m.org_id = $1 ORDER BY m.created_at, u.email"
    ))
    .bind(org_id)
    .fetch_all(db)
    .await?)
}

/// One member of `org_id`, `None` when `user_id` is not one.
pub async fn get<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<Option<OrgMember>, StoreError> {
    Ok(
        sqlx::query_as(&format!("{SELECT} WHERE m.org_id = $1 AND m.user_id = $2"))
            .bind(org_id)
            .bind(user_id)
            .fetch_optional(db)
            .await?,
    )
}

/// Locks `org_id`'s row until the transaction ends, serialising the changes that could leave
/// it without an active admin (see the module header). `NO KEY UPDATE`, so inserts that only
/// reference the org (its conversations, its members) are not held up.
pub async fn lock_org(tx: &mut PgConnection, org_id: Uuid) -> Result<(), StoreError> {
    sqlx::query("SELECT 1 FROM orgs WHERE id = $1 FOR NO KEY UPDATE")
        .bind(org_id)
        .fetch_optional(tx)
        .await?;
    Ok(())
}

/// Whether `user_id` is the only active admin of `org_id` (read under [`lock_org`]).
pub async fn is_last_admin(
    tx: &mut PgConnection,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    let others: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM org_members m JOIN users u ON u.id = m.user_id
         WHERE m.org_id = $1 AND m.user_id <> $2 AND m.role = 'admin'
           AND m.deactivated_at IS NULL AND u.deactivated_at IS NULL",
    )
    .bind(org_id)
    .bind(user_id)
    .fetch_one(&mut *tx)
    .await?;
    let is_admin: Option<bool> = sqlx::query_scalar(
        "SELECT role = 'admin' AND deactivated_at IS NULL FROM org_members
         WHERE org_id = $1 AND user_id = $2",
    )
    .bind(org_id)
    .bind(user_id)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(is_admin == Some(true) && others == 0)
}

/// Sets a member's role and returns the one they had (the subquery reads the statement's
/// snapshot, from before the update); `None` when they are not a member. A role change does
/// not end sessions: each request reads the role afresh.
pub async fn set_role<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    user_id: Uuid,
    role: Role,
) -> Result<Option<Role>, StoreError> {
    Ok(sqlx::query_scalar(
        "UPDATE org_members SET role = $3 WHERE org_id = $1 AND user_id = $2
         RETURNING (SELECT role FROM org_members WHERE org_id = $1 AND user_id = $2)",
    )
    .bind(org_id)
    .bind(user_id)
    .bind(role)
    .fetch_optional(db)
    .await?)
}

/// Deactivates a member in `org_id` and bumps their token version in one statement (every
/// token they hold stops working; their other orgs stay theirs at the next login). Again on a
/// deactivated member changes nothing (a retry must not end their other orgs' sessions
/// again). `false` when they are not a member.
pub async fn deactivate<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "WITH m AS (UPDATE org_members SET deactivated_at = now()
                    WHERE org_id = $1 AND user_id = $2 AND deactivated_at IS NULL
                    RETURNING user_id),
              v AS (UPDATE users SET token_version = token_version + 1
                    WHERE id IN (SELECT user_id FROM m))
         SELECT EXISTS (SELECT 1 FROM org_members WHERE org_id = $1 AND user_id = $2)",
    )
    .bind(org_id)
    .bind(user_id)
    .fetch_one(db)
    .await?)
}

/// Lets a deactivated member back into `org_id` (at their next login). `false` when they are
/// not a member.
pub async fn reactivate<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    let changed = sqlx::query(
        "UPDATE org_members SET deactivated_at = NULL WHERE org_id = $1 AND user_id = $2",
    )
    .bind(org_id)
    .bind(user_id)
    .execute(db)
    .await?
    .rows_affected();
    Ok(changed > 0)
}

/// Adds `user_id` to `org_id` with `role`; `false` when they already were a member (left
/// as they are).
pub async fn add<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    user_id: Uuid,
    role: Role,
) -> Result<bool, StoreError> {
    let added = sqlx::query(
        "INSERT INTO org_members (org_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (org_id, user_id) DO NOTHING",
    )
    .bind(org_id)
    .bind(user_id)
    .bind(role)
    .execute(db)
    .await?
    .rows_affected();
    Ok(added > 0)
}

/// Whether `user_id` is a member of `org_id`, active or not.
pub async fn is_member<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM org_members WHERE org_id = $1 AND user_id = $2)",
    )
    .bind(org_id)
    .bind(user_id)
    .fetch_one(db)
    .await?)
}

/// The member of `org_id` whose login address is `email` (lower case), if any.
pub async fn find_by_email<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    email: &str,
) -> Result<Option<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT m.user_id FROM org_members m JOIN users u ON u.id = m.user_id
         WHERE m.org_id = $1 AND lower(u.email) = $2",
    )
    .bind(org_id)
    .bind(email)
    .fetch_optional(db)
    .await?)
}
