//! Reports written by the scheduled jobs (daily summary, weekly report, review summary),
//! one per org, kind and period (AA3: a retried slot inserts nothing new), and the figures
//! they hold.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use switchboard_domain::ReportKind;
use uuid::Uuid;

/// A stored report.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Report {
    /// Primary key.
    pub id: Uuid,
    /// The org.
    pub org_id: Uuid,
    /// Which report.
    pub kind: ReportKind,
    /// Start of the period covered (inclusive).
    pub period_start: DateTime<Utc>,
    /// End of the period covered (exclusive).
    pub period_end: DateTime<Utc>,
    /// The org's time zone the period was cut in.
    pub time_zone: String,
    /// The figures.
    pub data: Value,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, org_id, kind, period_start, period_end, time_zone, data, created_at";

/// A report to store.
#[derive(Debug, Clone)]
pub struct NewReport<'a> {
    /// The org.
    pub org_id: Uuid,
    /// The kind.
    pub kind: ReportKind,
    /// Period start.
    pub period_start: DateTime<Utc>,
    /// Period end.
    pub period_end: DateTime<Utc>,
    /// The org's time zone.
    pub time_zone: &'a str,
    /// The figures.
    pub data: Value,
}

/// Stores a report unless the org already has one of that kind for that period; returns it
/// when it is new.
pub async fn insert(
    tx: &mut PgConnection,
    r: &NewReport<'_>,
) -> Result<Option<Report>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "INSERT INTO reports (org_id, kind, period_start, period_end, time_zone, data)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (org_id, kind, period_start) DO NOTHING RETURNING {COLUMNS}"
    ))
    .bind(r.org_id)
    .bind(r.kind)
    .bind(r.period_start)
    .bind(r.period_end)
    .bind(r.time_zone)
    .bind(&r.data)
    .fetch_optional(&mut *tx)
    .await?)
}

/// One page of reports of `orgs`, newest first, after the cursor key `after`.
pub async fn list(
    pool: &PgPool,
    orgs: &[Uuid],
    kind: Option<ReportKind>,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Report>, StoreError> {
    let (at, id) = after.unzip();
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM reports
         WHERE org_id = ANY($1) AND ($2::text IS NULL OR kind = $2)
           AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4))
         ORDER BY created_at DESC, id DESC LIMIT $5"
    ))
    .bind(orgs)
    .bind(kind)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// The distinct time zones of all orgs.
pub async fn org_time_zones(pool: &PgPool) -> Result<Vec<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT DISTINCT time_zone FROM orgs ORDER BY time_zone")
            .fetch_all(pool)
            .await?,
    )
}

/// The orgs in one of `zones`, with their zone.
pub async fn orgs_in_zones(
    pool: &PgPool,
    zones: &[String],
) -> Result<Vec<(Uuid, String)>, StoreError> {
    Ok(
        sqlx::query_as("SELECT id, time_zone FROM orgs WHERE time_zone = ANY($1) ORDER BY id")
            .bind(zones)
            .fetch_all(pool)
            .await?,
    )
}

/// An org's activity in `[start, end)`: conversations started, messages in and out, median
/// first-response time (from a conversation's first customer message to its first reply),
/// releases, fallback drafts and dead letters.
pub async fn activity(
    pool: &PgPool,
    org_id: Uuid,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Result<Value, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT jsonb_build_object(
           'conversations', (SELECT count(*) FROM conversations
                             WHERE org_id = $1 AND created_at >= $2 AND created_at < $3),
           'messages_in', (SELECT count(*) FROM messages WHERE org_id = $1
                           AND direction = 'inbound' AND created_at >= $2 AND created_at < $3),
           'messages_out', (SELECT count(*) FROM messages WHERE org_id = $1
                            AND direction = 'outbound' AND created_at >= $2 AND created_at < $3),
           'median_first_response_secs', (
              SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.first_out - r.first_in))
              FROM (SELECT min(m.created_at) FILTER (WHERE m.direction = 'inbound') AS first_in,
                           min(m.created_at) FILTER (WHERE m.direction = 'outbound') AS first_out
                    FROM conversations c JOIN messages m ON m.conversation_id = c.id
                    WHERE c.org_id = $1 AND c.created_at >= $2 AND c.created_at < $3
                    GROUP BY c.id) r
              WHERE r.first_out > r.first_in),
           'releases', (SELECT count(*) FROM audit_log WHERE org_id = $1
                        AND action IN ('queue_item.release', 'queue_item.respond')
                        AND created_at >= $2 AND created_at < $3),
           'fallbacks', (SELECT count(*) FROM drafts WHERE org_id = $1 AND fallback
                         AND created_at >= $2 AND created_at < $3),
           'dead_letters', (SELECT count(*) FROM channel_failures WHERE org_id = $1
                            AND created_at >= $2 AND created_at < $3))",
    )
    .bind(org_id)
    .bind(start)
    .bind(end)
    .fetch_one(pool)
    .await?)
}

/// An org's open items flagged for review: how many, the oldest, and the 20 oldest ids.
pub async fn flagged_for_review(pool: &PgPool, org_id: Uuid) -> Result<Value, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT jsonb_build_object(
           'flagged', count(*),
           'oldest_created_at', min(created_at),
           'items', COALESCE((array_agg(id ORDER BY created_at, id))[1:20], '{}'))
         FROM expert_queue
         WHERE org_id = $1 AND flagged_for_review AND status <> 'resolved'",
    )
    .bind(org_id)
    .fetch_one(pool)
    .await?)
}
