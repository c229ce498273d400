//! Drafts: the agent's proposed replies, stored with everything that follows from each in
//! one statement (see `messages` for the order its writes lock rows in).

use crate::event_outbox::QUEUE_ITEM_PAYLOAD_SQL;
use serde_json::Value;
use sqlx::PgPool;
use std::sync::LazyLock;
use switchboard_domain::queue_state::Transition;
use uuid::Uuid;

/// A draft the org's autopilot admitted, as the draft statement needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    /// Seconds until it sends itself.
    pub hold_secs: i32,
    /// The rule that admitted it.
    pub rule: String,
    /// The org's policy as stored when judged; the hold starts only if it still is.
    pub policy: Value,
    /// The item's version when judged (none: no item yet); the hold starts only at it.
    pub seen_version: Option<i32>,
}

/// A draft ready to store, with what its statement writes besides.
#[derive(Debug, Clone)]
pub struct DraftRow {
    /// The inbox event it completes.
    pub event_id: Uuid,
    /// The new draft's id.
    pub draft_id: Uuid,
    /// Owning org.
    pub org_id: Uuid,
    /// The conversation whose history and queue item it updates.
    pub conversation_id: Uuid,
    /// The customer message it answers.
    pub message_id: Uuid,
    /// Reply text.
    pub body: String,
    /// The agent's confidence.
    pub confidence: Option<f32>,
    /// What the agent call cost.
    pub cost: Option<f64>,
    /// Whether this is the fallback text.
    pub fallback: bool,
    /// Its entry in the conversation's history.
    pub entry: Value,
    /// The autopilot's admission of the draft, if it was admitted.
    pub hold: Option<Hold>,
    /// How long the agent took to answer (or to fail), in milliseconds: the journey's
    /// `drafted` says so.
    pub agent_ms: i64,
    /// The trace id of the job's span, while tracing is on.
    pub trace_id: Option<String>,
}

/// Stores drafts, one per input row, in one statement and so one atomic commit: for each
/// row, the draft, its entry appended to the conversation's history, the queue item created
/// or advanced (with its `queue_item_created` or `queue_item_updated` event in the event
/// outbox), and the inbox event marked processed. A row whose message already has a draft
/// (another run stored it) only marks its event. The rows' conversations must be distinct
/// (one statement cannot update a row twice); rows are written in conversation order, so
/// two batches lock shared rows in the same order.
///
/// A row the org's autopilot admitted (`switchboard_flows::autopilot::judge_draft`) makes its item
/// `auto_pending`, with `send_at` its hold ahead, when two things still hold at commit: the
/// org's policy is the one judged (`$14`, so a pause or a change in between admits nothing),
/// and the item is at the version the facts were read at (`$15`; none: there was no item),
/// so nothing the rule did not see (an expert's action, a flag, another message) came
/// between. Otherwise the item is pending, as without an autopilot.
///
/// Arrays, one element per row: `$1` draft id, `$2` org, `$3` conversation, `$4` message,
/// `$5` body, `$6` confidence, `$7` cost, `$8` fallback, `$9` history entry, `$11` inbox
/// event, `$12` the hold in seconds (none: not admitted), `$13` the admitting rule, `$14`
/// the policy judged, `$15` the item's version judged, `$17` the agent's milliseconds,
/// `$18` the trace id; `$10` the history length, `$16` the writing pod. Returns the inbox
/// events whose draft was stored now, and whether their item is on hold.
///
/// The journey's steps are written with them: `drafted` for each draft stored now (agent
/// latency, confidence, fallback), and `shown` for each item that now holds it (the item
/// experts see: `pending`, or `auto_pending` while the autopilot holds it); a draft that
/// reached no item (an older message's, or one a reply already answered) is drafted, not
/// shown.
static STORE_DRAFTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH input AS (
           SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[],
                                $6::real[], $7::float8[], $8::bool[], $9::jsonb[], $11::uuid[],
                                $12::int4[], $13::text[], $14::jsonb[], $15::int4[],
                                $17::int8[], $18::text[])
             AS t(draft_id, org_id, conversation_id, message_id, body, confidence, cost,
                  fallback, entry, event_id, hold, rule, policy, seen, agent_ms, trace_id)
         ), admit AS (
           SELECT i.conversation_id, i.hold, i.rule, i.seen FROM input i
           JOIN orgs o ON o.id = i.org_id
           WHERE i.hold IS NOT NULL AND NOT i.fallback AND o.autopilot = i.policy
         ), draft AS (
           INSERT INTO drafts (id, org_id, conversation_id, message_id, body, confidence, cost_usd, fallback)
           SELECT draft_id, org_id, conversation_id, message_id, body, confidence, cost::numeric, fallback
           FROM input ORDER BY conversation_id
           ON CONFLICT (message_id) DO NOTHING RETURNING id
         ), history AS (
           -- Only the agent's context changes: `updated_at` (the conversation's last
           -- activity, which the consoles' lists order by) moved with the message this
           -- draft answers. Leaving every indexed column alone makes this update HOT.
           UPDATE conversations SET agent_context = {append}
           FROM (SELECT * FROM input WHERE draft_id IN (SELECT id FROM draft)
                 ORDER BY conversation_id) i
           WHERE conversations.id = i.conversation_id RETURNING conversations.id
         ), item AS (
           -- Only a draft whose message no released reply has answered yet reaches the
           -- item; on an item it replaces only a draft of an older message, and it brings an
           -- `awaiting_client` item back to pending: the message came while the expert was
           -- releasing the previous draft, and is answered by nothing yet.
           INSERT INTO expert_queue (org_id, conversation_id, status, draft_id, draft_message_id,
                                     draft_body, draft_confidence, draft_cost_usd,
                                     flagged_for_review, sla_due_at, send_at, autopilot_rule)
           SELECT i.org_id, i.conversation_id,
                  {opened},
                  i.draft_id, i.message_id, i.body, i.confidence, i.cost::numeric, i.fallback,
                  now() + make_interval(mins => org.sla_minutes),
                  CASE WHEN a.seen IS NULL THEN now() + make_interval(secs => a.hold) END,
                  CASE WHEN a.seen IS NULL THEN a.rule END
           FROM input i JOIN orgs org ON org.id = i.org_id
           LEFT JOIN admit a ON a.conversation_id = i.conversation_id
           WHERE i.conversation_id IN (SELECT id FROM history)
             AND NOT EXISTS (
               SELECT 1 FROM messages o
               JOIN messages a ON a.id = o.answers_message_id
               JOIN messages m ON m.id = i.message_id
               WHERE o.conversation_id = i.conversation_id AND o.direction = 'outbound'
                 AND (a.created_at, a.id) >= (m.created_at, m.id))
           ORDER BY i.conversation_id
           ON CONFLICT (conversation_id) WHERE status <> 'resolved' DO UPDATE SET
             -- One sub-select, so that whether the draft is newer is worked out once per
             -- item rather than once per column (each time two message lookups); `OFFSET 0`
             -- keeps the planner from pulling the expression back into every column.
             -- The hold: only a newer draft admitted at the item's current version starts
             -- one; a newer draft not admitted ends one; an older draft changes nothing.
             (draft_id, draft_message_id, draft_body, draft_confidence, draft_cost_usd,
              flagged_for_review, status, send_at, autopilot_rule) = (
               SELECT CASE WHEN n.newer THEN EXCLUDED.draft_id ELSE expert_queue.draft_id END,
                      CASE WHEN n.newer THEN EXCLUDED.draft_message_id
                           ELSE expert_queue.draft_message_id END,
                      CASE WHEN n.newer THEN EXCLUDED.draft_body ELSE expert_queue.draft_body END,
                      CASE WHEN n.newer THEN EXCLUDED.draft_confidence
                           ELSE expert_queue.draft_confidence END,
                      CASE WHEN n.newer THEN EXCLUDED.draft_cost_usd
                           ELSE expert_queue.draft_cost_usd END,
                      expert_queue.flagged_for_review OR (n.newer AND EXCLUDED.flagged_for_review),
                      {moved},
                      CASE WHEN n.newer AND a.hold IS NOT NULL
                             THEN now() + make_interval(secs => a.hold)
                           WHEN n.newer THEN NULL ELSE expert_queue.send_at END,
                      CASE WHEN n.newer AND a.hold IS NOT NULL THEN a.rule
                           WHEN n.newer THEN NULL ELSE expert_queue.autopilot_rule END
               FROM (SELECT {newer} AS newer OFFSET 0) n
               LEFT JOIN admit a ON a.conversation_id = expert_queue.conversation_id
                                AND a.seen = expert_queue.version),
             -- Back to pending: the new customer message starts the org's SLA again.
             sla_due_at = CASE WHEN expert_queue.status = 'awaiting_client'
                               THEN EXCLUDED.sla_due_at ELSE expert_queue.sla_due_at END,
             version = expert_queue.version + 1,
             updated_at = now()
           RETURNING id, org_id, conversation_id, status, version, claimed_by, flagged_for_review,
                     send_at, autopilot_rule, (xmax = 0) AS created, draft_id
         ), journey AS (
           INSERT INTO message_journey (org_id, conversation_id, message_id, step, at, pod,
                                        detail, trace_id)
           SELECT i.org_id, i.conversation_id, i.message_id, 'drafted', clock_timestamp(), $16,
                  jsonb_strip_nulls(jsonb_build_object('draft_id', i.draft_id,
                    'agent_ms', i.agent_ms, 'confidence', i.confidence, 'fallback', i.fallback)),
                  i.trace_id
           FROM input i WHERE i.draft_id IN (SELECT id FROM draft)
           UNION ALL
           SELECT q.org_id, q.conversation_id, i.message_id, 'shown', clock_timestamp(), $16,
                  jsonb_strip_nulls(jsonb_build_object('queue_item_id', q.id,
                    'status', q.status, 'version', q.version, 'flagged_for_review',
                    q.flagged_for_review, 'autopilot_rule', q.autopilot_rule)),
                  i.trace_id
           FROM item q JOIN input i ON i.conversation_id = q.conversation_id
           WHERE q.draft_id = i.draft_id
         ), events AS (
           INSERT INTO event_outbox (org_id, event, payload)
           SELECT q.org_id, CASE WHEN q.created THEN 'queue_item_created' ELSE 'queue_item_updated' END,
                  {item}
           FROM item q
         ), processed AS (
           UPDATE inbound_events
           SET processed_at = now(), attempts = attempts + 1, locked_until = NULL
           -- Reads the items so that they are written first: inbox rows are locked last.
           WHERE id IN (SELECT event_id FROM input) AND processed_at IS NULL
             AND (SELECT count(*) FROM item) >= 0
         )
         SELECT i.event_id, item.status = 'auto_pending' AS held
         FROM input i JOIN item ON item.conversation_id = i.conversation_id",
        append = crate::conversations::history_append("conversations.agent_context", "i.entry", "$10"),
        item = QUEUE_ITEM_PAYLOAD_SQL,
        newer = NEWER_DRAFT,
        opened = crate::expert_queue::opening_status(
            &[(Transition::OpenOnHold, "a.seen IS NULL AND a.hold IS NOT NULL")],
            Transition::Open
        ),
        moved = crate::expert_queue::status_after(
            "expert_queue.status",
            &[
                (Transition::Hold, "n.newer AND a.hold IS NOT NULL"),
                (Transition::DraftArrives, "true"),
                (Transition::NewerDraft, "n.newer"),
            ]
        ),
    )
});

/// Inside `ON CONFLICT … DO UPDATE` of the queue item: whether the incoming draft
/// (`EXCLUDED.draft_message_id`) answers a newer customer message than the item's draft, or
/// the item holds none. A slow draft never replaces the draft of a later message.
const NEWER_DRAFT: &str = "(expert_queue.draft_id IS NULL OR
  (SELECT ROW(m.created_at, m.id) FROM messages m WHERE m.id = COALESCE(
     expert_queue.draft_message_id,
     (SELECT d.message_id FROM drafts d WHERE d.id = expert_queue.draft_id)))
  < (SELECT ROW(m.created_at, m.id) FROM messages m WHERE m.id = EXCLUDED.draft_message_id))";

/// Stores `rows` with [`STORE_DRAFTS`], the history keeping `history_len` entries; returns
/// the inbox events whose draft was stored now, and whether their item is on hold.
pub async fn store_batch(
    db: &PgPool,
    rows: &[DraftRow],
    history_len: i64,
    pod: &str,
) -> Result<Vec<(Uuid, bool)>, sqlx::Error> {
    let column = |f: fn(&DraftRow) -> Uuid| rows.iter().map(f).collect::<Vec<_>>();
    let holds = || rows.iter().map(|r| r.hold.as_ref());
    sqlx::query_as(STORE_DRAFTS.as_str())
        .bind(column(|r| r.draft_id))
        .bind(column(|r| r.org_id))
        .bind(column(|r| r.conversation_id))
        .bind(column(|r| r.message_id))
        .bind(rows.iter().map(|r| r.body.as_str()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.confidence).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.cost).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.fallback).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| &r.entry).collect::<Vec<_>>())
        .bind(history_len)
        .bind(column(|r| r.event_id))
        .bind(holds().map(|h| h.map(|h| h.hold_secs)).collect::<Vec<_>>())
        .bind(
            holds()
                .map(|h| h.map(|h| h.rule.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(holds().map(|h| h.map(|h| &h.policy)).collect::<Vec<_>>())
        .bind(
            holds()
                .map(|h| h.and_then(|h| h.seen_version))
                .collect::<Vec<_>>(),
        )
        .bind(pod)
        .bind(rows.iter().map(|r| r.agent_ms).collect::<Vec<_>>())
        .bind(
            rows.iter()
                .map(|r| r.trace_id.as_deref())
                .collect::<Vec<_>>(),
        )
        .fetch_all(db)
        .await
}
