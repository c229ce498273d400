//! The numbers behind the console's reports page (`GET /reports/metrics`): an org's messages
//! per day and channel, the time from a customer message to the first reply after it, the
//! share of replies sent as drafted, edited or written anew, the SLA met, and releases per
//! expert, over a range of days cut in the org's time zone.
//!
//! Every statement starts from an index on `(org_id, created_at)` (`messages_org_created`,
//! `audit_log_org`), so the cost follows the org's activity in the range, not the table's
//! size. Releases are read from the audit rows the release writes in its own transaction
//! (`queue_item.release`, `queue_item.respond`): they carry who released, what the reply was
//! made of (`reply`) and the deadline it was released against (`sla_due_at`); older rows
//! without those two fields are completed from the message and the queue item.

use crate::StoreError;
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

/// The org and the instants `[start, end)` of the days asked for, cut in `time_zone`.
#[derive(Debug, Clone, Copy)]
pub struct Range<'a> {
    /// The org.
    pub org_id: Uuid,
    /// The first day's midnight in the org's zone.
    pub start: DateTime<Utc>,
    /// The midnight after the last day.
    pub end: DateTime<Utc>,
    /// IANA name the days are cut in.
    pub time_zone: &'a str,
}

/// Messages of one channel on one day.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ChannelDay {
    /// The day in the org's zone.
    pub day: NaiveDate,
    /// `slack`, `whatsapp`, `telegram` or `email`.
    pub channel: String,
    /// From customers.
    pub inbound: i64,
    /// Replies.
    pub outbound: i64,
}

/// First-reply times of the customer messages of one day.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct FirstReplyDay {
    /// The day (of the customer message) in the org's zone.
    pub day: NaiveDate,
    /// Customer messages that day.
    pub customer_messages: i64,
    /// Those a reply has followed.
    pub answered: i64,
    /// Median seconds to the first reply after the message; `None` when none was answered.
    pub p50_secs: Option<f64>,
    /// 90th percentile.
    pub p90_secs: Option<f64>,
}

/// The replies released on one day.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ReleaseDay {
    /// The day in the org's zone.
    pub day: NaiveDate,
    /// Replies released.
    pub releases: i64,
    /// Sent as the draft, unchanged.
    pub draft: i64,
    /// Sent as the draft, edited.
    pub edited: i64,
    /// The expert's own text.
    pub own: i64,
    /// Released at or before the item's `sla_due_at`.
    pub sla_met: i64,
    /// Released for an item that had a deadline (the denominator of the SLA share).
    pub sla_known: i64,
}

/// One expert's releases in the range.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ExpertReleases {
    /// The user; `None` for a user since deleted.
    pub user_id: Option<Uuid>,
    /// Their login address.
    pub email: Option<String>,
    /// Their display name.
    pub display_name: Option<String>,
    /// Replies they released.
    pub releases: i64,
}

/// Everything the reports page draws.
#[derive(Debug, Clone, Serialize)]
pub struct Metrics {
    /// Per day and channel, days without messages left out.
    pub messages: Vec<ChannelDay>,
    /// Per day, days without customer messages left out.
    pub first_reply: Vec<FirstReplyDay>,
    /// Per day, days without releases left out.
    pub releases: Vec<ReleaseDay>,
    /// Most releases first.
    pub experts: Vec<ExpertReleases>,
}

const MESSAGES: &str = "
    SELECT (created_at AT TIME ZONE $4)::date AS day, channel::text AS channel,
           count(*) FILTER (WHERE direction = 'inbound') AS inbound,
           count(*) FILTER (WHERE direction = 'outbound') AS outbound
    FROM messages
    WHERE org_id = $1 AND created_at >= $2 AND created_at < $3
    GROUP BY 1, 2 ORDER BY 1, 2";

/// The first outbound message after each customer message, through `messages_conversation`
/// (the conversation's messages by time).
const FIRST_REPLY: &str = "
    SELECT (m.created_at AT TIME ZONE $4)::date AS day,
           count(*) AS customer_messages,
           count(r.at) AS answered,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.at - m.created_at))
             AS p50_secs,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM r.at - m.created_at))
             AS p90_secs
    FROM messages m
    LEFT JOIN LATERAL (
        SELECT o.created_at AS at FROM messages o
        WHERE o.conversation_id = m.conversation_id AND o.direction = 'outbound'
          AND o.created_at > m.created_at
        ORDER BY o.created_at LIMIT 1) r ON true
    WHERE m.org_id = $1 AND m.direction = 'inbound' AND m.created_at >= $2 AND m.created_at < $3
    GROUP BY 1 ORDER BY 1";

/// The releases of the range, each with what it was made of and its deadline.
const RELEASED: &str = "
    released AS (
        SELECT a.created_at, a.actor_user_id, a.details->>'by' AS by,
               -- The subqueries run only for a row without the field (COALESCE stops at
               -- the first value), each one primary-key lookup.
               COALESCE(a.details->>'reply',
                        CASE WHEN a.action = 'queue_item.respond' THEN 'own'
                             WHEN (SELECT m.author FROM messages m
                                   WHERE m.id = (a.details->>'message_id')::uuid) = 'agent'
                             THEN 'draft' ELSE 'edited' END) AS reply,
               COALESCE((a.details->>'sla_due_at')::timestamptz,
                        (SELECT q.sla_due_at FROM expert_queue q WHERE q.id = a.target_id)) AS due
        FROM audit_log a
        WHERE a.org_id = $1 AND a.created_at >= $2 AND a.created_at < $3
          AND a.action IN ('queue_item.release', 'queue_item.respond'))";

/// The drafts experts handled in the range: each release or reply of theirs that answered
/// a customer message with a draft (not the fallback), with the draft, its confidence and
/// the text sent. The autopilot's own sends are left out: they say nothing about where the
/// line is.
const HANDLED: &str = "
    SELECT m.channel AS channel, d.confidence, d.body AS draft, m.body AS sent,
           COALESCE(a.details->>'reply',
                    CASE WHEN a.action = 'queue_item.respond' THEN 'own'
                         WHEN m.author = 'agent' THEN 'draft' ELSE 'edited' END) AS reply
    FROM audit_log a
    JOIN messages m ON m.id = (a.details->>'message_id')::uuid
    JOIN drafts d ON d.message_id = m.answers_message_id AND NOT d.fallback
    WHERE a.org_id = $1 AND a.created_at >= $2 AND a.created_at < $3
      AND a.action IN ('queue_item.release', 'queue_item.respond')
      AND a.details->>'by' IS DISTINCT FROM 'autopilot'
      -- `fetch` binds the zone as $4 to every statement; this one has no days to cut.
      AND $4::text IS NOT NULL";

#[derive(sqlx::FromRow)]
struct HandledRow {
    channel: switchboard_domain::ChannelKind,
    confidence: Option<f32>,
    draft: String,
    sent: String,
    reply: String,
}

/// The drafts experts handled over `range`, for the autopilot's calibration.
pub async fn handled_drafts(
    pool: &PgPool,
    range: Range<'_>,
) -> Result<Vec<switchboard_domain::autopilot::HandledDraft>, StoreError> {
    use switchboard_domain::autopilot::{Handled, HandledDraft, clamp_confidence, edit_share};
    let rows = fetch::<HandledRow>(pool, HANDLED, range).await?;
    Ok(rows
        .into_iter()
        .map(|r| HandledDraft {
            channel: r.channel,
            confidence: clamp_confidence(r.confidence.map(f64::from)),
            how: match r.reply.as_str() {
                "draft" => Handled::Unchanged,
                "own" => Handled::Replaced,
                _ => Handled::Edited(edit_share(&r.draft, &r.sent)),
            },
        })
        .collect())
}

/// An org's metrics over `range`.
pub async fn metrics(pool: &PgPool, range: Range<'_>) -> Result<Metrics, StoreError> {
    let releases_sql = format!(
        "WITH {RELEASED}
         SELECT (created_at AT TIME ZONE $4)::date AS day, count(*) AS releases,
                count(*) FILTER (WHERE reply = 'draft') AS draft,
                count(*) FILTER (WHERE reply = 'edited') AS edited,
                count(*) FILTER (WHERE reply = 'own') AS own,
                count(*) FILTER (WHERE created_at <= due) AS sla_met,
                count(due) AS sla_known
         FROM released GROUP BY 1 ORDER BY 1"
    );
    let experts_sql = format!(
        "WITH {RELEASED}
         SELECT r.actor_user_id AS user_id, u.email, u.display_name, count(*) AS releases
         FROM released r LEFT JOIN users u ON u.id = r.actor_user_id
         WHERE r.by IS DISTINCT FROM 'autopilot'
         GROUP BY r.actor_user_id, u.email, u.display_name
         ORDER BY count(*) DESC, u.email NULLS LAST"
    );
    // Four statements on four connections: the page waits for the slowest, not the sum.
    let (messages, first_reply, releases, experts) = futures::try_join!(
        fetch::<ChannelDay>(pool, MESSAGES, range),
        fetch::<FirstReplyDay>(pool, FIRST_REPLY, range),
        fetch::<ReleaseDay>(pool, &releases_sql, range),
        fetch::<ExpertReleases>(pool, &experts_sql, range)
    )?;
    Ok(Metrics {
        messages,
        first_reply,
        releases,
        experts,
    })
}

/// One statement over `range` (`$1` org, `$2`/`$3` the instants, `$4` the zone), without
/// JIT: the planner prices the fallback subqueries of `RELEASED` per row though they rarely
/// run, and with a million messages compiling the plan took longer than running it (see
/// docs/PERFORMANCE.md, "Reports page").
async fn fetch<T>(pool: &PgPool, sql: &str, range: Range<'_>) -> Result<Vec<T>, StoreError>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL jit = off").execute(&mut *tx).await?;
    let rows = sqlx::query_as::<_, T>(sql)
        .bind(range.org_id)
        .bind(range.start)
        .bind(range.end)
        .bind(range.time_zone)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows)
}
