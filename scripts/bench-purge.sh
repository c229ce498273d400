#!/usr/bin/env bash
# Retention benchmark: webhook latency while the `org-retention` job purges 100 000 rows,
# against the same load at rest, in alternating rounds on the two-pod stack with workers on.
#
# Each purge round first writes BENCH_PURGE_ROWS old messages (400 days back, in 1000 closed
# conversations of 1000 customers of their own, so the purge removes them with their
# conversations and customers), then sends BENCH_RATE fresh signed Slack webhooks/s (open
# loop, sb-loadgen, every event new) and, two seconds in, gives the org a 30-day window; the
# job runs every second (SCHEDULE_ORG_RETENTION) and the round times the purge until the last
# old message and the last old customer are gone. Its p99 is taken over the requests due
# while the purge ran. A rest round sends the same load with nothing to purge, its p99 over
# the same seconds of its run. Each round purges once per pace in BENCH_DUTIES (the pods
# restarted with that RETENTION_DUTY_PERCENT), so paces and rest alternate in one run.
#
# Usage: scripts/bench-purge.sh     (uses the dev stack; starts it with dev-up if needed)
# Env:   BENCH_ROUNDS (3 of each), BENCH_RATE (100), BENCH_SECONDS (30; longer than the
#        slowest purge), BENCH_PURGE_ROWS (100000), BENCH_DUTIES ("20", the default pace),
#        SB_SKIP_BUILD=1 to reuse the binaries.
# Appends one JSON line to .dev/bench/purge.jsonl.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

ROUNDS="${BENCH_ROUNDS:-3}"
RATE="${BENCH_RATE:-100}"
SECONDS_PER_ROUND="${BENCH_SECONDS:-30}"
ROWS="${BENCH_PURGE_ROWS:-100000}"
DUTIES="${BENCH_DUTIES:-20}"
BENCH="$DEV/bench"
LOADGEN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sb-loadgen"
command -v psql >/dev/null || die "psql is needed (apt-get install postgresql-client)"
mkdir -p "$BENCH"
if [ "${SB_SKIP_BUILD:-0}" != 1 ] || [ ! -x "$LOADGEN" ]; then
  cargo build --release -q -p switchboard-loadgen
fi

psql_dev() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d switchboard -v ON_ERROR_STOP=1 -Atc "$1"; }
now_ms() { date +%s%3N; }

SB_SKIP_BUILD="${SB_SKIP_BUILD:-0}" scripts/dev-up.sh >/dev/null
export SB_SKIP_BUILD=1
read -r ID SECRET < <(python3 -c '
import json; c = json.load(open(".dev/seed.json"))["channels"]["slack"]
print(c["id"], c["secrets"]["signing_secret"])')
ORG=$(psql_dev "SELECT org_id FROM channel_connections WHERE id = '$ID'")
psql_dev "UPDATE orgs SET retention_days = NULL WHERE id = '$ORG'" >/dev/null

# $1 the purge's pace: pods with workers, the retention job every second, warmed up by 10 s
# of the same load (their pools' connections opened, their statements prepared) before
# anything is measured.
pods() {
  restart_pods BACKPRESSURE_INBOUND_DEPTH=0 RATE_LIMIT_WEBHOOK_SLACK=off \
    "SCHEDULE_ORG_RETENTION=* * * * * *" "RETENTION_DUTY_PERCENT=$1"
  "$LOADGEN" --url "http://127.0.0.1:$LB_PORT/webhooks/slack/$ID" --secret "$SECRET" \
    --rate "$RATE" --seconds 10 --samples "$BENCH/purge-warmup.txt" >/dev/null
}

# $1 round tag: ROWS messages 400 days old in conversations and customers of their own.
seed() {
  local per=$((ROWS / 1000))
  psql_dev "
    WITH c AS (
      INSERT INTO customers (org_id, channel, external_id, display_name, created_at, updated_at)
      SELECT '$ORG', 'slack', 'Uold-$1-' || g, 'Old customer ' || g,
             now() - interval '400 days', now() - interval '400 days'
        FROM generate_series(1, 1000) g RETURNING id),
    v AS (
      INSERT INTO conversations (org_id, customer_id, channel, connection_id, status,
                                 created_at, updated_at, closed_at)
      SELECT '$ORG', id, 'slack', '$ID', 'closed', now() - interval '400 days',
             now() - interval '400 days', now() - interval '400 days'
        FROM c RETURNING id)
    INSERT INTO messages (org_id, conversation_id, direction, author, body, channel, created_at)
    SELECT '$ORG', v.id,
           (CASE WHEN g % 2 = 0 THEN 'inbound' ELSE 'outbound' END)::message_direction,
           (CASE WHEN g % 2 = 0 THEN 'customer' ELSE 'agent' END)::message_author,
           'an old message, number ' || g, 'slack', now() - interval '400 days' + g * interval '1 second'
      FROM v, generate_series(1, $per) g" >/dev/null
  psql_dev "VACUUM ANALYZE messages" >/dev/null
}
old_left() {
  psql_dev "SELECT (SELECT count(*) FROM messages
                     WHERE org_id = '$ORG' AND created_at < now() - interval '300 days')
                 + (SELECT count(*) FROM customers
                     WHERE org_id = '$ORG' AND external_id LIKE 'Uold-%')"
}

# $1 samples file, $2 $3 window (unix ms): the requests due in it as JSON.
window_stats() {
  python3 - "$@" <<'PY'
import json, sys
path, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [l.split() for l in open(path)]
lat = sorted(int(r[1]) / 1000 for r in rows if lo <= int(r[0]) < hi)
bad = sum(1 for r in rows if lo <= int(r[0]) < hi and r[2] != "200")
p = lambda q: round(lat[min(len(lat) - 1, round(q / 100 * (len(lat) - 1)))], 2) if lat else None
print(json.dumps({"requests": len(lat), "not_200": bad, "p50_ms": p(50), "p99_ms": p(99), "max_ms": p(100)}))
PY
}

results=()
for round in $(seq "$ROUNDS"); do
  pods "${DUTIES%% *}"
  # At rest: the same load, nothing to purge; the same window as a purge (2 s in, to the end).
  tag="r$round-$(now_ms)"
  "$LOADGEN" --url "http://127.0.0.1:$LB_PORT/webhooks/slack/$ID" --secret "$SECRET" \
    --rate "$RATE" --seconds "$SECONDS_PER_ROUND" --samples "$BENCH/purge-rest.txt" >/dev/null &
  load=$!
  start=$(now_ms)
  wait "$load"
  rest=$(window_stats "$BENCH/purge-rest.txt" $((start + 2000)) $((start + SECONDS_PER_ROUND * 1000)))
  log "round $round at rest: $rest"
  results+=("{\"round\": $round, \"phase\": \"rest\", \"stats\": $rest}")

  for duty in $DUTIES; do
  pods "$duty"
  log "round $round, pace $duty %: seeding $ROWS old messages"
  seed "$tag-$duty"
  "$LOADGEN" --url "http://127.0.0.1:$LB_PORT/webhooks/slack/$ID" --secret "$SECRET" \
    --rate "$RATE" --seconds "$SECONDS_PER_ROUND" --samples "$BENCH/purge-load.txt" >/dev/null &
  load=$!
  sleep 2
  psql_dev "UPDATE orgs SET retention_days = 30 WHERE id = '$ORG'" >/dev/null
  began=$(now_ms)
  while [ "$(old_left)" -gt 0 ]; do
    sleep 0.1
    [ $(($(now_ms) - began)) -lt $((SECONDS_PER_ROUND * 1000)) ] || die "the purge did not finish within the round"
  done
  ended=$(now_ms)
  wait "$load"
  psql_dev "UPDATE orgs SET retention_days = NULL WHERE id = '$ORG'" >/dev/null
  purged=$(window_stats "$BENCH/purge-load.txt" "$began" "$ended")
  log "round $round purge at $duty % ($((ended - began)) ms): $purged"
  results+=("{\"round\": $round, \"phase\": \"purge\", \"duty\": $duty, \"purge_ms\": $((ended - began)), \"stats\": $purged}")
  done
done

python3 - "$RATE" "$ROWS" "${results[@]}" <<'PY' | tee -a "$BENCH/purge.jsonl"
import json, statistics, sys
rate, rows = float(sys.argv[1]), int(sys.argv[2])
rounds = [json.loads(r) for r in sys.argv[3:]]
spread = lambda v: {"median": statistics.median(v), "min": min(v), "max": max(v)}
rest = [r["stats"]["p99_ms"] for r in rounds if r["phase"] == "rest"]
paces = {}
for r in rounds:
    if r["phase"] == "purge":
        paces.setdefault(r["duty"], []).append(r)
print(json.dumps({
    "rate": rate, "purged_messages": rows, "rounds": rounds,
    "rest_p99_ms": spread(rest),
    "paces": {
        str(duty): {
            "purge_p99_ms": spread([r["stats"]["p99_ms"] for r in rs]),
            "purge_ms": [r["purge_ms"] for r in rs],
            "ratio_of_medians": round(
                statistics.median([r["stats"]["p99_ms"] for r in rs]) / statistics.median(rest), 2),
        }
        for duty, rs in paces.items()
    },
}))
PY
