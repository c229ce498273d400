//! The expert queue (`expert_queue`): the console's list, one item, and the state
//! transitions, each a single `UPDATE … WHERE <expected state> RETURNING` (AA5).
//!
//! Every status this crate writes, here and in the inbound job's statements
//! (`crate::messages`, `crate::drafts`), is rendered from a
//! [`switchboard_domain::queue_state::Transition`] by the functions below ([`from_sql`],
//! [`to_sql`], [`status_after`], [`opening_status`]): no statement spells a state it moves
//! an item to, so none can take an arrow the state machine's table does not have.

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor, PgPool};
use std::sync::LazyLock;
use switchboard_domain::events::QueueItemEvent;
use switchboard_domain::queue_state::Transition;
use switchboard_domain::{ChannelKind, QueueStatus};
use uuid::Uuid;

/// `<column> IN ('a', …)`: the states `t` starts from (`false` for one that opens an item).
pub(crate) fn from_sql(t: Transition, column: &str) -> String {
    if t.opens() {
        return "false".to_owned();
    }
    let states: Vec<String> = t
        .from()
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!("{column} IN ({})", states.join(", "))
}

/// The state `t` leads to, as an SQL value.
pub(crate) fn to_sql(t: Transition) -> String {
    format!("'{}'::queue_status", t.to().as_str())
}

/// `CASE WHEN <when> AND <column> IN (<from>) THEN <to> … ELSE <column> END`: the status after
/// the first of `arrows` whose condition (`"true"` for none) and starting state match, or
/// the status unchanged.
pub(crate) fn status_after(column: &str, arrows: &[(Transition, &str)]) -> String {
    let whens: Vec<String> = arrows
        .iter()
        .map(|(t, when)| {
            format!(
                "WHEN ({when}) AND {} THEN {}",
                from_sql(*t, column),
                to_sql(*t)
            )
        })
        .collect();
    format!("CASE {} ELSE {column} END", whens.join(" "))
}

/// A new item's status: the first of the opening `arrows` whose condition holds, else
/// `otherwise`'s.
pub(crate) fn opening_status(arrows: &[(Transition, &str)], otherwise: Transition) -> String {
    debug_assert!(otherwise.opens() && arrows.iter().all(|(t, _)| t.opens()));
    let whens: Vec<String> = arrows
        .iter()
        .map(|(t, when)| format!("WHEN ({when}) THEN {}", to_sql(*t)))
        .collect();
    format!("CASE {} ELSE {} END", whens.join(" "), to_sql(otherwise))
}

/// One queue item with what a console row shows: its conversation's channel and customer,
/// the last customer message and the current draft.
#[allow(missing_docs)] // the columns and parameters the statements below name
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ItemRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub conversation_id: Uuid,
    pub status: QueueStatus,
    pub version: i32,
    pub channel: ChannelKind,
    pub customer_id: Uuid,
    pub customer_name: Option<String>,
    pub customer_external_id: String,
    pub last_message_preview: Option<String>,
    pub last_message_at: Option<DateTime<Utc>>,
    pub draft_id: Option<Uuid>,
    pub draft_body: Option<String>,
    pub draft_confidence: Option<f32>,
    pub draft_fallback: bool,
    pub flagged_for_review: bool,
    pub claimed_by: Option<Uuid>,
    pub snoozed_until: Option<DateTime<Utc>>,
    pub sla_due_at: Option<DateTime<Utc>>,
    pub send_at: Option<DateTime<Utc>>,
    pub autopilot_rule: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a console row shows, from the queue row aliased `q` (see [`ItemRow`]).
const ITEM_COLUMNS: &str = "
       q.id, q.org_id, q.conversation_id, q.status, q.version, c.channel,
       cu.id AS customer_id, cu.display_name AS customer_name, cu.external_id AS customer_external_id,
       lm.body AS last_message_preview, lm.created_at AS last_message_at,
       q.draft_id, q.draft_body, q.draft_confidence, COALESCE(d.fallback, false) AS draft_fallback,
       q.flagged_for_review, q.claimed_by, q.snoozed_until, q.sla_due_at, q.send_at, q.autopilot_rule,
       q.created_at, q.updated_at";

/// The joins [`ITEM_COLUMNS`] reads through.
const ITEM_JOINS: &str = "
JOIN conversations c ON c.id = q.conversation_id
JOIN customers cu ON cu.id = c.customer_id
LEFT JOIN drafts d ON d.id = q.draft_id
LEFT JOIN LATERAL (
  SELECT left(m.body, 280) AS body, m.created_at FROM messages m
  WHERE m.conversation_id = q.conversation_id AND m.direction = 'inbound'
  ORDER BY m.created_at DESC, m.id DESC LIMIT 1) lm ON true";

fn item_select() -> String {
    format!("SELECT {ITEM_COLUMNS} FROM expert_queue q {ITEM_JOINS}")
}

/// Which items a list shows by holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assigned {
    /// Any holder or none.
    Any,
    /// Only items nobody holds.
    Unassigned,
    /// Only items this user holds.
    User(Uuid),
}

/// The list's order. Both are keyset-paginated on an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Longest waiting first: `(created_at, id)` ascending. Stable while items arrive or
    /// change, since neither key ever changes.
    Waiting,
    /// Newest activity first: `(updated_at, id)` descending.
    Recent,
}

/// A list query; `after` is the sort key of the last item of the previous page.
#[allow(missing_docs)] // the columns and parameters the statements below name
#[derive(Debug, Clone)]
pub struct ItemFilter {
    pub orgs: Vec<Uuid>,
    pub statuses: Option<Vec<QueueStatus>>,
    pub channel: Option<ChannelKind>,
    pub flagged: Option<bool>,
    pub assigned: Assigned,
    pub order: Order,
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
}

/// One page of items, in the filter's order.
pub async fn list(pool: &PgPool, filter: &ItemFilter) -> Result<Vec<ItemRow>, StoreError> {
    let (cursor, order) = match filter.order {
        Order::Waiting => ("(q.created_at, q.id) > ($8, $9)", "q.created_at, q.id"),
        Order::Recent => (
            "(q.updated_at, q.id) < ($8, $9)",
            "q.updated_at DESC, q.id DESC",
        ),
    };
    let sql = format!(
        "{}
         WHERE q.org_id = ANY($1)
           AND ($2::text[] IS NULL OR q.status::text = ANY($2))
           AND ($3::channel_kind IS NULL OR c.channel = $3)
           AND ($4::bool IS NULL OR q.flagged_for_review = $4)
           AND ($5::int = 0 OR ($5 = 1 AND q.claimed_by IS NULL) OR ($5 = 2 AND q.claimed_by = $6))
           AND ($7::bool = false OR {cursor})
         ORDER BY {order} LIMIT $10",
        item_select()
    );
    let statuses: Option<Vec<&str>> = filter
        .statuses
        .as_ref()
        .map(|s| s.iter().map(|s| s.as_str()).collect());
    let (assigned, user) = match filter.assigned {
        Assigned::Any => (0, None),
        Assigned::Unassigned => (1, None),
        Assigned::User(u) => (2, Some(u)),
    };
    let (has_cursor, at, id) = match filter.after {
        Some((at, id)) => (true, at, id),
        None => (false, DateTime::<Utc>::UNIX_EPOCH, Uuid::nil()),
    };
    Ok(sqlx::query_as(&sql)
        .bind(&filter.orgs)
        .bind(statuses)
        .bind(filter.channel)
        .bind(filter.flagged)
        .bind(assigned)
        .bind(user)
        .bind(has_cursor)
        .bind(at)
        .bind(id)
        .bind(filter.limit)
        .fetch_all(pool)
        .await?)
}

/// One item by id, whatever its org (the caller checks the org).
pub async fn get<'e>(db: impl PgExecutor<'e>, id: Uuid) -> Result<Option<ItemRow>, StoreError> {
    Ok(
        sqlx::query_as(&format!("{} WHERE q.id = $1", item_select()))
            .bind(id)
            .fetch_optional(db)
            .await?,
    )
}

/// The org an item belongs to, to tell 404 from 403 before anything else.
pub async fn org_of(pool: &PgPool, id: Uuid) -> Result<Option<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT org_id FROM expert_queue WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// An item's state as a 409 reports it.
#[allow(missing_docs)] // the columns and parameters the statements below name
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct Current {
    pub status: QueueStatus,
    pub version: i32,
    pub claimed_by: Option<Uuid>,
}

/// The item's state now (after a transition found it in another state).
pub async fn current<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    id: Uuid,
) -> Result<Option<Current>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT status, version, claimed_by FROM expert_queue WHERE id = $1 AND org_id = $2",
    )
    .bind(id)
    .bind(org_id)
    .fetch_optional(db)
    .await?)
}

/// One item's transition, setting the holder and the snooze time.
#[allow(missing_docs)] // the columns and parameters the statements below name
#[derive(Debug, Clone)]
pub struct Change<'a> {
    pub org_id: Uuid,
    pub id: Uuid,
    /// The arrow taken: from any of its states to its state.
    pub transition: Transition,
    /// The holder after the transition (`claimed` needs one, every other state none).
    pub holder: Option<Uuid>,
    pub snoozed_until: Option<DateTime<Utc>>,
    /// Refuse when someone other than this user holds the item (`None`: no such guard, e.g.
    /// an admin's override).
    pub not_held_by_other_than: Option<Uuid>,
    /// Release and respond: the reply text given (else the draft is sent); the transition
    /// is refused when neither exists.
    pub reply: Option<&'a str>,
    pub needs_reply: bool,
    /// The version the client saw (`If-Match`); refused when the item has another.
    pub if_match: Option<i32>,
}

/// The item after a transition, as a console row, with the reply it is released with.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Transitioned {
    /// The item as the console shows it.
    #[sqlx(flatten)]
    pub item: ItemRow,
    /// The draft the item held before (a release or respond retires it), for comparing an
    /// edited release with it.
    pub draft: Option<String>,
    /// The state it left.
    pub was: QueueStatus,
    /// Release and respond: the text to send.
    pub reply: Option<String>,
    /// The transaction's time, which is every row's `now()` in it (the reply's `created_at`).
    pub at: DateTime<Utc>,
    /// Release and respond: the conversation's latest customer message as this statement
    /// saw it, which the reply answers.
    pub answers: Option<Uuid>,
}

/// A draft is current when it answers the conversation's latest customer message; `{q}`
/// names the queue row. Releasing without a body sends only a current draft.
fn draft_is_current(q: &str) -> String {
    format!(
        "COALESCE({q}.draft_message_id, (SELECT d.message_id FROM drafts d WHERE d.id = {q}.draft_id)) =
         (SELECT m.id FROM messages m
          WHERE m.conversation_id = {q}.conversation_id AND m.direction = 'inbound'
          ORDER BY m.created_at DESC, m.id DESC LIMIT 1)"
    )
}

/// Applies a transition in one statement that also reads the item back as a console row;
/// `None` when the item is not in a state it allows, holds another version than
/// `if_match`, or (release without a body) holds no current draft: the caller then reads
/// [`explain`] to say which. A release or respond retires the draft it answers with: an
/// item never offers the same draft twice.
///
/// The row is locked first (`FOR UPDATE` in the first CTE reads the latest committed
/// version, whatever committed while this statement waited), so the draft that is sent is
/// the one the conditions were checked against.
pub async fn transition<'e>(
    db: impl PgExecutor<'e>,
    t: &Change<'_>,
) -> Result<Option<Transitioned>, StoreError> {
    let from: Vec<&str> = t.transition.from().iter().map(|s| s.as_str()).collect();
    let sql = format!(
        "WITH old AS (
           SELECT id, draft_body, status FROM expert_queue WHERE id = $1 AND org_id = $2 FOR UPDATE
         ), q AS (
           UPDATE expert_queue e SET
             status = $3, version = e.version + 1, updated_at = now(),
             claimed_by = $4, snoozed_until = $5, send_at = NULL, autopilot_rule = NULL,
             resolved_at = CASE WHEN $3::text = 'resolved' THEN now() END,
             draft_id = CASE WHEN $9 THEN NULL ELSE e.draft_id END,
             draft_message_id = CASE WHEN $9 THEN NULL ELSE e.draft_message_id END,
             draft_body = CASE WHEN $9 THEN NULL ELSE e.draft_body END,
             draft_confidence = CASE WHEN $9 THEN NULL ELSE e.draft_confidence END,
             draft_cost_usd = CASE WHEN $9 THEN NULL ELSE e.draft_cost_usd END
           FROM old
           WHERE e.id = old.id
             AND e.status::text = ANY($6)
             AND ($7::uuid IS NULL OR e.claimed_by IS NULL OR e.claimed_by = $7)
             AND ($10::int IS NULL OR e.version = $10)
             AND (NOT $9 OR $8::text IS NOT NULL
                  OR (COALESCE(e.draft_body, '') <> '' AND {current}))
           RETURNING e.*, old.draft_body AS old_draft, old.status AS was,
             COALESCE($8, old.draft_body) AS reply,
             CASE WHEN $9 THEN (SELECT m.id FROM messages m
                                WHERE m.conversation_id = e.conversation_id AND m.direction = 'inbound'
                                ORDER BY m.created_at DESC, m.id DESC LIMIT 1) END AS answers)
         SELECT {ITEM_COLUMNS}, q.old_draft AS draft, q.was, q.reply, now() AS at, q.answers
         FROM q {ITEM_JOINS}",
        current = draft_is_current("e"),
    );
    sqlx::query_as(&sql)
        .bind(t.id)
        .bind(t.org_id)
        .bind(t.transition.to())
        .bind(t.holder)
        .bind(t.snoozed_until)
        .bind(&from)
        .bind(t.not_held_by_other_than)
        .bind(t.reply)
        .bind(t.needs_reply)
        .bind(t.if_match)
        .fetch_optional(db)
        .await
        .map_err(StoreError::from)
}

/// Why a transition matched no row, in the order a client is told: the state (or the
/// holder) first, then the version it saw, then the draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The item is in a state the transition does not start from, or someone else holds it.
    State(Current),
    /// The item has another version than `If-Match` said.
    Version,
    /// A release without a body, and the item holds no draft.
    NoDraft,
    /// A release without a body, and the draft answers an older customer message.
    StaleDraft,
}

/// Explains why `t` matched no row; `None` when the item does not exist in this org.
pub async fn explain<'e>(
    db: impl PgExecutor<'e>,
    t: &Change<'_>,
) -> Result<Option<Refusal>, StoreError> {
    let from: Vec<&str> = t.transition.from().iter().map(|s| s.as_str()).collect();
    /// Each check the transition makes, as the item is now.
    #[derive(sqlx::FromRow)]
    struct Checks {
        status: QueueStatus,
        version: i32,
        claimed_by: Option<Uuid>,
        state_ok: bool,
        version_ok: bool,
        has_draft: bool,
        current: bool,
    }
    let row: Option<Checks> = sqlx::query_as(&format!(
        "SELECT status, version, claimed_by,
                status::text = ANY($3) AND ($4::uuid IS NULL OR claimed_by IS NULL OR claimed_by = $4)
                  AS state_ok,
                $5::int IS NULL OR version = $5 AS version_ok,
                COALESCE(draft_body, '') <> '' AS has_draft,
                COALESCE({current}, false) AS current
         FROM expert_queue q WHERE id = $1 AND org_id = $2",
        current = draft_is_current("q"),
    ))
    .bind(t.id)
    .bind(t.org_id)
    .bind(&from)
    .bind(t.not_held_by_other_than)
    .bind(t.if_match)
    .fetch_optional(db)
    .await?;
    let Some(Checks {
        status,
        version,
        claimed_by,
        state_ok,
        version_ok,
        has_draft,
        current,
    }) = row
    else {
        return Ok(None);
    };
    Ok(Some(if !state_ok {
        Refusal::State(Current {
            status,
            version,
            claimed_by,
        })
    } else if !version_ok {
        Refusal::Version
    } else if t.needs_reply && t.reply.is_none() && !has_draft {
        Refusal::NoDraft
    } else if t.needs_reply && t.reply.is_none() && !current {
        Refusal::StaleDraft
    } else {
        // Changed between the two statements: the state it is in now explains it.
        Refusal::State(Current {
            status,
            version,
            claimed_by,
        })
    }))
}

/// The conversation's live item other than `id` (a reopen that would make a second one).
pub async fn live_sibling<'e>(
    db: impl PgExecutor<'e>,
    id: Uuid,
) -> Result<Option<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT o.id FROM expert_queue q JOIN expert_queue o
           ON o.conversation_id = q.conversation_id AND o.id <> q.id AND o.status <> 'resolved'
         WHERE q.id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// An item a job moved (a snooze that came due, a hold stopped), as its
/// `queue_item_updated` event says it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Moved {
    /// The item's org.
    pub org_id: Uuid,
    /// The item after the change.
    #[sqlx(flatten)]
    pub item: QueueItemEvent,
}

/// [`Transition::SnoozeEnds`] for the items whose time has come, oldest first.
static RESURFACE: LazyLock<String> = LazyLock::new(|| {
    let t = Transition::SnoozeEnds;
    format!(
        "UPDATE expert_queue q SET status = {to}, snoozed_until = NULL,
            version = q.version + 1, updated_at = now()
         WHERE q.id IN (SELECT id FROM expert_queue
                        WHERE {from} AND snoozed_until <= now()
                        ORDER BY snoozed_until LIMIT $1 FOR UPDATE SKIP LOCKED)
           AND {q_from} AND q.snoozed_until <= now()
         RETURNING {MOVED}",
        to = to_sql(t),
        from = from_sql(t, "status"),
        q_from = from_sql(t, "q.status"),
    )
});

/// What [`Moved`] reads back from the queue row aliased `q`.
const MOVED: &str = "q.org_id, q.id, q.conversation_id, q.status, q.version, q.claimed_by,
               q.flagged_for_review, q.send_at, q.autopilot_rule";

/// Moves up to `limit` snoozed items whose time has come back to `pending`, in one
/// `UPDATE … RETURNING` (AA5: an item already moved by anyone else is not in the `WHERE`).
pub async fn resurface_snoozed(
    tx: &mut PgConnection,
    limit: i64,
) -> Result<Vec<Moved>, StoreError> {
    Ok(sqlx::query_as(RESURFACE.as_str())
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?)
}

/// An item on hold whose `send_at` has come, at the version it was found at.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DueHold {
    /// The item.
    pub id: Uuid,
    /// Its org.
    pub org_id: Uuid,
    /// Its version as found: the autopilot sends it only at this version.
    pub version: i32,
    /// The rule that admitted its draft.
    pub rule: Option<String>,
    /// The channel the reply would leave on.
    pub channel: ChannelKind,
    /// The connection it would leave through: whose breaker is read before the send.
    pub connection_id: Uuid,
}

/// Up to `limit` items on hold whose time has come, the longest due first.
pub async fn due_holds(pool: &PgPool, limit: i64) -> Result<Vec<DueHold>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT q.id, q.org_id, q.version, q.autopilot_rule AS rule, c.channel, c.connection_id
         FROM expert_queue q JOIN conversations c ON c.id = q.conversation_id
         WHERE q.status = 'auto_pending' AND q.send_at <= now()
         ORDER BY q.send_at LIMIT $1",
    )
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// [`Transition::HoldEnds`] for one org's items, every org's, or one item.
static STOP_HOLDS: LazyLock<String> = LazyLock::new(|| {
    let t = Transition::HoldEnds;
    format!(
        "UPDATE expert_queue q SET status = {to}, send_at = NULL, autopilot_rule = NULL,
                version = q.version + 1, updated_at = now()
         WHERE {from}
           AND ($1::uuid IS NULL OR q.org_id = $1) AND ($2::uuid IS NULL OR q.id = $2)
         RETURNING {MOVED}",
        to = to_sql(t),
        from = from_sql(t, "q.status"),
    )
});

/// Ends the holds of `org_id` (every org's when `None`), or only item `item_id`'s: each is
/// pending again at a new version, in one `UPDATE … RETURNING` (an item that left its
/// hold meanwhile is not in the `WHERE`). The caller stores their events in its transaction.
pub async fn stop_holds(
    tx: &mut PgConnection,
    org_id: Option<Uuid>,
    item_id: Option<Uuid>,
) -> Result<Vec<Moved>, StoreError> {
    Ok(sqlx::query_as(STOP_HOLDS.as_str())
        .bind(org_id)
        .bind(item_id)
        .fetch_all(&mut *tx)
        .await?)
}

/// One org's pending items past their SLA.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Backlog {
    /// The org.
    pub org_id: Uuid,
    /// How many pending items are past their SLA.
    pub overdue: i64,
    /// The item waiting longest past its SLA.
    pub oldest_id: Uuid,
    /// Its SLA.
    pub oldest_due_at: DateTime<Utc>,
}

/// Pending items past their `sla_due_at`, per org.
pub async fn backlog_past_sla(pool: &PgPool) -> Result<Vec<Backlog>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT org_id, count(*) AS overdue,
                (array_agg(id ORDER BY sla_due_at, id))[1] AS oldest_id,
                min(sla_due_at) AS oldest_due_at
         FROM expert_queue
         WHERE status = 'pending' AND sla_due_at < now()
         GROUP BY org_id ORDER BY org_id",
    )
    .fetch_all(pool)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_status_is_rendered_from_its_transition() {
        assert_eq!(
            status_after("q.status", &[(Transition::CustomerWrites, "true")]),
            "CASE WHEN (true) AND q.status IN ('awaiting_client', 'snoozed', 'auto_pending') \
             THEN 'pending'::queue_status ELSE q.status END"
        );
        assert_eq!(
            opening_status(&[(Transition::OpenOnHold, "held")], Transition::Open),
            "CASE WHEN (held) THEN 'auto_pending'::queue_status ELSE 'pending'::queue_status END"
        );
        assert_eq!(from_sql(Transition::Open, "status"), "false");
    }

    /// Every source file of the crate, folders included.
    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("the source directory") {
            let path = entry.expect("a source entry").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a readable source");
                out.push((path.display().to_string(), text));
            }
        }
    }

    /// No statement spells a state it moves an item to. In every write of `expert_queue` (an
    /// `UPDATE` or `INSERT` up to its `RETURNING`) a spelled state may be compared with, never
    /// assigned: no `THEN '<state>'`, `ELSE '<state>'`, `'<state>'::queue_status`,
    /// `SET status = '<state>'` or `, status = '<state>'`, and an `INSERT`'s values name none.
    #[test]
    fn no_statement_writes_a_spelled_status() {
        let mut files = Vec::new();
        sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        assert!(files.len() > 10);
        let mut writes = 0;
        for (file, text) in &files {
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            for start in ["UPDATE expert_queue", "INSERT INTO expert_queue"] {
                for (at, _) in text.match_indices(start) {
                    writes += 1;
                    let rest = &text[at..];
                    let write = &rest[..rest.find("RETURNING").expect("a write that returns")];
                    for s in QueueStatus::ALL.map(|s| format!("'{}'", s.as_str())) {
                        let assigned = [
                            format!("THEN {s}"),
                            format!("ELSE {s}"),
                            format!("{s}::queue_status"),
                            format!("SET status = {s}"),
                            format!(", status = {s}"),
                        ];
                        for a in assigned {
                            assert!(!write.contains(&a), "{file}: {start} … {a}");
                        }
                        if start.starts_with("INSERT") {
                            let values = &write[..write.find("FROM").unwrap_or(write.len())];
                            assert!(!values.contains(&s), "{file}: {start} … {s}");
                        }
                    }
                }
            }
        }
        // transition, the snooze expiry, the holds' end, the inbound job's two statements.
        assert!(writes >= 5, "{writes} writes of expert_queue found");
    }
}
