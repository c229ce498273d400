//! A message's journey (`message_journey`): the steps an exchange went through (webhook
//! received and committed, job queued, draft stored and shown, item claimed, reply released,
//! each delivery attempt, delivered or dead-lettered), each with its time, the pod that wrote
//! it and its trace id, so that "I wrote at 10:02 and got the answer at 10:40" is answered
//! from the database alone, without grepping two pods' logs.
//!
//! The failure this guards against is a journey that tells what did not happen: every step is
//! written by the statement (or inside the transaction) whose commit is the step, never after
//! it, so a pod killed between the two cannot leave a step without its effect nor an effect
//! without its step. The writers are the statements of `inbox` (received, committed, queued),
//! `messages` (which fills in the intake steps' message), `drafts` (drafted, shown),
//! this module's [`claimed`] and [`released`] (called in the expert's or the autopilot's
//! transaction) and `outbox` (attempt, delivered, dead-lettered).
//!
//! Which message a step belongs to: the customer's message owns what happened to it and its
//! draft (received to claimed); the reply owns its release and delivery. A reply names the
//! message it answers (`messages.answers_message_id`), so [`exchange`] reads the steps of
//! both from either of them.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use switchboard_domain::JourneyStep;
use uuid::Uuid;

/// Who writes a step: the pod (`POD_ID`) and, while tracing is on, the writing span's trace.
#[derive(Debug, Clone, Copy)]
pub struct Stamp<'a> {
    /// The pod's id.
    pub pod: &'a str,
    /// The trace id (32 hex digits) of the span the step is written in.
    pub trace_id: Option<&'a str>,
}

/// The trace id inside a stored `traceparent` (`00-{trace id}-{span id}-{flags}`), in SQL.
pub(crate) fn trace_id_of(traceparent: &str) -> String {
    format!("NULLIF(split_part({traceparent}, '-', 2), '')")
}

/// The rank of `step` (a column or expression) in [`JourneyStep::ALL`], which orders steps
/// one statement wrote at the same instant.
fn rank(step: &str) -> String {
    let spellings: Vec<String> = JourneyStep::SPELLINGS
        .iter()
        .map(|s| format!("'{s}'"))
        .collect();
    format!(
        "array_position(ARRAY[{}]::text[], {step})",
        spellings.join(", ")
    )
}

/// One step as the endpoint shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Step {
    /// The message it belongs to: the customer's or the reply.
    pub message_id: Uuid,
    /// What happened.
    pub step: JourneyStep,
    /// When (see the migration: the pod's clock for `received`, Postgres' otherwise).
    pub at: DateTime<Utc>,
    /// The pod that wrote it.
    pub pod: String,
    /// Numbers, ids and user names; never customer text.
    pub detail: Value,
    /// The trace id, while tracing was on.
    pub trace_id: Option<String>,
}

/// The steps of the exchange message `message_id` is part of, ordered by time, when that
/// message is in conversation `conversation_id` of one of `orgs`; `None` otherwise (missing,
/// another conversation's, another org's: one answer, so nothing leaks). The exchange is the
/// customer's message (the message itself, or the one the reply answers) and every reply
/// answering it.
pub async fn exchange(
    pool: &PgPool,
    orgs: &[Uuid],
    conversation_id: Uuid,
    message_id: Uuid,
) -> Result<Option<Vec<Step>>, StoreError> {
    let found: Option<(Uuid, Option<Uuid>)> = sqlx::query_as(
        "SELECT org_id, CASE WHEN direction = 'inbound' THEN id ELSE answers_message_id END
         FROM messages WHERE id = $1 AND conversation_id = $2 AND org_id = ANY($3)",
    )
    .bind(message_id)
    .bind(conversation_id)
    .bind(orgs)
    .fetch_optional(pool)
    .await?;
    let Some((org_id, answered)) = found else {
        return Ok(None);
    };
    let steps = sqlx::query_as(&format!(
        "SELECT message_id, step, at, pod, detail, trace_id FROM message_journey
         WHERE org_id = $1 AND message_id IN (
           SELECT $2::uuid
           UNION SELECT $3::uuid WHERE $3::uuid IS NOT NULL
           UNION SELECT r.id FROM messages r
                  WHERE $3::uuid IS NOT NULL AND r.answers_message_id = $3::uuid)
         ORDER BY at, {rank}, id",
        rank = rank("step"),
    ))
    .bind(org_id)
    .bind(message_id)
    .bind(answered)
    .fetch_all(pool)
    .await?;
    Ok(Some(steps))
}

/// How a claim came about.
#[derive(Debug, Clone, Copy)]
pub struct ClaimedBy {
    /// The new holder.
    pub user_id: Uuid,
    /// The admin who gave the item to them, for an assignment.
    pub assigned_by: Option<Uuid>,
}

/// `claimed`, inside the claim's (or assignment's) transaction: the item's draft's message
/// was taken by `by.user_id` (named as the console shows them). Nothing when the item holds
/// no draft, since no message is waiting on it.
pub async fn claimed<'e>(
    db: impl PgExecutor<'e>,
    item_id: Uuid,
    by: ClaimedBy,
    stamp: Stamp<'_>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO message_journey (org_id, conversation_id, message_id, step, at, pod, detail,
                                      trace_id)
         SELECT q.org_id, q.conversation_id, m.id, 'claimed', clock_timestamp(), $3,
                jsonb_strip_nulls(jsonb_build_object(
                  'queue_item_id', q.id, 'user_id', $2::uuid,
                  'name', (SELECT COALESCE(u.display_name, split_part(u.email, '@', 1))
                          FROM users u WHERE u.id = $2),
                  'assigned_by', $5::uuid)),
                $4
         FROM expert_queue q
         JOIN messages m ON m.id = COALESCE(q.draft_message_id,
                                  (SELECT d.message_id FROM drafts d WHERE d.id = q.draft_id))
         WHERE q.id = $1",
    )
    .bind(item_id)
    .bind(by.user_id)
    .bind(stamp.pod)
    .bind(stamp.trace_id)
    .bind(by.assigned_by)
    .execute(db)
    .await?;
    Ok(())
}

/// Who released a reply.
#[derive(Debug, Clone, Copy)]
pub enum ReleasedBy<'a> {
    /// An expert.
    User(Uuid),
    /// The org's autopilot, under the rule that admitted the draft.
    Autopilot {
        /// The rule.
        rule: &'a str,
    },
}

/// `released`, inside the release's transaction: reply `reply_id` was released by `by`;
/// `reply` says what it was made of (`draft` unchanged, `edited`, or the expert's `own`).
pub async fn released<'e>(
    db: impl PgExecutor<'e>,
    reply_id: Uuid,
    by: ReleasedBy<'_>,
    reply: &str,
    stamp: Stamp<'_>,
) -> Result<(), StoreError> {
    let (user, rule) = match by {
        ReleasedBy::User(id) => (Some(id), None),
        ReleasedBy::Autopilot { rule } => (None, Some(rule)),
    };
    sqlx::query(
        "INSERT INTO message_journey (org_id, conversation_id, message_id, step, at, pod, detail,
                                      trace_id)
         SELECT m.org_id, m.conversation_id, m.id, 'released', clock_timestamp(), $4,
                jsonb_strip_nulls(jsonb_build_object(
                  'by', CASE WHEN $2::uuid IS NULL THEN 'autopilot' ELSE 'user' END,
                  'user_id', $2::uuid,
                  'name', (SELECT COALESCE(u.display_name, split_part(u.email, '@', 1))
                          FROM users u WHERE u.id = $2),
                  'rule', $3::text, 'reply', $6::text, 'unchanged', $6::text = 'draft',
                  'answers', m.answers_message_id)),
                $5
         FROM messages m WHERE m.id = $1",
    )
    .bind(reply_id)
    .bind(user)
    .bind(rule)
    .bind(stamp.pod)
    .bind(stamp.trace_id)
    .bind(reply)
    .execute(db)
    .await?;
    Ok(())
}

/// One provider call's outcome, as an `attempt` step records it: numbers and a class,
/// never the provider's words (they can quote the customer's message).
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    /// The attempt's number in its delivery round (1 for the first).
    pub number: i32,
    /// `accepted`, `retry` or `refused`.
    pub outcome: &'a str,
    /// The provider's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Without an answer or a status: `timeout`, `connect` or `transport`; with a refusal
    /// that has no status, `refused`.
    pub error_class: Option<&'a str>,
}

/// What an outbox outcome writes to the journey besides its closing step.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The provider call whose outcome this is; none when no call was made.
    pub attempt: Option<Attempt<'a>>,
    /// The writing pod and trace.
    pub stamp: Stamp<'a>,
}

/// The CTE (named `journey`) that an outbox statement adds to write its steps: `attempt`
/// the attempt's JSON (NULL: no call was made), `end` the closing step (`delivered`,
/// `dead_lettered`, or NULL) and `end_detail` its JSON, `pod` and `trace`, each an SQL
/// expression; `o` the outbox row the statement changed (`org_id`, `conversation_id`,
/// `message_id`). Written only when `o` has the row, so a write whose lease was lost
/// records nothing.
pub(crate) fn outbox_steps(
    attempt: &str,
    end: &str,
    end_detail: &str,
    pod: &str,
    trace: &str,
) -> String {
    format!(
        "journey AS (
           INSERT INTO message_journey (org_id, conversation_id, message_id, step, at, pod,
                                        detail, trace_id)
           SELECT o.org_id, o.conversation_id, o.message_id, s.step, clock_timestamp(), {pod},
                  s.detail, {trace}
           FROM o CROSS JOIN LATERAL (VALUES ('attempt', {attempt}::jsonb, 1),
                                     ({end}::text, {end_detail}::jsonb, 2)) AS s(step, detail, n)
           WHERE s.step IS NOT NULL AND s.detail IS NOT NULL
         )"
    )
}

impl Attempt<'_> {
    /// The step's detail.
    pub fn detail(&self) -> Value {
        let mut detail = serde_json::json!({"attempt": self.number, "outcome": self.outcome});
        if let Some(status) = self.status {
            detail["status"] = status.into();
        }
        if let Some(class) = self.error_class {
            detail["error_class"] = class.into();
        }
        detail
    }
}

#[cfg(test)]
mod tests {
    use switchboard_domain::JourneyStep;

    /// The table's `CHECK` admits exactly the domain's steps, so a step added to one and not
    /// the other fails here rather than in a pod's statement.
    #[test]
    fn the_check_lists_every_step_and_nothing_else() {
        let sql = include_str!("../../../migrations/20261208000001_message_journey.sql");
        let check = sql
            .split("CHECK (step IN (")
            .nth(1)
            .and_then(|rest| rest.split("))").next())
            .expect("the step CHECK");
        let listed: Vec<&str> = check
            .split(',')
            .map(|s| s.trim().trim_matches('\''))
            .collect();
        assert_eq!(listed, JourneyStep::SPELLINGS);
    }
}
