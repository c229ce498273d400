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

/// Stores customer messages, one per input row, and everything that follows from each, in
/// one statement: the customer (written only when new or renamed: an unchanged customer
/// costs no row version), the open conversation (found or created, its history extended),
/// the message, the conversation's live item at a new version (an `awaiting_client` or
/// `snoozed` one turned back to `pending`: the client answered), and the `message_created` and `queue_item_updated`
/// events in the event outbox. Committed without waiting for the disk (see the job's step
/// 2). The rows' customers must be distinct (one statement cannot update a row twice), and
/// existing conversations are written in id order, as [`STORE_DRAFTS`] writes them, so
/// two batches lock shared rows in the same order.
///
/// A message stored by an earlier run is not stored again and extends no history; its row
/// then returns that message and its draft's fallback flag, if it has a draft. Two runs of
/// one event never overlap (the inbox lease); two *events* carrying the same provider
/// message at once make the later statement fail on the message's unique key, which undoes
/// its history entry too, and its retry finds the message stored.
///
/// Arrays, one element per row: `$1` org, `$2` channel, `$3` customer external id, `$4`
/// display name, `$5` connection, `$6` text, `$7` channel message id, `$8` reply-to, `$9`
/// the new message's id, `$10` its history entry; `$11` how many entries the history keeps,
/// `$12` how many recent messages to return. Returns, per row in input order, the
/// conversation, the message (new or earlier), whether it is new, the earlier message's
/// draft fallback flag, and the conversation's last `$12` messages before this one (authors
/// and bodies, oldest first).
pub static STORE_MESSAGES: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{async_commit},
         input AS (
           SELECT t.org_id, t.channel::channel_kind AS channel, t.external_id, t.display_name,
                  t.connection_id, t.body, t.channel_message_id, t.reply_to, t.message_id,
                  t.entry, t.n
           FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::text[],
                       $7::text[], $8::jsonb[], $9::uuid[], $10::jsonb[])
             WITH ORDINALITY AS t(org_id, channel, external_id, display_name, connection_id,
                                  body, channel_message_id, reply_to, message_id, entry, n)
         ), earlier AS (
           SELECT i.n, m.id, d.fallback FROM input i
           JOIN messages m ON m.org_id = i.org_id AND m.channel = i.channel
                          AND m.channel_message_id = i.channel_message_id
           LEFT JOIN drafts d ON d.message_id = m.id
         ), known AS (
           SELECT i.n, c.id, c.display_name FROM input i
           JOIN customers c ON c.org_id = i.org_id AND c.channel = i.channel
                           AND c.external_id = i.external_id
         ), upserted AS (
           INSERT INTO customers (org_id, channel, external_id, display_name)
           SELECT i.org_id, i.channel, i.external_id, i.display_name FROM input i
           WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.n = i.n AND (i.display_name IS NULL
                             OR k.display_name IS NOT DISTINCT FROM i.display_name))
           ORDER BY i.org_id, i.channel, i.external_id
           ON CONFLICT (org_id, channel, external_id) DO UPDATE
             SET display_name = COALESCE(EXCLUDED.display_name, customers.display_name), updated_at = now()
           RETURNING id, org_id, channel, external_id
         ), customer AS (
           SELECT i.n, COALESCE(u.id, k.id) AS id FROM input i
           LEFT JOIN upserted u ON u.org_id = i.org_id AND u.channel = i.channel
                               AND u.external_id = i.external_id
           LEFT JOIN known k ON k.n = i.n
         ), conversation AS (
           -- The proposed row's history is the new entry alone, or empty for a message an
           -- earlier run stored; an existing conversation appends that entry.
           INSERT INTO conversations (org_id, customer_id, channel, connection_id, agent_context)
           SELECT i.org_id, c.id, i.channel, i.connection_id,
                  jsonb_build_object('history_summary', CASE WHEN EXISTS
                    (SELECT 1 FROM earlier e WHERE e.n = i.n)
                    THEN '[]'::jsonb ELSE jsonb_build_array(i.entry) END)
           FROM input i JOIN customer c ON c.n = i.n
           LEFT JOIN conversations o ON o.org_id = i.org_id AND o.customer_id = c.id
                                    AND o.channel = i.channel AND o.status = 'open',
                async_commit
           ORDER BY o.id NULLS LAST
           -- The reply leaves through the connection the customer last wrote to.
           ON CONFLICT (org_id, customer_id, channel) WHERE status = 'open'
             DO UPDATE SET updated_at = now(), connection_id = EXCLUDED.connection_id,
               agent_context = CASE WHEN EXCLUDED.agent_context -> 'history_summary' = '[]'::jsonb
                 THEN conversations.agent_context ELSE {append} END
           RETURNING id, customer_id
         ), conv AS (
           SELECT c.n, v.id FROM customer c JOIN conversation v ON v.customer_id = c.id
         ), message AS (
           INSERT INTO messages (id, org_id, conversation_id, direction, author, body, channel,
                                 channel_message_id, reply_to)
           SELECT i.message_id, i.org_id, v.id, 'inbound'::message_direction,
                  'customer'::message_author, i.body, i.channel, i.channel_message_id, i.reply_to
           FROM input i JOIN conv v ON v.n = i.n
           WHERE NOT EXISTS (SELECT 1 FROM earlier e WHERE e.n = i.n)
           RETURNING id, conversation_id
         ), held AS (
           -- The items on hold before this statement (its snapshot): the message stops them.
           SELECT id FROM expert_queue
           WHERE conversation_id IN (SELECT conversation_id FROM message) AND status = 'auto_pending'
         ), reopened AS (
           -- Every live item of the conversation gets a new version (the expert must see the
           -- message before acting: `If-Match`); an awaiting or snoozed one is pending again,
           -- and one on hold too: its draft answers an older message, and the new message's
           -- draft is judged afresh.
           UPDATE expert_queue AS q SET
             status = CASE WHEN status IN ('awaiting_client', 'snoozed', 'auto_pending')
                           THEN 'pending'::queue_status ELSE status END,
             send_at = NULL, autopilot_rule = NULL,
             snoozed_until = CASE WHEN status IN ('awaiting_client', 'snoozed')
                                  THEN NULL ELSE snoozed_until END,
             -- Answered, and now written to again: the org's SLA starts over from this
             -- message (a snoozed item keeps the deadline of the message it still owes).
             sla_due_at = CASE WHEN status = 'awaiting_client'
                               THEN now() + make_interval(mins => (
                                      SELECT o.sla_minutes FROM orgs o WHERE o.id = q.org_id))
                               ELSE sla_due_at END,
             version = version + 1, updated_at = now()
           WHERE conversation_id IN (SELECT conversation_id FROM message)
             AND status <> 'resolved'
           RETURNING q.*
         ), events AS (
           INSERT INTO event_outbox (org_id, event, payload)
           SELECT i.org_id, 'message_created',
                  jsonb_build_object('conversation_id', m.conversation_id, 'message_id', m.id)
           FROM message m JOIN input i ON i.message_id = m.id
           UNION ALL
           SELECT q.org_id, 'queue_item_updated', {item} FROM reopened q
         )
         SELECT v.id AS conversation_id, COALESCE(m.id, e.id) AS message_id,
                m.id IS NOT NULL AS inserted, e.fallback AS drafted,
                COALESCE(r.authors, '{{}}') AS authors, COALESCE(r.bodies, '{{}}') AS bodies,
                COALESCE((SELECT (o.autopilot ->> 'enabled')::boolean FROM orgs o
                          WHERE o.id = i.org_id), false) AS autopilot,
                EXISTS (SELECT 1 FROM held h JOIN reopened q ON q.id = h.id
                        WHERE q.conversation_id = v.id) AS hold_stopped
         FROM input i
         JOIN conv v ON v.n = i.n
         LEFT JOIN message m ON m.id = i.message_id
         LEFT JOIN earlier e ON e.n = i.n
         LEFT JOIN LATERAL (
           SELECT array_agg(author ORDER BY created_at, id) AS authors,
                  array_agg(body ORDER BY created_at, id) AS bodies
           FROM (SELECT author, body, created_at, id FROM messages
                 WHERE conversation_id = v.id ORDER BY created_at DESC, id DESC LIMIT $12) last
         ) r ON true
         ORDER BY i.n",
        append = history_append(
            "conversations.agent_context",
            "(EXCLUDED.agent_context -> 'history_summary' -> 0)",
            "$11"
        ),
        item = QUEUE_ITEM_PAYLOAD_SQL,
        async_commit = switchboard_store::async_commit!(),
    )
});

/// Stores drafts, one per input row, in one statement and so one atomic commit: for each
/// row, the draft, its entry appended to the conversation's history, the queue item created
/// or advanced (with its `queue_item_created` or `queue_item_updated` event in the event
/// outbox), and the inbox event marked processed. A row whose message already has a draft
/// (another run stored it) only marks its event. The rows' conversations must be distinct
/// (one statement cannot update a row twice); rows are written in conversation order, so
/// two batches lock shared rows in the same order.
///
/// A row the org's autopilot admitted (`crate::autopilot::judge_draft`) makes its item
/// `auto_pending`, with `send_at` its hold ahead, when two things still hold at commit: the
/// org's policy is the one judged (`$14`, so a pause or a change in between admits nothing),
/// and the item is at the version the facts were read at (`$15`; none: there was no item),
/// so nothing the rule did not see (an expert's action, a flag, another message) came
/// between. Otherwise the item is pending, as without an autopilot.
///
/// Arrays, one element per row: `$1` draft id, `$2` org, `$3` conversation, `$4` message,
/// `$5` body, `$6` confidence, `$7` cost, `$8` fallback, `$9` history entry, `$11` inbox
/// event, `$12` the hold in seconds (none: not admitted), `$13` the admitting rule, `$14`
/// the policy judged, `$15` the item's version judged; `$10` the history length. Returns
/// the inbox events whose draft was stored now, and whether their item is on hold.
pub static STORE_DRAFTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH input AS (
           SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[],
                                $6::real[], $7::float8[], $8::bool[], $9::jsonb[], $11::uuid[],
                                $12::int4[], $13::text[], $14::jsonb[], $15::int4[])
             AS t(draft_id, org_id, conversation_id, message_id, body, confidence, cost,
                  fallback, entry, event_id, hold, rule, policy, seen)
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
                  CASE WHEN a.seen IS NULL AND a.hold IS NOT NULL THEN 'auto_pending'::queue_status
                       ELSE 'pending'::queue_status END,
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
                      CASE WHEN n.newer AND a.hold IS NOT NULL THEN 'auto_pending'::queue_status
                           WHEN expert_queue.status = 'awaiting_client'
                             OR (n.newer AND expert_queue.status = 'auto_pending')
                           THEN 'pending'::queue_status
                           ELSE expert_queue.status END,
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
                     send_at, autopilot_rule, (xmax = 0) AS created
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
        append = history_append("conversations.agent_context", "i.entry", "$10"),
        item = QUEUE_ITEM_PAYLOAD_SQL,
        newer = NEWER_DRAFT,
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

/// Marks the inbox event `$1` processed.
pub const MARK_PROCESSED: &str = "
UPDATE inbound_events SET processed_at = now(), attempts = attempts + 1, locked_until = NULL
WHERE id = $1 AND processed_at IS NULL";
