#!/usr/bin/env bash
# The Postgres floor of processing one inbound event: the rows the app leaves behind per
# event, written with as few statements as possible, so the app's own cost per event can
# be read against what Postgres needs at the least.
#
# Per processed Slack event the app writes: the inbox row (`inbound_events`, inserted by the
# webhook, claimed, later marked processed), the customer (inserted only when new), the
# open conversation (found or created, its `agent_context` history extended by the customer
# message and by the draft), the customer message (`messages`; the draft is not a message),
# the draft (`drafts`), the conversation's live `expert_queue` item (created, or given a new
# version for the message and another for the draft) and its realtime events: in
# `event_outbox` first (`message_created`, then `queue_item_updated` twice, or
# `queue_item_created` once for a new item), then numbered into `events` by the relay, which
# bumps `org_event_seq` and deletes the outbox rows.
#
# Here pgbench writes the same rows for batches of B events over a fresh database `floor`
# built from migrations/ (same schema and indexes), one multi-row statement per table:
#   1. the webhook's insert of the B inbox rows (its own commit, as a webhook's 2xx needs);
#   2. one transaction: customers (new ones only), conversations (find-or-create and both
#      history entries at once), messages, drafts, queue items together with their outbox
#      events (one statement), inbox rows marked processed;
#   3. the relay: outbox rows deleted, numbered into `events`, `org_event_seq` bumped (its
#      `published_seq` with it), one statement in its own commit.
# Events are spread over BENCH_FLOOR_CUSTOMERS customers (the B customers of a batch are
# distinct, as in the app's batches), so most land on an existing conversation and item.
# Message texts and payloads are those of sb-loadgen's signed Slack webhooks.
#
# Reports events/s, Postgres CPU per event (pidstat over the cluster's processes, the first
# 2 s skipped), WAL bytes and records per event (pg_stat_wal, cluster-wide: keep other load
# off the cluster while it runs), statements (8 per batch), round trips (with BEGIN and
# COMMIT) and commits (3) per event, and the rows per event in every table after the run
# (the outbox drained), as one JSON line (the last line of the output), also appended to
# .dev/bench/floor.jsonl. pgbench's latency per statement goes to stderr.
#
# Usage: scripts/bench-floor.sh   (against the dev stack's Postgres; start it with
#        SB_NATIVE=1 SB_SKIP_BUILD=1 scripts/dev-up.sh, or point SB_PG_PORT at another)
# Env:   BENCH_FLOOR_BATCH (64) events per batch; 1 is one event per transaction, still one
#        statement per table. BENCH_FLOOR_CUSTOMERS (1000), BENCH_FLOOR_CLIENTS (4) pgbench
#        connections, BENCH_FLOOR_SECONDS (15), SB_PG_PORT (55432).
# Drops and recreates the database `floor` at every run.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

BATCH="${BENCH_FLOOR_BATCH:-64}"
CUSTOMERS="${BENCH_FLOOR_CUSTOMERS:-1000}"
CLIENTS="${BENCH_FLOOR_CLIENTS:-4}"
SECONDS_RUN="${BENCH_FLOOR_SECONDS:-15}"
SKIP=2
DB=floor
BENCH="$DEV/bench"
ORG=00000000-0000-4000-8000-00000000f001
CONN=00000000-0000-4000-8000-00000000f002
# What the app stores when the agent cannot draft: a draft of a realistic length.
DRAFT="Thanks for your message. One of our team will get back to you shortly."

for var in BATCH CUSTOMERS CLIENTS SECONDS_RUN; do
  [[ "${!var}" =~ ^[1-9][0-9]*$ ]] || die "$var must be a positive number"
done
[ "$BATCH" -le "$CUSTOMERS" ] || die "a batch's customers are distinct: BENCH_FLOOR_BATCH must be <= BENCH_FLOOR_CUSTOMERS"
[ "$SECONDS_RUN" -gt $((SKIP + 1)) ] || die "BENCH_FLOOR_SECONDS must be more than $((SKIP + 1))"
for tool in pgbench pidstat psql createdb dropdb; do
  command -v "$tool" >/dev/null || die "$tool is needed (apt-get install sysstat postgresql-client)"
done

pg() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
pg -d postgres -Atc "SELECT 1" >/dev/null 2>&1 ||
  die "Postgres is not reachable on 127.0.0.1:$PG_PORT; start it with SB_NATIVE=1 SB_SKIP_BUILD=1 scripts/dev-up.sh (or set SB_PG_PORT)"

log "Fresh database $DB from migrations/ on 127.0.0.1:$PG_PORT"
dropdb -h 127.0.0.1 -p "$PG_PORT" -U postgres --if-exists --force "$DB"
createdb -h 127.0.0.1 -p "$PG_PORT" -U postgres "$DB"
for file in migrations/*.sql; do
  # Like sqlx: each migration in its own transaction but for those marked otherwise.
  if head -n 1 "$file" | grep -q -- '-- no-transaction'; then
    pg -d "$DB" -f "$file" >/dev/null
  else
    pg -d "$DB" -1 -f "$file" >/dev/null
  fi
done
pg -d "$DB" -c "
  INSERT INTO orgs (id, name) VALUES ('$ORG', 'Floor');
  INSERT INTO channel_connections (id, org_id, channel, name, secrets_ciphertext)
  VALUES ('$CONN', '$ORG', 'slack', 'floor', '\\x00');
  ANALYZE"

# One batch's input rows: g in 1..B, i the event's number (unique per run: the client and
# its batch counter), c its customer. Ids derive from them (md5 of a prefix and the
# number), so each statement finds the rows the earlier ones wrote without a read.
input="SELECT g, (:k)::bigint * 100000 + g AS i, (:off + g) % :customers AS c FROM generate_series(1, :batch) AS g"
ts="'1764900000.' || i"
entry_customer="jsonb_build_object('role', 'customer', 'text', 'hello ' || i, 'message_id', md5('m' || i)::uuid)"
entry_draft="jsonb_build_object('role', 'agent_draft', 'text', '$DRAFT', 'draft_id', md5('d' || i)::uuid)"
item_payload="jsonb_build_object('id', q.id, 'conversation_id', q.conversation_id, 'status', q.status, 'version', %s, 'claimed_by', q.claimed_by, 'flagged_for_review', q.flagged_for_review)"
# shellcheck disable=SC2059  # the format is ours
item_now="$(printf "$item_payload" q.version)"
# shellcheck disable=SC2059
item_reopened="$(printf "$item_payload" 'q.version - 1')"

relay_sql() {
  cat <<SQL
WITH moved AS (
  DELETE FROM event_outbox WHERE id IN (
    SELECT id FROM event_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
  RETURNING id, org_id, event, payload
), counter AS (
  INSERT INTO org_event_seq AS s (org_id, seq, published_seq, numbered_at)
  SELECT '$ORG', n, n, now() FROM (SELECT count(*) AS n FROM moved) c WHERE n > 0
  ON CONFLICT (org_id) DO UPDATE SET seq = s.seq + EXCLUDED.seq,
    published_seq = s.seq + EXCLUDED.seq, numbered_at = now()
  RETURNING s.seq AS last
)
INSERT INTO events (org_id, seq, event, dedup_key, payload)
SELECT m.org_id, (SELECT last FROM counter) - (SELECT count(*) FROM moved)
         + row_number() OVER (ORDER BY m.id),
       m.event,
       m.event || ':' || encode(sha256(convert_to(m.event || chr(10) || m.payload::text, 'UTF8')), 'hex'),
       m.payload
FROM moved m;
SQL
}

script="$(mktemp /tmp/bench-floor.XXXXXX.sql)"
pidlist="$(mktemp /tmp/bench-floor.XXXXXX.pids)"
cpu="$(mktemp /tmp/bench-floor.XXXXXX.cpu)"
out="$(mktemp /tmp/bench-floor.XXXXXX.out)"
watcher=""
sampler=""
cleanup() {
  [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
  [ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true
  rm -f "$script" "$pidlist" "$cpu" "$out"
}
trap cleanup EXIT

cat >"$script" <<SQL
\set n :n + 1
\set k :client_id * 1000000000 + :n
\set off random(0, :customers - 1)
-- 1. The webhook: the inbox rows, normalised payload and raw Slack body.
INSERT INTO inbound_events (id, org_id, connection_id, channel, dedup_key, payload)
SELECT md5('e' || i)::uuid, '$ORG', '$CONN', 'slack', 'Ev' || i,
       jsonb_build_object(
         'message', jsonb_build_object('customer_external_id', 'U' || c, 'customer_name', NULL,
           'text', 'hello ' || i, 'channel_message_id', 'C1:' || $ts,
           'reply_to', jsonb_build_object('channel', 'C1', 'thread_ts', $ts)),
         'raw', jsonb_build_object('type', 'event_callback', 'event_id', 'Ev' || i, 'team_id', 'T1',
           'event', jsonb_build_object('type', 'message', 'user', 'U' || c, 'text', 'hello ' || i,
             'channel', 'C1', 'ts', $ts)))
FROM ($input) x
ON CONFLICT (connection_id, dedup_key) DO NOTHING;
-- 2. Processing, one transaction.
BEGIN;
INSERT INTO customers (id, org_id, channel, external_id)
SELECT md5('c' || c)::uuid, '$ORG', 'slack', 'U' || c FROM ($input) x ORDER BY 4
ON CONFLICT (org_id, channel, external_id) DO NOTHING;
INSERT INTO conversations (id, org_id, customer_id, channel, connection_id, agent_context)
SELECT md5('v' || c)::uuid, '$ORG', md5('c' || c)::uuid, 'slack', '$CONN',
       jsonb_build_object('history_summary', jsonb_build_array($entry_customer, $entry_draft))
FROM ($input) x ORDER BY 1
ON CONFLICT (org_id, customer_id, channel) WHERE status = 'open' DO UPDATE
SET updated_at = now(), connection_id = EXCLUDED.connection_id,
    agent_context = jsonb_set(conversations.agent_context, '{history_summary}',
      (SELECT COALESCE(jsonb_agg(e ORDER BY n), '[]'::jsonb) FROM (
         SELECT e, n FROM jsonb_array_elements(
           COALESCE(conversations.agent_context -> 'history_summary', '[]'::jsonb)
           || (EXCLUDED.agent_context -> 'history_summary')) WITH ORDINALITY AS t(e, n)
         ORDER BY n DESC LIMIT 10) last_entries));
INSERT INTO messages (id, org_id, conversation_id, direction, author, body, channel,
                      channel_message_id, reply_to)
SELECT md5('m' || i)::uuid, '$ORG', md5('v' || c)::uuid, 'inbound', 'customer', 'hello ' || i,
       'slack', 'C1:' || $ts, jsonb_build_object('channel', 'C1', 'thread_ts', $ts)
FROM ($input) x;
INSERT INTO drafts (id, org_id, conversation_id, message_id, body, confidence, cost_usd, fallback)
SELECT md5('d' || i)::uuid, '$ORG', md5('v' || c)::uuid, md5('m' || i)::uuid, '$DRAFT', 0.9,
       0.0004, false
FROM ($input) x ORDER BY 3;
WITH item AS (
  INSERT INTO expert_queue (org_id, conversation_id, status, draft_id, draft_message_id,
                            draft_body, draft_confidence, draft_cost_usd, flagged_for_review,
                            sla_due_at)
  SELECT o.id, md5('v' || c)::uuid, 'pending', md5('d' || i)::uuid, md5('m' || i)::uuid,
         '$DRAFT', 0.9, 0.0004, false, now() + make_interval(mins => o.sla_minutes)
  FROM ($input) x JOIN orgs o ON o.id = '$ORG' ORDER BY 2
  ON CONFLICT (conversation_id) WHERE status <> 'resolved' DO UPDATE
  SET draft_id = EXCLUDED.draft_id, draft_message_id = EXCLUDED.draft_message_id,
      draft_body = EXCLUDED.draft_body, draft_confidence = EXCLUDED.draft_confidence,
      draft_cost_usd = EXCLUDED.draft_cost_usd, version = expert_queue.version + 2,
      updated_at = now()
  RETURNING id, org_id, conversation_id, status, version, claimed_by, flagged_for_review,
            (xmax = 0) AS created
)
INSERT INTO event_outbox (org_id, event, payload)
SELECT '$ORG', 'message_created',
       jsonb_build_object('conversation_id', md5('v' || c)::uuid, 'message_id', md5('m' || i)::uuid)
FROM ($input) x
UNION ALL
SELECT q.org_id, 'queue_item_updated', $item_reopened FROM item q WHERE NOT q.created
UNION ALL
SELECT q.org_id, CASE WHEN q.created THEN 'queue_item_created' ELSE 'queue_item_updated' END,
       $item_now
FROM item q;
UPDATE inbound_events SET processed_at = now(), attempts = attempts + 1, locked_until = NULL
WHERE id IN (SELECT md5('e' || i)::uuid FROM ($input) x) AND processed_at IS NULL;
COMMIT;
-- 3. The relay.
$(relay_sql ":relay")
SQL

# Statements that write (each ends a line with `;`; BEGIN and COMMIT aside), and commits,
# per batch.
statements=$(($(grep -c ';$' "$script") - 2))
commits=3

# The cluster's processes: the postmaster (from its data directory) and its children,
# listed every half second (backends and autovacuum workers come and go). Without the
# data directory (a Postgres in a container), every process named postgres counts.
datadir="$(pg -d postgres -Atc "SHOW data_directory")"
postmaster=""
if [ -r "$datadir/postmaster.pid" ]; then
  postmaster="$(pid_of "$datadir/postmaster.pid")"
else
  warn "cannot read $datadir/postmaster.pid: counting the CPU of every postgres process"
fi
if [ -n "$postmaster" ]; then
  echo "$postmaster" >"$pidlist"
  (while :; do ps -o pid= --ppid "$postmaster" >>"$pidlist" || true; sleep 0.5; done) &
  watcher=$!
fi

wal() { pg -d "$DB" -Atc "SELECT pg_current_wal_lsn(), wal_records, wal_fpi FROM pg_stat_wal" | tr '|' ' '; }
read -r lsn0 records0 fpi0 < <(wal)

log "pgbench: batches of $BATCH over $CUSTOMERS customers, $CLIENTS clients, ${SECONDS_RUN}s"
started=$(date +%T)
LC_ALL=C pidstat -h -u -C postgres 1 >"$cpu" &
sampler=$!
pgbench -n -h 127.0.0.1 -p "$PG_PORT" -U postgres -M prepared -f "$script" \
  -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_RUN" -P 1 -r --max-tries=20 \
  -D n=0 -D batch="$BATCH" -D customers="$CUSTOMERS" -D relay=$((3 * BATCH)) \
  "$DB" >"$out" 2>&1 || { cat "$out" >&2; die "pgbench failed"; }
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=""
read -r lsn1 records1 fpi1 < <(wal)
if [ -n "$watcher" ]; then
  kill "$watcher" 2>/dev/null || true
  wait "$watcher" 2>/dev/null || true
  watcher=""
fi

# pgbench's summary and its latency per statement, for the reader.
sed -n '/^transaction type:/,$p' "$out" >&2
batches=$(awk '/number of transactions actually processed:/ { split($6, a, "/"); print a[1] }' "$out")
failed=$(awk '/number of failed transactions:/ { print $5 }' "$out")
if [ -z "$batches" ] || [ "$batches" -eq 0 ]; then
  cat "$out" >&2
  die "pgbench processed nothing"
fi
events=$((batches * BATCH))
# Batches per second from the progress lines past the first SKIP seconds (the CPU window).
rate=$(awk -v skip="$SKIP" -v b="$BATCH" '/^progress: / && $2 + 0 > skip { s += $4; n++ }
  END { if (n) printf "%.1f", s / n * b; else print 0 }' "$out")
# Mean of the summed %CPU of the cluster's processes per second, past the first SKIP seconds.
# pidstat stamps its samples with the local time of day (HH:MM:SS), as `date +%T` does.
pg_cpu=$(awk -v start="$started" -v skip="$SKIP" -v secs="$SECONDS_RUN" -v pidfile="$pidlist" '
  function sod(t, a) { split(t, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
  BEGIN {
    while ((getline p < pidfile) > 0) { gsub(/ /, "", p); if (p != "") { want[p] = 1; pids++ } }
    s0 = sod(start)
  }
  /^#/ || NF < 9 || $1 !~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/ { next }
  {
    t = sod($1) - s0
    if (t < 0) t += 86400
    if (t <= skip || t > secs) next
    seen[t] = 1
    if (pids == 0 || ($3 in want)) sum[t] += $8
  }
  END { for (t in seen) { s += sum[t]; n++ } if (n) printf "%.1f", s / n; else print 0 }' "$cpu")

# Drain what the last batches left in the outbox (as the relay would), then count.
for _ in $(seq 1000); do
  left=$(pg -d "$DB" -Atc "SELECT count(*) FROM event_outbox")
  [ "$left" -gt 0 ] || break
  relay_sql 1000 | pg -d "$DB" >/dev/null
done
counts=$(pg -d "$DB" -Atc "
  SELECT (SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL),
         (SELECT count(*) FROM inbound_events), (SELECT count(*) FROM customers),
         (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages),
         (SELECT count(*) FROM drafts), (SELECT count(*) FROM expert_queue),
         (SELECT count(*) FROM event_outbox), (SELECT count(*) FROM events),
         (SELECT seq FROM org_event_seq WHERE org_id = '$ORG'),
         (SELECT sum(version) FROM expert_queue)" | tr '|' ' ')
read -r processed inbox customers conversations messages drafts items outbox numbered seq versions <<<"$counts"
[ "$processed" -eq "$events" ] || warn "$processed events processed, pgbench reports $events"

json=$(awk -v ts="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -v batch="$BATCH" -v customers_env="$CUSTOMERS" \
  -v clients="$CLIENTS" -v secs="$SECONDS_RUN" -v events="$events" -v failed="${failed:-0}" \
  -v rate="$rate" -v cpu="$pg_cpu" -v statements="$statements" -v commits="$commits" \
  -v wal_bytes="$(pg -d "$DB" -Atc "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")" \
  -v wal_records=$((records1 - records0)) -v wal_fpi=$((fpi1 - fpi0)) \
  -v processed="$processed" -v inbox="$inbox" -v customers="$customers" \
  -v conversations="$conversations" -v messages="$messages" -v drafts="$drafts" \
  -v items="$items" -v outbox="$outbox" -v numbered="$numbered" -v seq="${seq:-0}" \
  -v versions="${versions:-0}" 'BEGIN {
  per = (rate > 0) ? cpu / 100 * 1e6 / rate : 0
  printf "{\"bench\":\"floor\",\"ts\":\"%s\",\"batch\":%d,\"clients\":%d,\"customers\":%d,\"seconds\":%d,", ts, batch, clients, customers_env, secs
  printf "\"events\":%d,\"failed_batches\":%d,\"events_per_s\":%.1f,\"pg_cpu_pct\":%.1f,\"pg_cpu_us_per_event\":%.1f,", events, failed, rate, cpu, per
  printf "\"wal_bytes_per_event\":%.0f,\"wal_records_per_event\":%.2f,\"wal_fpi_per_event\":%.3f,", wal_bytes / events, wal_records / events, wal_fpi / events
  printf "\"statements_per_event\":%.4f,\"round_trips_per_event\":%.4f,\"commits_per_event\":%.4f,", statements / batch, (statements + 2) / batch, commits / batch
  printf "\"rows\":{\"inbound_events\":%d,\"processed\":%d,\"customers\":%d,\"conversations\":%d,\"messages\":%d,\"drafts\":%d,\"expert_queue\":%d,\"event_outbox\":%d,\"events\":%d,\"org_event_seq\":%d,\"queue_versions\":%d},", inbox, processed, customers, conversations, messages, drafts, items, outbox, numbered, seq, versions
  printf "\"rows_per_event\":{\"messages\":%.3f,\"drafts\":%.3f,\"events\":%.3f,\"queue_versions\":%.3f}}\n", messages / processed, drafts / processed, numbered / processed, versions / processed
}')
mkdir -p "$BENCH"
echo "$json" | tee -a "$BENCH/floor.jsonl"
