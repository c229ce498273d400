//! The statements of the `channel-inbound` job. Each is one round trip; where one statement
//! writes several tables, the order of its writes follows its data dependencies (a CTE runs
//! when the statement that reads it asks for its rows), so row locks are always taken in the
//! same order: customer, conversation, message, queue item, inbox event. (A new draft row is
//! written before the conversation; only a second run for the same message could wait on
//! it, and the inbox lease keeps such runs apart.)

use std::sync::LazyLock;
use switchboard_store::event_outbox::QUEUE_ITEM_PAYLOAD_SQL;

/// `agent_context.history_summary` with `$entry` appended, keeping the last `$keep`
/// entries; `{entry}` and `{keep}` name the parameters. Used inside an `UPDATE
/// conversations`, so concurrent jobs serialise on the row lock and none is lost.
fn history_append(entry: &str, keep: &str) -> String {
    format!(
        "jsonb_set(agent_context, '{{history_summary}}',
           (SELECT COALESCE(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM (
              SELECT e, i FROM jsonb_array_elements(
                COALESCE(agent_context -> 'history_summary', '[]'::jsonb) || jsonb_build_array({entry}::jsonb)
              ) WITH ORDINALITY AS t(e, i)
              ORDER BY i DESC LIMIT {keep}) last_entries))"
    )
}

/// Customer upsert, open-conversation find-or-create and message insert, in that order.
/// `$1` org, `$2` channel, `$3` customer external id, `$4` display name, `$5` connection,
/// `$6` text, `$7` channel message id, `$8` reply-to. Returns the conversation id and the
/// new message id (NULL when the message was stored before).
pub const STORE_MESSAGE: &str = "
WITH customer AS (
  INSERT INTO customers (org_id, channel, external_id, display_name) VALUES ($1, $2, $3, $4)
  ON CONFLICT (org_id, channel, external_id) DO UPDATE
    SET display_name = COALESCE(EXCLUDED.display_name, customers.display_name), updated_at = now()
  RETURNING id
), conversation AS (
  INSERT INTO conversations (org_id, customer_id, channel, connection_id)
  SELECT $1, customer.id, $2, $5 FROM customer
  -- The reply leaves through the connection the customer last wrote to.
  ON CONFLICT (org_id, customer_id, channel) WHERE status = 'open'
    DO UPDATE SET updated_at = now(), connection_id = EXCLUDED.connection_id
  RETURNING id
), message AS (
  INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                        channel_message_id, reply_to)
  SELECT $1, conversation.id, 'inbound'::message_direction, 'customer'::message_author, $6, $2, $7, $8
  FROM conversation
  ON CONFLICT (org_id, channel, channel_message_id) WHERE channel_message_id IS NOT NULL DO NOTHING
  RETURNING id
)
SELECT conversation.id, message.id FROM conversation LEFT JOIN message ON true";

/// After a new customer message: appends it to the history, turns an `awaiting_client` or
/// `snoozed` item back to `pending` (the client answered), stores the `message_created`
/// and `queue_item_updated` events in the event outbox, and returns the conversation's last
/// 20 messages, oldest first, for the agent. `$1` conversation, `$2` history entry, `$3` how
/// many entries the history keeps, `$4` the new message, `$5` the org.
pub static RECORD_CUSTOMER_MESSAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH history AS (
           UPDATE conversations SET updated_at = now(), agent_context = {append}
           WHERE id = $1 RETURNING id
         ), reopened AS (
           UPDATE expert_queue AS q SET status = 'pending', version = version + 1,
                  snoozed_until = NULL, updated_at = now()
           WHERE conversation_id = (SELECT id FROM history)
             AND status IN ('awaiting_client', 'snoozed')
           RETURNING q.*
         ), events AS (
           INSERT INTO event_outbox (org_id, event, payload)
           SELECT $5, 'message_created', jsonb_build_object('conversation_id', $1::uuid, 'message_id', $4::uuid)
           UNION ALL
           SELECT q.org_id, 'queue_item_updated', {item} FROM reopened q
         )
         SELECT author::text, body FROM (
           SELECT author, body, created_at, id FROM messages WHERE conversation_id = $1
           ORDER BY created_at DESC, id DESC LIMIT 20) recent
         ORDER BY created_at, id",
        append = history_append("$2", "$3"),
        item = QUEUE_ITEM_PAYLOAD_SQL,
    )
});

/// The conversation's last 20 messages, oldest first (`$1` conversation).
pub const RECENT_MESSAGES: &str = "
SELECT author::text, body FROM (
  SELECT author, body, created_at, id FROM messages WHERE conversation_id = $1
  ORDER BY created_at DESC, id DESC LIMIT 20) recent
ORDER BY created_at, id";

/// A message stored by an earlier run, with its draft's fallback flag if it has one.
/// `$1` org, `$2` channel, `$3` channel message id.
pub const EXISTING_MESSAGE: &str = "
SELECT m.id, d.fallback FROM messages m LEFT JOIN drafts d ON d.message_id = m.id
WHERE m.org_id = $1 AND m.channel = $2 AND m.channel_message_id = $3";

/// Stores the draft, appends it to the history, creates or advances the queue item and
/// marks the inbox event processed: one statement, so one atomic commit. When the message
/// already has a draft (another run stored it) only the event is marked, and no row comes
/// back. `$1` draft id, `$2` org, `$3` conversation, `$4` message, `$5` body, `$6`
/// confidence, `$7` cost, `$8` fallback, `$9` history entry, `$10` history length, `$11`
/// inbox event. Stores the item's `queue_item_created` or `queue_item_updated` event in the
/// event outbox. Returns the queue item's id, version and whether it was created.
pub static STORE_DRAFT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH draft AS (
           INSERT INTO drafts (id, org_id, conversation_id, message_id, body, confidence, cost_usd, fallback)
           VALUES ($1, $2, $3, $4, $5, $6, $7::float8::numeric, $8)
           ON CONFLICT (message_id) DO NOTHING RETURNING id
         ), history AS (
           UPDATE conversations SET updated_at = now(), agent_context = {append}
           WHERE id = $3 AND EXISTS (SELECT 1 FROM draft) RETURNING id
         ), item AS (
           INSERT INTO expert_queue (org_id, conversation_id, status, draft_id, draft_body,
                                     draft_confidence, draft_cost_usd, flagged_for_review, sla_due_at)
           SELECT $2, history.id, 'pending'::queue_status, $1, $5, $6, $7::float8::numeric, $8, now() + interval '1 hour'
           FROM history
           ON CONFLICT (conversation_id) WHERE status <> 'resolved' DO UPDATE SET
             draft_id = EXCLUDED.draft_id,
             draft_body = EXCLUDED.draft_body,
             draft_confidence = EXCLUDED.draft_confidence,
             draft_cost_usd = EXCLUDED.draft_cost_usd,
             flagged_for_review = expert_queue.flagged_for_review OR EXCLUDED.flagged_for_review,
             version = expert_queue.version + 1,
             updated_at = now()
           RETURNING id, org_id, conversation_id, status, version, claimed_by, flagged_for_review,
                     (xmax = 0) AS created
         ), events AS (
           INSERT INTO event_outbox (org_id, event, payload)
           SELECT q.org_id, CASE WHEN q.created THEN 'queue_item_created' ELSE 'queue_item_updated' END,
                  {item}
           FROM item q
         ), processed AS (
           UPDATE inbound_events
           SET processed_at = now(), attempts = attempts + 1, locked_until = NULL
           -- Reads the item so that it runs first: the inbox row is locked last.
           WHERE id = $11 AND processed_at IS NULL AND (SELECT count(*) FROM item) >= 0
         )
         SELECT id, version, created FROM item",
        append = history_append("$9", "$10"),
        item = QUEUE_ITEM_PAYLOAD_SQL,
    )
});

/// Marks the inbox event `$1` processed.
pub const MARK_PROCESSED: &str = "
UPDATE inbound_events SET processed_at = now(), attempts = attempts + 1, locked_until = NULL
WHERE id = $1 AND processed_at IS NULL";
