//! A customer's export: one statement per section, each row one JSON record built by
//! Postgres, all read in one snapshot (`crate::export::Snapshot`).

use crate::export::{Param, Section};
use uuid::Uuid;

/// The sections of a customer's export: who they are, their conversations (with the
/// agent's running summary), every message both ways with its delivery, the drafts experts
/// were shown, the internal notes (flagged as such), each reply's deliveries and dead
/// letters, each message's journey, and the audit rows that name them or their
/// conversations.
pub fn sections(org_id: Uuid, customer_id: Uuid) -> Vec<Section> {
    let conversations = "SELECT id FROM conversations WHERE customer_id = $1 AND org_id = $2";
    let section = |name, single, sql: String| Section {
        name,
        sql,
        params: vec![Param::Uuid(Some(customer_id)), Param::Uuid(Some(org_id))],
        single,
    };
    vec![
        section(
            "customer",
            true,
            "SELECT jsonb_build_object('id', id, 'org_id', org_id, 'channel', channel,
                    'external_id', external_id, 'display_name', display_name,
                    'created_at', created_at, 'updated_at', updated_at)::text
             FROM customers WHERE id = $1 AND org_id = $2"
                .into(),
        ),
        section(
            "conversations",
            false,
            "SELECT jsonb_build_object('id', id, 'channel', channel, 'status', status,
                    'created_at', created_at, 'updated_at', updated_at, 'closed_at', closed_at,
                    'history_summary', agent_context -> 'history_summary')::text
             FROM conversations WHERE customer_id = $1 AND org_id = $2
             ORDER BY created_at, id"
                .into(),
        ),
        section(
            "messages",
            false,
            format!(
                "SELECT jsonb_build_object('id', m.id, 'conversation_id', m.conversation_id,
                        'direction', m.direction, 'author', m.author, 'body', m.body,
                        'created_at', m.created_at, 'delivery_status', m.delivery_status,
                        'delivered_at', m.delivered_at, 'delivery_error', m.delivery_error,
                        'provider_message_id', m.provider_message_id)::text
                 FROM messages m WHERE m.conversation_id IN ({conversations})
                 ORDER BY m.conversation_id, m.created_at, m.id"
            ),
        ),
        section(
            "drafts",
            false,
            format!(
                "SELECT jsonb_build_object('id', d.id, 'conversation_id', d.conversation_id,
                        'message_id', d.message_id, 'body', d.body, 'confidence', d.confidence,
                        'fallback', d.fallback, 'created_at', d.created_at)::text
                 FROM drafts d WHERE d.conversation_id IN ({conversations})
                 ORDER BY d.conversation_id, d.created_at, d.id"
            ),
        ),
        section(
            "notes",
            false,
            format!(
                "SELECT jsonb_build_object('id', n.id, 'conversation_id', n.conversation_id,
                        'internal', true, 'author_user_id', n.author_user_id, 'body', n.body,
                        'created_at', n.created_at)::text
                 FROM conversation_notes n WHERE n.conversation_id IN ({conversations})
                 ORDER BY n.conversation_id, n.created_at, n.id"
            ),
        ),
        section(
            "deliveries",
            false,
            format!(
                "SELECT jsonb_build_object('id', o.id, 'conversation_id', o.conversation_id,
                        'message_id', o.message_id, 'channel', o.channel, 'status', o.status,
                        'attempts', o.attempts, 'provider_id', o.provider_id,
                        'last_error', o.last_error, 'created_at', o.created_at,
                        'sent_at', o.sent_at,
                        'dead_letter', CASE WHEN f.id IS NULL THEN NULL ELSE jsonb_build_object(
                          'status', f.status, 'error', f.error, 'provider_status', f.provider_status,
                          'retries', f.retries, 'created_at', f.created_at) END)::text
                 FROM outbox o LEFT JOIN channel_failures f ON f.outbox_id = o.id
                 WHERE o.conversation_id IN ({conversations})
                 ORDER BY o.created_at, o.id"
            ),
        ),
        section(
            "journey",
            false,
            format!(
                "SELECT jsonb_build_object('message_id', j.message_id,
                        'conversation_id', j.conversation_id, 'step', j.step, 'at', j.at,
                        'pod', j.pod, 'detail', j.detail, 'trace_id', j.trace_id)::text
                 FROM message_journey j
                 WHERE j.message_id IN (SELECT m.id FROM messages m
                                        WHERE m.conversation_id IN ({conversations}))
                 ORDER BY j.message_id, j.at, j.id"
            ),
        ),
        section(
            "audit",
            false,
            format!(
                "SELECT jsonb_build_object('id', a.id, 'actor_user_id', a.actor_user_id,
                        'action', a.action, 'target_type', a.target_type,
                        'target_id', a.target_id, 'details', a.details,
                        'request_id', a.request_id, 'created_at', a.created_at)::text
                 FROM audit_log a
                 WHERE a.org_id = $2
                   AND (a.target_id = $1
                        OR a.target_id IN ({conversations})
                        OR a.target_id IN (SELECT q.id FROM expert_queue q
                                           WHERE q.conversation_id IN ({conversations}))
                        OR a.target_id IN (SELECT n.id FROM conversation_notes n
                                           WHERE n.conversation_id IN ({conversations}))
                        OR (a.details ->> 'conversation_id') IN
                           (SELECT id::text FROM conversations WHERE customer_id = $1 AND org_id = $2))
                 ORDER BY a.id"
            ),
        ),
    ]
}
