-- Scratch data for timing `GET /reports/metrics` (docs/PERFORMANCE.md, "Reports page"):
-- two orgs, each with 50 000 conversations over the last 92 days, every conversation five
-- customer messages an hour apart each answered 30 s to 30 min later: 1 000 000 messages.
-- Every reply has its release audit row, plus one claim row (other audit traffic).
-- Run on a scratch database migrated to the current schema:
--   psql -v ON_ERROR_STOP=1 "$SCRATCH_URL" -f scripts/report-metrics-data.sql
SELECT setseed(0.42);

INSERT INTO orgs (name) SELECT 'perf-' || g FROM generate_series(1, 2) g;
INSERT INTO users (email, password_hash)
SELECT 'expert' || g || '@perf.test', 'x' FROM generate_series(1, 10) g;
INSERT INTO org_members (org_id, user_id, role)
SELECT o.id, u.id, 'expert' FROM orgs o CROSS JOIN users u;
INSERT INTO channel_connections (org_id, channel, name, secrets_ciphertext)
SELECT o.id, c, 'perf-' || c, '\x00'::bytea
FROM orgs o CROSS JOIN unnest(enum_range(NULL::channel_kind)) c;

CREATE TEMP TABLE perf_conv AS
SELECT gen_random_uuid() AS id, gen_random_uuid() AS customer_id, o.id AS org_id,
       (enum_range(NULL::channel_kind))[1 + g % 4] AS channel,
       now() - interval '92 days' + (g * interval '92 days' / 50000) AS started, g
FROM orgs o CROSS JOIN generate_series(1, 50000) g;

INSERT INTO customers (id, org_id, channel, external_id)
SELECT customer_id, org_id, channel, 'c' || g FROM perf_conv;
INSERT INTO conversations (id, org_id, customer_id, channel, connection_id, created_at)
SELECT p.id, p.org_id, p.customer_id, p.channel, cc.id, p.started
FROM perf_conv p JOIN channel_connections cc ON cc.org_id = p.org_id AND cc.channel = p.channel;
INSERT INTO expert_queue (org_id, conversation_id, status, created_at, sla_due_at)
SELECT org_id, id, 'awaiting_client', started, started + interval '4 hours 1 minute' FROM perf_conv;

CREATE TEMP TABLE perf_pair AS
SELECT p.id AS conversation_id, p.org_id, p.channel, k,
       p.started + k * interval '1 hour' AS asked,
       p.started + k * interval '1 hour' + make_interval(secs => 30 + random() * 1770) AS answered,
       gen_random_uuid() AS reply_id, (random() * 10)::int % 10 AS expert, random() AS r
FROM perf_conv p CROSS JOIN generate_series(0, 4) k;

INSERT INTO messages (org_id, conversation_id, direction, author, body, channel, created_at)
SELECT org_id, conversation_id, 'inbound', 'customer', 'Where is my order?', channel, asked
FROM perf_pair;
INSERT INTO messages (id, org_id, conversation_id, direction, author, body, channel, created_at,
                      delivery_status)
SELECT reply_id, org_id, conversation_id, 'outbound',
       CASE WHEN r < 0.6 THEN 'agent' ELSE 'expert' END::message_author,
       'It ships tomorrow.', channel, answered, 'sent'
FROM perf_pair;

INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details, created_at)
SELECT p.org_id, u.id, CASE WHEN r < 0.85 THEN 'queue_item.release' ELSE 'queue_item.respond' END,
       'expert_queue', q.id,
       jsonb_build_object('message_id', p.reply_id,
                          'reply', CASE WHEN r < 0.6 THEN 'draft' WHEN r < 0.85 THEN 'edited' ELSE 'own' END,
                          'sla_due_at', p.asked + interval '15 minutes'),
       p.answered
FROM perf_pair p
JOIN expert_queue q ON q.conversation_id = p.conversation_id
JOIN users u ON u.email = 'expert' || (1 + p.expert) || '@perf.test'
UNION ALL
SELECT p.org_id, u.id, 'queue_item.claim', 'expert_queue', q.id, '{}'::jsonb,
       p.answered - interval '20 seconds'
FROM perf_pair p
JOIN expert_queue q ON q.conversation_id = p.conversation_id
JOIN users u ON u.email = 'expert' || (1 + p.expert) || '@perf.test';

VACUUM ANALYZE;
SELECT (SELECT count(*) FROM messages) AS messages, (SELECT count(*) FROM audit_log) AS audit_rows;
