//! Orgs (tenants).

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use sqlx::types::Json;
use switchboard_domain::autopilot::Policy;
use uuid::Uuid;

/// An org row.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Org {
    /// Primary key.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Creates an org.
pub async fn create(pool: &PgPool, name: &str) -> Result<Org, StoreError> {
    sqlx::query_as("INSERT INTO orgs (name) VALUES ($1) RETURNING id, name, created_at")
        .bind(name)
        .fetch_one(pool)
        .await
        .map_err(StoreError::from)
}

/// Creates the org `id` named `name` unless it exists (a fixed id: the demo seed).
pub async fn ensure(pool: &PgPool, id: Uuid, name: &str) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO orgs (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
        .bind(id)
        .bind(name)
        .execute(pool)
        .await?;
    Ok(())
}

/// Fetches an org by id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<Org>, StoreError> {
    Ok(
        sqlx::query_as("SELECT id, name, created_at FROM orgs WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// An org's settings.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct OrgSettings {
    /// The org.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// IANA time zone its daily and weekly reports are cut in (default `UTC`).
    pub time_zone: String,
    /// Who hears about the org's dead replies.
    pub account_manager_email: Option<String>,
    /// Minutes an expert has to answer a customer message (a queue item's `sla_due_at`).
    pub sla_minutes: i32,
    /// Days the org's conversations are kept (`None`: until erased).
    pub retention_days: Option<i32>,
}

/// An org's settings.
pub async fn settings(pool: &PgPool, id: Uuid) -> Result<Option<OrgSettings>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, name, time_zone, account_manager_email, sla_minutes, retention_days
         FROM orgs WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// What a settings update changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct SettingsChange<'a> {
    /// A new IANA time zone (the caller has checked the name).
    pub time_zone: Option<&'a str>,
    /// A new account manager address, or `Some(None)` to clear it.
    pub account_manager_email: Option<Option<&'a str>>,
    /// A new SLA in minutes (the caller has checked the bounds).
    pub sla_minutes: Option<i32>,
    /// A new retention window in days, or `Some(None)` to keep everything (the caller has
    /// checked the bounds).
    pub retention_days: Option<Option<i32>>,
}

/// Updates an org's settings; `None` when the org is gone.
pub async fn update_settings<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: Uuid,
    change: &SettingsChange<'_>,
) -> Result<Option<OrgSettings>, StoreError> {
    sqlx::query_as(
        "UPDATE orgs SET time_zone = COALESCE($2, time_zone),
                account_manager_email = CASE WHEN $3 THEN $4 ELSE account_manager_email END,
                sla_minutes = COALESCE($5, sla_minutes),
                retention_days = CASE WHEN $6 THEN $7 ELSE retention_days END
         WHERE id = $1 RETURNING id, name, time_zone, account_manager_email, sla_minutes,
                   retention_days",
    )
    .bind(id)
    .bind(change.time_zone)
    .bind(change.account_manager_email.is_some())
    .bind(change.account_manager_email.flatten())
    .bind(change.sla_minutes)
    .bind(change.retention_days.is_some())
    .bind(change.retention_days.flatten())
    .fetch_optional(db)
    .await
    .map_err(StoreError::from)
}

/// The address that hears about `id`'s dead replies, if set.
pub async fn account_manager(pool: &PgPool, id: Uuid) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT account_manager_email FROM orgs WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?
            .flatten(),
    )
}

/// Whether a read of an org's row locks it until the transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// A plain read: what is committed now.
    Unlocked,
    /// `FOR UPDATE`: for a change that records what it replaced, so that two changes at once
    /// each see the other's result and neither's "before" is lost.
    ForUpdate,
}

/// The org's autopilot policy: `None` for no such org; a policy never set reads as the
/// default (off).
pub async fn autopilot<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: Uuid,
    lock: Lock,
) -> Result<Option<Policy>, StoreError> {
    let sql = match lock {
        Lock::Unlocked => "SELECT autopilot FROM orgs WHERE id = $1",
        Lock::ForUpdate => "SELECT autopilot FROM orgs WHERE id = $1 FOR UPDATE",
    };
    let row: Option<(Option<Json<Policy>>,)> =
        sqlx::query_as(sql).bind(id).fetch_optional(db).await?;
    Ok(row.map(|(p,)| p.map(|Json(p)| p).unwrap_or_default()))
}

/// What the autopilot reads, besides the draft, to judge a draft for a conversation: the
/// org's policy as stored (to be matched at commit) and its time zone, the live item's
/// version, state and flag, whether the customer has had a conversation before, and the
/// org's saved replies (texts a draft may quote links and numbers from).
#[allow(missing_docs)] // the columns of the statement below
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AutopilotFacts {
    pub policy: Option<serde_json::Value>,
    pub time_zone: String,
    pub item_version: Option<i32>,
    pub item_status: Option<switchboard_domain::QueueStatus>,
    pub flagged: bool,
    pub first_conversation: bool,
    pub saved_replies: Vec<String>,
}

/// [`AutopilotFacts`] for `conversation_id`; `None` when it no longer exists.
pub async fn autopilot_facts(
    pool: &PgPool,
    conversation_id: Uuid,
) -> Result<Option<AutopilotFacts>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT o.autopilot AS policy, o.time_zone, q.version AS item_version,
                q.status AS item_status, COALESCE(q.flagged_for_review, false) AS flagged,
                NOT EXISTS (SELECT 1 FROM conversations p
                            WHERE p.customer_id = c.customer_id AND p.id <> c.id) AS first_conversation,
                ARRAY(SELECT s.body FROM saved_replies s WHERE s.org_id = c.org_id) AS saved_replies
         FROM conversations c JOIN orgs o ON o.id = c.org_id
         LEFT JOIN expert_queue q ON q.conversation_id = c.id AND q.status <> 'resolved'
         WHERE c.id = $1",
    )
    .bind(conversation_id)
    .fetch_optional(pool)
    .await?)
}

/// Stores the org's policy.
pub async fn set_autopilot<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: Uuid,
    policy: &Policy,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE orgs SET autopilot = $2 WHERE id = $1")
        .bind(id)
        .bind(Json(policy))
        .execute(db)
        .await?;
    Ok(())
}

/// Turns every org's autopilot off (`AUTOPILOT=off`), keeping its rules, with an audit row
/// for each org it was on for, in one statement; those orgs.
pub async fn pause_every_autopilot<'e>(
    db: impl sqlx::PgExecutor<'e>,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "WITH paused AS (
           UPDATE orgs SET autopilot = jsonb_set(autopilot, '{enabled}', 'false')
            WHERE (autopilot ->> 'enabled')::boolean
            RETURNING id),
         audited AS (
           INSERT INTO audit_log (org_id, action, target_type, target_id, details)
           SELECT id, 'autopilot.paused', 'org', id, '{\"by\": \"AUTOPILOT=off\"}'::jsonb FROM paused)
         SELECT id FROM paused",
    )
    .fetch_all(db)
    .await?)
}
