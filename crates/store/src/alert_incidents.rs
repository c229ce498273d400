//! `alert_incidents` and `alert_deliveries`: an incident is opened by the one `INSERT` that
//! the partial unique index on open `(kind, scope)` lets through, so exactly one pod opens
//! it and queues its deliveries in the same statement; a resolve is the one `UPDATE` that
//! finds it open, and queues a resolve for every sink that got the trigger. Deliveries are
//! claimed with `FOR UPDATE SKIP LOCKED` and a lease, like outbox rows; a resolve waits
//! until its sink's trigger is no longer pending, so no sink sees them out of order.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use std::time::Duration;
use switchboard_domain::alerts::{AlertKind, Severity};
use uuid::Uuid;

/// An incident to open.
#[derive(Debug, Clone)]
pub struct Opening<'a> {
    /// What it is about.
    pub kind: AlertKind,
    /// Which instance of it (`agent`, an org id, a job name, a pod id).
    pub scope: &'a str,
    /// The org it concerns, if one.
    pub org_id: Option<Uuid>,
    /// One line for a person.
    pub summary: &'a str,
    /// Figures behind it.
    pub details: &'a Value,
    /// The pod that saw it.
    pub raised_by: &'a str,
}

/// A delivery to queue with a trigger: the sink, and the address for `account_manager`.
#[derive(Debug, Clone)]
pub struct Target {
    /// `slack`, `pagerduty`, `webhook` or `account_manager`.
    pub sink: &'static str,
    /// The recipient, for mail.
    pub recipient: Option<String>,
}

/// Opens the incident unless one is open for its kind and scope, queueing a trigger per
/// target in the same statement; `Some(id)` when this call opened it. An incident already
/// open only has its `last_seen_at` moved.
pub async fn open(
    pool: &PgPool,
    opening: &Opening<'_>,
    targets: &[Target],
) -> Result<Option<Uuid>, StoreError> {
    let sinks: Vec<&str> = targets.iter().map(|t| t.sink).collect();
    let recipients: Vec<Option<&str>> = targets.iter().map(|t| t.recipient.as_deref()).collect();
    let opened: Option<Uuid> = sqlx::query_scalar(
        "WITH ins AS (
           INSERT INTO alert_incidents (kind, scope, org_id, severity, summary, details, raised_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (kind, scope) WHERE status = 'open' DO NOTHING
           RETURNING id
         ), d AS (
           INSERT INTO alert_deliveries (incident_id, sink, action, recipient)
           SELECT ins.id, t.sink, 'trigger', t.recipient
           FROM ins, unnest($8::text[], $9::text[]) AS t (sink, recipient)
         )
         SELECT id FROM ins",
    )
    .bind(opening.kind)
    .bind(opening.scope)
    .bind(opening.org_id)
    .bind(opening.kind.severity())
    .bind(opening.summary)
    .bind(opening.details)
    .bind(opening.raised_by)
    .bind(&sinks)
    .bind(&recipients)
    .fetch_optional(pool)
    .await?;
    if opened.is_none() {
        sqlx::query(
            "UPDATE alert_incidents SET last_seen_at = now()
             WHERE kind = $1 AND scope = $2 AND status = 'open'",
        )
        .bind(opening.kind)
        .bind(opening.scope)
        .execute(pool)
        .await?;
    }
    Ok(opened)
}

/// Resolves the open incidents of `kind` whose scope is `scope` (or, with `Except`, every
/// scope but those), queueing a resolve for each sink that got the trigger; returns the
/// resolved incidents' ids.
pub async fn resolve(
    pool: &PgPool,
    kind: AlertKind,
    scopes: Scopes<'_>,
) -> Result<Vec<Uuid>, StoreError> {
    let (only, except): (Option<&str>, &[String]) = match scopes {
        Scopes::Only(scope) => (Some(scope), &[]),
        Scopes::Except(keep) => (None, keep),
    };
    Ok(sqlx::query_scalar(
        "WITH r AS (
           UPDATE alert_incidents SET status = 'resolved', resolved_at = now()
           WHERE kind = $1 AND status = 'open'
             AND (scope = $2 OR ($2 IS NULL AND NOT scope = ANY($3::text[])))
           RETURNING id
         ), d AS (
           INSERT INTO alert_deliveries (incident_id, sink, action)
           SELECT DISTINCT r.id, t.sink, 'resolve'
           FROM r JOIN alert_deliveries t
             ON t.incident_id = r.id AND t.action = 'trigger' AND t.sink <> 'account_manager'
         )
         SELECT id FROM r",
    )
    .bind(kind)
    .bind(only)
    .bind(except)
    .fetch_all(pool)
    .await?)
}

/// Which incidents of a kind a resolve ends.
#[derive(Debug, Clone, Copy)]
pub enum Scopes<'a> {
    /// The one with this scope.
    Only(&'a str),
    /// Every one whose scope is not listed (the condition holds only for those listed).
    Except(&'a [String]),
}

/// A claimed delivery, with its incident.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Due {
    /// The delivery (the Standard Webhooks message id).
    pub id: Uuid,
    /// Where it goes.
    pub sink: String,
    /// `trigger` or `resolve`.
    pub action: String,
    /// The mail recipient.
    pub recipient: Option<String>,
    /// Attempts so far, this one included: the claim's token.
    pub attempts: i32,
    /// The incident.
    pub incident_id: Uuid,
    /// Its kind.
    pub kind: AlertKind,
    /// Its scope.
    pub scope: String,
    /// Its org.
    pub org_id: Option<Uuid>,
    /// Its severity.
    pub severity: Severity,
    /// Its summary.
    pub summary: String,
    /// Its details.
    pub details: Value,
    /// When it opened.
    pub opened_at: DateTime<Utc>,
    /// When it resolved.
    pub resolved_at: Option<DateTime<Utc>>,
}

/// Claims up to `limit` due deliveries for `lease`. A resolve is not due while its sink's
/// trigger is still pending.
pub async fn claim_due(pool: &PgPool, limit: i64, lease: Duration) -> Result<Vec<Due>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE alert_deliveries d
         SET attempts = d.attempts + 1, locked_until = now() + make_interval(secs => $2)
         FROM alert_incidents i
         WHERE i.id = d.incident_id AND d.id IN (
           SELECT x.id FROM alert_deliveries x
           WHERE x.status = 'pending' AND x.next_attempt_at <= now()
             AND (x.locked_until IS NULL OR x.locked_until < now())
             AND NOT (x.action = 'resolve' AND EXISTS (
               SELECT 1 FROM alert_deliveries t
               WHERE t.incident_id = x.incident_id AND t.sink = x.sink
                 AND t.action = 'trigger' AND t.status = 'pending'))
           ORDER BY x.next_attempt_at
           LIMIT $1
           FOR UPDATE OF x SKIP LOCKED)
         RETURNING d.id, d.sink, d.action, d.recipient, d.attempts, i.id AS incident_id, i.kind,
                   i.scope, i.org_id, i.severity, i.summary, i.details, i.opened_at,
                   i.resolved_at",
    )
    .bind(limit)
    .bind(lease.as_secs_f64())
    .fetch_all(pool)
    .await?)
}

/// What became of one attempt.
#[derive(Debug, Clone)]
pub enum Attempt<'a> {
    /// The sink took it.
    Sent,
    /// Worth another try after `after`.
    Retry {
        /// Why it failed.
        error: &'a str,
        /// When to try again.
        after: Duration,
    },
    /// No retry will help, or the retries ran out.
    Dead {
        /// Why.
        error: &'a str,
    },
}

/// Records attempt `attempts` of delivery `id`; a claim that lost its lease to another pod
/// (a later attempt) writes nothing.
pub async fn finish(
    pool: &PgPool,
    id: Uuid,
    attempts: i32,
    outcome: &Attempt<'_>,
) -> Result<(), StoreError> {
    let (status, error, after) = match outcome {
        Attempt::Sent => ("sent", None, 0.0),
        Attempt::Retry { error, after } => ("pending", Some(*error), after.as_secs_f64()),
        Attempt::Dead { error } => ("dead", Some(*error), 0.0),
    };
    sqlx::query(
        "UPDATE alert_deliveries
         SET status = $3, last_error = $4, locked_until = NULL,
             next_attempt_at = now() + make_interval(secs => $5),
             sent_at = CASE WHEN $3 = 'sent' THEN now() END
         WHERE id = $1 AND attempts = $2 AND status = 'pending'",
    )
    .bind(id)
    .bind(attempts)
    .bind(status)
    .bind(error)
    .bind(after)
    .execute(pool)
    .await?;
    Ok(())
}

/// One incident as `GET /alerts` shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Incident {
    /// The incident.
    pub id: Uuid,
    /// Its kind.
    pub kind: AlertKind,
    /// Its scope.
    pub scope: String,
    /// Its org.
    pub org_id: Option<Uuid>,
    /// Its severity.
    pub severity: Severity,
    /// `open` or `resolved`.
    pub status: String,
    /// One line.
    pub summary: String,
    /// Figures.
    pub details: Value,
    /// When it opened.
    pub opened_at: DateTime<Utc>,
    /// When a pod last saw the condition.
    pub last_seen_at: DateTime<Utc>,
    /// When it resolved.
    pub resolved_at: Option<DateTime<Utc>>,
    /// Its deliveries: `[{sink, action, status, attempts, last_error}]`.
    pub deliveries: Value,
}

/// Open incidents and those resolved within `recent`, newest first, that concern no org or
/// one of `orgs`; at most `limit`.
pub async fn list(
    pool: &PgPool,
    orgs: &[Uuid],
    open_only: bool,
    recent: Duration,
    limit: i64,
) -> Result<Vec<Incident>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT i.id, i.kind, i.scope, i.org_id, i.severity, i.status, i.summary, i.details,
                i.opened_at, i.last_seen_at, i.resolved_at,
                COALESCE((SELECT jsonb_agg(jsonb_build_object(
                            'sink', d.sink, 'action', d.action, 'status', d.status,
                            'attempts', d.attempts, 'last_error', d.last_error)
                          ORDER BY d.created_at)
                          FROM alert_deliveries d WHERE d.incident_id = i.id), '[]'::jsonb)
                  AS deliveries
         FROM alert_incidents i
         WHERE (i.org_id IS NULL OR i.org_id = ANY($1))
           AND (i.status = 'open'
                OR (NOT $2 AND i.resolved_at > now() - make_interval(secs => $3)))
         ORDER BY i.opened_at DESC, i.id
         LIMIT $4",
    )
    .bind(orgs)
    .bind(open_only)
    .bind(recent.as_secs_f64())
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Deletes incidents resolved more than `keep` ago (their deliveries go with them).
pub async fn prune(pool: &PgPool, keep: Duration) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM alert_incidents
         WHERE status = 'resolved' AND resolved_at < now() - make_interval(secs => $1)",
    )
    .bind(keep.as_secs_f64())
    .execute(pool)
    .await?
    .rows_affected())
}
