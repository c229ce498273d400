//! Customer and reply messages. The `channel-inbound` job's statements each are one round
//! trip; where one statement writes several tables, the order of its writes follows its
//! data dependencies (a CTE runs when the statement that reads it asks for its rows), so row
//! locks are always taken in the same order: customer, conversation, message, queue item,
//! inbox event. (A new draft row is written before the conversation; only a second run for
//! the same message could wait on it, and the inbox lease keeps such runs apart.)

use crate::event_outbox::QUEUE_ITEM_PAYLOAD_SQL;
use serde_json::Value;
use sqlx::PgPool;
use std::sync::LazyLock;
use switchboard_domain::jobs::InboxMessage;
use switchboard_domain::queue_state::Transition;
use switchboard_domain::trace::TraceParent;
use switchboard_domain::{Author, ChannelKind};
use uuid::Uuid;

/// A customer message to store, with what its statement writes besides.
#[derive(Debug, Clone)]
pub struct MessageRow {
    /// Owning org.
    pub org_id: Uuid,
    /// The channel it arrived on.
    pub channel: ChannelKind,
    /// The connection it arrived on, which the reply will leave through.
    pub connection_id: Uuid,
    /// The message as the webhook normalised it.
    pub message: InboxMessage,
    /// The id the message gets if it is new.
    pub message_id: Uuid,
    /// Its entry in the conversation's history.
    pub entry: Value,
    /// The storing job's span context (in the inbound event's trace): a reply answering
    /// this message links its own trace to it.
    pub traceparent: Option<TraceParent>,
    /// The inbox event it came in: its journey's intake steps become the message's.
    pub event_id: Uuid,
}

/// What storing a customer message found and did.
#[derive(Debug, sqlx::FromRow)]
pub struct StoredMessage {
    /// The customer's open conversation.
    pub conversation_id: Uuid,
    /// The new message, or the one an earlier run stored.
    pub message_id: Uuid,
    /// Whether the message is new.
    pub inserted: bool,
    /// The earlier message's draft, if it has one: its fallback flag.
    pub drafted: Option<bool>,
    /// The conversation's latest messages before this one, oldest first.
    pub authors: Vec<Author>,
    /// Their texts.
    pub bodies: Vec<String>,
    /// The org's autopilot is on: the draft is worth judging.
    pub autopilot: bool,
    /// The message stopped the item's hold.
    pub hold_stopped: bool,
}

/// Stores customer messages, one per input row, and everything that follows from each, in
/// one statement: the customer (written only when new or renamed: an unchanged customer
/// costs no row version), the open conversation (found or created, its history extended),
/// the message, the conversation's live item at a new version (an `awaiting_client` or
/// `snoozed` one turned back to `pending`: the client answered), and the `message_created` and `queue_item_updated`
/// events in the event outbox. Committed without waiting for the disk (see the job's step
/// 2). The rows' customers must be distinct (one statement cannot update a row twice), and
/// existing conversations are written in id order, as [`crate::drafts::store_batch`] writes them, so
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
/// `$12` how many recent messages to return; `$13` (an array) the storing job's trace
/// context; `$14` (an array) the inbox event. The journey's steps of that event so far
/// (received, committed, queued) are given the message, new or earlier, and its
/// conversation. Returns, per row in input order, the
/// conversation, the message (new or earlier), whether it is new, the earlier message's
/// draft fallback flag, and the conversation's last `$12` messages before this one (authors
/// and bodies, oldest first).
static STORE_MESSAGES: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{async_commit},
         input AS (
           SELECT t.org_id, t.channel::channel_kind AS channel, t.external_id, t.display_name,
                  t.connection_id, t.body, t.channel_message_id, t.reply_to, t.message_id,
                  t.entry, t.traceparent, t.event_id, t.n
           FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::text[],
                       $7::text[], $8::jsonb[], $9::uuid[], $10::jsonb[], $13::text[],
                       $14::uuid[])
             WITH ORDINALITY AS t(org_id, channel, external_id, display_name, connection_id,
                                  body, channel_message_id, reply_to, message_id, entry,
                                  traceparent, event_id, n)
         ), earlier AS (
           SELECT i.n, m.id, m.conversation_id, d.fallback FROM input i
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
                                 channel_message_id, reply_to, traceparent)
           SELECT i.message_id, i.org_id, v.id, 'inbound'::message_direction,
                  'customer'::message_author, i.body, i.channel, i.channel_message_id, i.reply_to,
                  i.traceparent
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
             status = {customer_writes},
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
         ), journey AS (
           -- Only this event's own steps, which nothing else writes: no lock order to keep.
           UPDATE message_journey j
           SET message_id = COALESCE(m.id, e.id), conversation_id = COALESCE(m.conversation_id,
                                                                         e.conversation_id)
           FROM input i
           LEFT JOIN message m ON m.id = i.message_id
           LEFT JOIN earlier e ON e.n = i.n
           WHERE j.inbound_event_id = i.event_id AND j.message_id IS NULL
             AND COALESCE(m.id, e.id) IS NOT NULL
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
        append = crate::conversations::history_append(
            "conversations.agent_context",
            "(EXCLUDED.agent_context -> 'history_summary' -> 0)",
            "$11"
        ),
        item = QUEUE_ITEM_PAYLOAD_SQL,
        async_commit = crate::async_commit!(),
        customer_writes = crate::expert_queue::status_after(
            "status",
            &[(Transition::CustomerWrites, "true")]
        ),
    )
});

/// Stores `rows` with [`STORE_MESSAGES`], the history keeping `history_len` entries and
/// each row returning its conversation's `recent` latest messages; one answer per row, in
/// order.
pub async fn store_batch(
    db: &PgPool,
    rows: &[MessageRow],
    history_len: i64,
    recent: i64,
) -> Result<Vec<StoredMessage>, sqlx::Error> {
    let uuids = |f: fn(&MessageRow) -> Uuid| rows.iter().map(f).collect::<Vec<_>>();
    let texts = |f: fn(&MessageRow) -> &str| rows.iter().map(f).collect::<Vec<_>>();
    sqlx::query_as(STORE_MESSAGES.as_str())
        .bind(uuids(|r| r.org_id))
        .bind(texts(|r| r.channel.as_str()))
        .bind(texts(|r| &r.message.customer_external_id))
        .bind(
            rows.iter()
                .map(|r| r.message.customer_name.as_deref())
                .collect::<Vec<_>>(),
        )
        .bind(uuids(|r| r.connection_id))
        .bind(texts(|r| &r.message.text))
        .bind(texts(|r| &r.message.channel_message_id))
        .bind(rows.iter().map(|r| &r.message.reply_to).collect::<Vec<_>>())
        .bind(uuids(|r| r.message_id))
        .bind(rows.iter().map(|r| &r.entry).collect::<Vec<_>>())
        .bind(history_len)
        .bind(recent)
        .bind(
            rows.iter()
                .map(|r| r.traceparent.map(|t| t.to_string()))
                .collect::<Vec<_>>(),
        )
        .bind(uuids(|r| r.event_id))
        .fetch_all(db)
        .await
}
