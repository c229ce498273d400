//! The statements of the `channel-inbound` job. Each is one round trip; where one statement
//! writes several tables, the order of its writes follows its data dependencies (a CTE runs
//! when the statement that reads it asks for its rows), so row locks are always taken in the
//! same order: customer, conversation, message, queue item, inbox event. (A new draft row is
//! written before the conversation; only a second run for the same message could wait on
//! it, and the inbox lease keeps such runs apart.)

use std::sync::LazyLock;
use switchboard_store::event_outbox::QUEUE_ITEM_PAYLOAD_SQL;

/// `context` (an `agent_context` column) with `$entry` appended to its `history_summary`,
/// keeping the last `$keep` entries; `{entry}` and `{keep}` name the parameters. Used only
/// where the conversation row is being written, so concurrent jobs serialise on its row
/// lock and no entry is lost.
fn history_append(context: &str, entry: &str, keep: &str) -> String {
    format!(
        "jsonb_set({context}, '{{history_summary}}',
           (SELECT COALESCE(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM (
              SELECT e, i FROM jsonb_array_elements(
                COALESCE({context} -> 'history_summary', '[]'::jsonb) || jsonb_build_array({entry}::jsonb)
              ) WITH ORDINALITY AS t(e, i)
              ORDER BY i DESC LIMIT {keep}) last_entries))"
    )
}

/// Stores a customer message and everything that follows from it, in one statement: the
/// customer (written only when new or renamed: an unchanged customer costs no row version),
/// the open conversation (found or created, its history extended), the message, the item
/// of an `awaiting_client` or `snoozed` conversation turned back to `pending` (the client
/// answered), and the `message_created` and `queue_item_updated` events in the event
/// outbox. Committed without waiting for the disk (see the job's step 2).
///
/// A message stored by an earlier run is not stored again and extends no history; the
/// statement then returns that message and its draft's fallback flag, if it has a draft.
/// Two runs of one event never overlap (the inbox lease); two *events* carrying the same
/// provider message at once make the later statement fail on the message's unique key,
/// which undoes its history entry too, and its retry finds the message stored.
///
/// `$1` org, `$2` channel, `$3` customer external id, `$4` display name, `$5` connection,
/// `$6` text, `$7` channel message id, `$8` reply-to, `$9` the new message's id, `$10` its
/// history entry, `$11` how many entries the history keeps, `$12` how many recent messages
/// to return. Returns the conversation, the message (new or earlier), whether it is new, the
/// earlier message's draft fallback flag, and the conversation's last `$12` messages before
/// this one (authors and bodies, oldest first).
pub static STORE_MESSAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)),
         earlier AS (
           SELECT m.id, d.fallback FROM messages m LEFT JOIN drafts d ON d.message_id = m.id
           WHERE m.org_id = $1 AND m.channel = $2 AND m.channel_message_id = $7
         ), known AS (
           SELECT id, display_name FROM customers
           WHERE org_id = $1 AND channel = $2 AND external_id = $3
         ), upserted AS (
           INSERT INTO customers (org_id, channel, external_id, display_name)
           SELECT $1, $2, $3, $4
           WHERE NOT EXISTS (SELECT 1 FROM known
                             WHERE $4::text IS NULL OR display_name IS NOT DISTINCT FROM $4::text)
           ON CONFLICT (org_id, channel, external_id) DO UPDATE
             SET display_name = COALESCE(EXCLUDED.display_name, customers.display_name), updated_at = now()
           RETURNING id
         ), customer AS (
           SELECT id FROM upserted UNION ALL SELECT id FROM known LIMIT 1
         ), conversation AS (
           INSERT INTO conversations (org_id, customer_id, channel, connection_id, agent_context)
           SELECT $1, customer.id, $2, $5,
                  jsonb_build_object('history_summary', CASE WHEN EXISTS (SELECT 1 FROM earlier)
                    THEN '[]'::jsonb ELSE jsonb_build_array($10::jsonb) END)
           FROM customer, async_commit
           -- The reply leaves through the connection the customer last wrote to.
           ON CONFLICT (org_id, customer_id, channel) WHERE status = 'open'
             DO UPDATE SET updated_at = now(), connection_id = EXCLUDED.connection_id,
               agent_context = CASE WHEN EXISTS (SELECT 1 FROM earlier)
                 THEN conversations.agent_context ELSE {append} END
           RETURNING id
         ), message AS (
           INSERT INTO messages (id, org_id, conversation_id, direction, author, body, channel,
                                 channel_message_id, reply_to)
           SELECT $9, $1, conversation.id, 'inbound'::message_direction, 'customer'::message_author,
                  $6, $2, $7, $8
           FROM conversation WHERE NOT EXISTS (SELECT 1 FROM earlier)
           RETURNING id, conversation_id
         ), reopened AS (
           UPDATE expert_queue AS q SET status = 'pending', version = version + 1,
                  snoozed_until = NULL, updated_at = now()
           WHERE conversation_id = (SELECT conversation_id FROM message)
             AND status IN ('awaiting_client', 'snoozed')
           RETURNING q.*
         ), events AS (
           INSERT INTO event_outbox (org_id, event, payload)
           SELECT $1, 'message_created',
                  jsonb_build_object('conversation_id', m.conversation_id, 'message_id', m.id)
           FROM message m
           UNION ALL
           SELECT q.org_id, 'queue_item_updated', {item} FROM reopened q
         ), recent AS (
           SELECT author::text AS author, body, created_at, id FROM messages
           WHERE conversation_id = (SELECT id FROM conversation)
           ORDER BY created_at DESC, id DESC LIMIT $12
         )
         SELECT c.id AS conversation_id,
                COALESCE((SELECT id FROM message), (SELECT id FROM earlier)) AS message_id,
                EXISTS (SELECT 1 FROM message) AS inserted,
                (SELECT fallback FROM earlier) AS drafted,
                ARRAY(SELECT author FROM recent ORDER BY created_at, id) AS authors,
                ARRAY(SELECT body FROM recent ORDER BY created_at, id) AS bodies
         FROM conversation c",
        append = history_append("conversations.agent_context", "$10", "$11"),
        item = QUEUE_ITEM_PAYLOAD_SQL,
    )
});

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
        append = history_append("agent_context", "$9", "$10"),
        item = QUEUE_ITEM_PAYLOAD_SQL,
    )
});

/// Marks the inbox event `$1` processed.
pub const MARK_PROCESSED: &str = "
UPDATE inbound_events SET processed_at = now(), attempts = attempts + 1, locked_until = NULL
WHERE id = $1 AND processed_at IS NULL";
