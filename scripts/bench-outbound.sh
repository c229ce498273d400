#!/usr/bin/env bash
# Outbound dispatch benchmark: two pods (release build) on a Postgres and a Redis of their
# own, replies released at a fixed rate (open loop, alternating pods) against a fake Slack
# that answers in BENCH_PROVIDER_MS, once healthy and once failing BENCH_FAIL_PCTS % of calls
# with 503. Reports, per scenario:
#   release -> provider call   p50/p99 from each release's scheduled time to the first call
#                              the fake provider received for that reply
#   release HTTP               p50/p99 of the release request itself (from its scheduled time)
#   answer -> provider call    p50/p99 from the release's 200 to the first call (the dispatch
#                              path alone: push, fetch, claim, send)
#   release -> accepted call   p50/p99 to the call the provider accepted (includes retries)
#   dispatch rate              replies accepted per second, first release to last acceptance
#   duplicates                 replies the provider accepted more than once (must be 0)
#
# Usage: scripts/bench-outbound.sh
# Env:   BENCH_RATE (100) releases/s;  BENCH_SECONDS (20) per scenario;
#        BENCH_PROVIDER_MS (50);  BENCH_FAIL_PCTS ("0 10");  BENCH_WARMUP (RATE x 5)
#        releases first, not measured;  SB_SKIP_BUILD=1 reuses
#        target/release/switchboard;  SB_BIN another binary;  WORKER_CONCURRENCY (16) per pod.
# Output: one JSON line per scenario on stdout (also appended to .dev/bench/outbound-results.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh

RATE="${BENCH_RATE:-100}"
SECONDS_EACH="${BENCH_SECONDS:-20}"
PROVIDER_MS="${BENCH_PROVIDER_MS:-50}"
FAIL_PCTS="${BENCH_FAIL_PCTS:-0 10}"
ITEMS=$((RATE * SECONDS_EACH))
WARMUP="${BENCH_WARMUP:-$((RATE * 5))}"
OUT_DIR=".dev/bench"
mkdir -p "$OUT_DIR"

command -v node >/dev/null || { echo "node is needed" >&2; exit 1; }
command -v psql >/dev/null || { echo "psql is needed (postgresql-client)" >&2; exit 1; }
if [ -z "${SB_SKIP_BUILD:-}" ]; then
  cargo build --release -q -p switchboard
fi
# SB_BIN runs another build, e.g. a baseline to alternate with (then SB_SKIP_BUILD=1).
BIN="${SB_BIN:-$PWD/target/release/switchboard}"

work=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-bench-outbound.XXXXXX")
chmod 755 "$work"
pg_port=$(sb_free_port)
redis_port=$(sb_free_port)
fake_port=$(sb_free_port)
pod_ports=("$(sb_free_port)" "$(sb_free_port)")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  sb_stop_postgres "$work/pg"
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

sb_need_redis
sb_start_postgres "$work/pg" "$pg_port" "$work/pg.log"
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --daemonize yes --dir "$work" --logfile "$work/redis.log" --pidfile "$work/redis.pid"
psql "postgres://postgres@127.0.0.1:$pg_port/postgres" -XAtqc "CREATE DATABASE bench" >/dev/null
DB="postgres://postgres@127.0.0.1:$pg_port/bench"
psql_b() { psql "$DB" -XAtqc "$1"; }

export APP_ENV=development LOG_LEVEL=warn NO_COLOR=1 DRAIN_DELAY_MS=0 \
  DATABASE_URL="$DB" REDIS_URL="redis://127.0.0.1:$redis_port" REDIS_PREFIX=bench \
  JWT_SECRET="bench-jwt-secret-0123456789abcdef0123456789abcdef0123456789abcdef01234" \
  MASTER_ENCRYPTION_KEY="AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" \
  SLACK_API_BASE="http://127.0.0.1:$fake_port" DB_POOL_SIZE=20 EXPECTED_PODS=2 \
  WORKER_CONCURRENCY="${WORKER_CONCURRENCY:-16}" \
  RATE_LIMIT_DEFAULT=off # one client address sends every release
"$BIN" migrate >/dev/null
for i in 0 1; do
  PORT="${pod_ports[$i]}" POD_ID="pod-$((i + 1))" "$BIN" serve >"$work/pod-$i.log" 2>&1 &
  pids+=($!)
done
for port in "${pod_ports[@]}"; do
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
    sleep 0.2
  done
done

json_field() { node -e 'let d="";process.stdin.on("data",c=>d+=c).on("end",()=>console.log(JSON.parse(d)[process.argv[1]]))' "$1"; }
ORG=$("$BIN" admin create-org --name bench | json_field id)
"$BIN" admin create-user --org "$ORG" --email bench@example.test --password bench-password \
  --role admin >/dev/null
POD1="http://127.0.0.1:${pod_ports[0]}"
POD2="http://127.0.0.1:${pod_ports[1]}"
TOKEN=$(curl -fsS -H 'Content-Type: application/json' \
  -d '{"email":"bench@example.test","password":"bench-password"}' "$POD1/auth/login" | json_field token)
CONN=$(curl -fsS -H 'Content-Type: application/json' -H "Authorization: Bearer $TOKEN" \
  -d "{\"org_id\":\"$ORG\",\"channel\":\"slack\",\"name\":\"bench\",\"secrets\":{\"signing_secret\":\"s\",\"bot_token\":\"xoxb-bench\"}}" \
  "$POD1/channel-connections" | json_field id)

# One scenario: a fake provider failing $1 % of calls, $2 fresh items released at RATE; prints
# its JSON line.
scenario() {
  local fail=$1 items=$2 log fake_pid tag left failed
  log="$work/provider-$fail.log"
  : >"$log"
  node scripts/bench/fake-provider.js "$fake_port" "$PROVIDER_MS" "$fail" "$log" &
  fake_pid=$!
  pids+=("$fake_pid")
  sleep 0.5
  tag="bench-$fail-$(date +%s)"
  psql_b "
    WITH cu AS (
      INSERT INTO customers (org_id, channel, external_id)
      SELECT '$ORG', 'slack', '$tag-' || i FROM generate_series(1, $items) i RETURNING id),
    conv AS (
      INSERT INTO conversations (org_id, customer_id, channel, connection_id)
      SELECT '$ORG', cu.id, 'slack', '$CONN' FROM cu RETURNING id),
    msg AS (
      INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                            channel_message_id, reply_to)
      SELECT '$ORG', conv.id, 'inbound', 'customer', 'hello?', 'slack', conv.id::text,
             jsonb_build_object('channel', 'C1', 'thread_ts', '1.5')
      FROM conv RETURNING id, conversation_id),
    d AS (
      INSERT INTO drafts (org_id, conversation_id, message_id, body)
      SELECT '$ORG', conversation_id, id, 'draft' FROM msg
      RETURNING id, conversation_id, message_id, body)
    INSERT INTO expert_queue (org_id, conversation_id, draft_id, draft_message_id, draft_body)
    SELECT '$ORG', conversation_id, id, message_id, body FROM d" >/dev/null
  psql_b "SELECT q.id FROM expert_queue q JOIN conversations c ON c.id = q.conversation_id
          JOIN customers cu ON cu.id = c.customer_id
          WHERE cu.external_id LIKE '$tag-%' AND q.status = 'pending'" >"$work/items.txt"
  node scripts/bench/release-outbound.js "$POD1" "$POD2" "$TOKEN" "$RATE" "$work/items.txt" \
    >"$work/scheduled.json"
  # Wait (2 min at most) until every released reply was sent or dead-lettered.
  for _ in $(seq 600); do
    left=$(psql_b "SELECT count(*) FROM outbox WHERE status IN ('queued', 'retry')")
    [ "$left" = 0 ] && break
    sleep 0.2
  done
  kill "$fake_pid" 2>/dev/null || true
  wait "$fake_pid" 2>/dev/null || true
  failed=$(psql_b "SELECT count(*) FROM outbox WHERE status IN ('failed', 'dead')")
  python3 - "$work/scheduled.json" "$log" "$fail" "$RATE" "$PROVIDER_MS" "$failed" "$left" <<'PY'
import json, sys
scheduled_file, log_file, fail, rate, provider_ms, failed, unsent = sys.argv[1:]
doc = json.load(open(scheduled_file))
scheduled = doc["scheduled"]
first, accepted = {}, {}
for line in open(log_file):
    at, status, text = line.split(" ", 2)
    item = text.strip().removeprefix("bench_")
    first.setdefault(item, float(at))
    if status == "200":
        accepted.setdefault(item, []).append(float(at))
def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p / 100 * len(values)))], 1)
to_call = [first[i] - t for i, t in scheduled.items() if i in first]
answered = doc["answered"]
http = [answered[i] - t for i, t in scheduled.items()]
answer_to_call = [first[i] - answered[i] for i in scheduled if i in first]
to_ok = [accepted[i][0] - t for i, t in scheduled.items() if i in accepted]
span_s = (max(a[0] for a in accepted.values()) - min(scheduled.values())) / 1000 if accepted else None
print(json.dumps({
    "provider_ms": int(provider_ms), "fail_pct": int(fail), "target_rate": int(rate),
    "released": len(scheduled), "release_errors": doc["errors"],
    "release_to_call_p50_ms": pct(to_call, 50), "release_to_call_p99_ms": pct(to_call, 99),
    "release_http_p50_ms": pct(http, 50), "release_http_p99_ms": pct(http, 99),
    "answer_to_call_p50_ms": pct(answer_to_call, 50),
    "answer_to_call_p99_ms": pct(answer_to_call, 99),
    "release_to_accepted_p50_ms": pct(to_ok, 50), "release_to_accepted_p99_ms": pct(to_ok, 99),
    "dispatch_rate_per_s": round(len(accepted) / span_s, 1) if span_s else None,
    "delivered": len(accepted), "failed": int(failed), "unsent": int(unsent),
    "duplicates": sum(1 for v in accepted.values() if len(v) > 1),
}))
PY
}

# Fresh pods open their Postgres connections and prepare their statements on first use;
# the warm-up takes that cost out of the measured scenarios (its own line goes to stderr).
if [ "$WARMUP" -gt 0 ]; then
  echo "warm-up ($WARMUP releases, not measured): $(scenario 0 "$WARMUP")" >&2
fi
for fail in $FAIL_PCTS; do
  scenario "$fail" "$ITEMS" | tee -a "$OUT_DIR/outbound-results.jsonl"
done
