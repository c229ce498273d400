#!/usr/bin/env bash
# Release benchmark (F3): fresh pending items are released from one client process at a
# fixed rate, alternating between the two pods of the local stack, each release with its own
# Idempotency-Key. Reports release latency (p50/p99, measured from when each request was due,
# so a stalled server cannot hide its backlog) and release -> `agent_message_sent` on a socket
# connected to the OTHER pod (p50/p99). Every run releases items nobody released before:
# BENCH_ITEMS new items are inserted (with customer, conversation, inbound message and draft)
# before each run. Runs repeat BENCH_RUNS times; each prints one JSON line, then a summary
# with the median and the spread.
# With BENCH_BASELINE_BIN set to another build of switchboard, the runs alternate between
# that baseline and the current build (baseline, current, baseline, ...; BENCH_RUNS each,
# pods restarted on the other binary before every run; the native stack only) and the
# summary compares the two. Name both binaries `switchboard` (the stack's scripts recognise
# their processes by that name), e.g. /tmp/base/switchboard.
#
# Usage: scripts/bench-release.sh   (brings the stack up with dev-up if needed)
# Env:   BENCH_ITEMS (2000)  items per run;  BENCH_RATE (200)  releases per second
#        BENCH_RUNS (3);     BENCH_WARMUP (RATE x 3) releases just before each run's, on the
#        same schedule and client connections, not measured
#        SB_SKIP_BUILD=1 reuses target/release/switchboard (dev-up)
#        BENCH_BASELINE_BIN  a baseline binary to alternate with (see above)
# Output: JSON lines on stdout and appended to .dev/bench/release-results.jsonl.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

ITEMS="${BENCH_ITEMS:-2000}"
RATE="${BENCH_RATE:-200}"
RUNS="${BENCH_RUNS:-3}"
WARMUP="${BENCH_WARMUP:-$((RATE * 3))}"
BENCH="$DEV/bench"
NODE_DIR="$BENCH/realtime"
OUT="$BENCH/release-results.jsonl"
RUN_ID="$(date -u +%Y%m%dT%H%M%SZ)"

command -v node >/dev/null || die "node is needed (Debian: apt-get install nodejs npm)"
command -v psql >/dev/null || die "psql is needed (package postgresql-client)"
mkdir -p "$NODE_DIR"
if ! cmp -s scripts/bench/package.json "$NODE_DIR/package.json" ||
  [ ! -d "$NODE_DIR/node_modules/socket.io-client" ]; then
  log "Installing the Socket.IO client into ${NODE_DIR#"$ROOT"/}"
  cp scripts/bench/package.json "$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund --no-package-lock >/dev/null)
fi
cp scripts/bench/release.js "$NODE_DIR/release.js"

log "Bringing the stack up (scripts/dev-up.sh)"
scripts/dev-up.sh >"$BENCH/release-dev-up.log" 2>&1 || {
  tail -n 20 "$BENCH/release-dev-up.log" >&2
  die "dev-up failed (log: .dev/bench/release-dev-up.log)"
}
# Every release comes from one client address: the per-address default rate limit
# (1200/min) would refuse most of a 200/s run. Its cost is measured apart
# (docs/PERFORMANCE.md, "The rate limiter on the accept path").
export RATE_LIMIT_DEFAULT=off
log "Restarting the pods without the per-address limit"
restart_pods >>"$BENCH/release-dev-up.log" 2>&1

seed_field() { node -e 'const s=require(process.argv[1]); console.log(process.argv[2].split(".").reduce((o,k)=>o[k],s))' "$DEV/seed.json" "$1"; }
ORG_ID="$(seed_field org_id)"
SLACK_ID="$(seed_field channels.slack.id)"
EMAIL="$(seed_field expert.email)"
PASSWORD="$(seed_field expert.password)"
TOKEN="$(curl -fsS -m 10 -H 'Content-Type: application/json' \
  --data-binary "$(node -e 'console.log(JSON.stringify({email: process.argv[1], password: process.argv[2]}))' "$EMAIL" "$PASSWORD")" \
  "http://127.0.0.1:$LB_PORT/auth/login" | node -e 'let d="";process.stdin.on("data",c=>d+=c).on("end",()=>console.log(JSON.parse(d).token))')"
psql_dev() { psql "postgres://postgres@127.0.0.1:$PG_PORT/switchboard" -XAtqc "$1"; }

CURRENT_BIN="$BIN"
BASELINE_BIN="${BENCH_BASELINE_BIN:-}"
[ -z "$BASELINE_BIN" ] || [ -x "$BASELINE_BIN" ] || die "BENCH_BASELINE_BIN is not an executable: $BASELINE_BIN"

# Stops both pods (SIGTERM, as a rolling deploy does) and starts them again on binary $1.
restart_pods_on() {
  local file pid
  for file in "$DEV"/pod-*.pid; do
    [ -f "$file" ] || continue
    pid="$(cat "$file")"
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    rm -f "$file"
  done
  SB_NATIVE=1 SB_SKIP_BUILD=1 SB_BIN="$1" scripts/dev-up.sh >>"$BENCH/release-dev-up.log" 2>&1 ||
    die "dev-up failed on $1 (log: .dev/bench/release-dev-up.log)"
}

# A baseline build from before the item recorded its draft's message runs on a schema
# without the column: its items are seeded without it.
if [ "$(psql_dev "SELECT count(*) FROM information_schema.columns
                  WHERE table_name = 'expert_queue' AND column_name = 'draft_message_id'")" = 1 ]; then
  DRAFT_MESSAGE_COLUMN="draft_message_id," DRAFT_MESSAGE_VALUE="message_id,"
else
  DRAFT_MESSAGE_COLUMN="" DRAFT_MESSAGE_VALUE=""
fi

# Inserts $2 fresh pending items tagged $1 (customer, conversation, inbound message, draft)
# and writes their ids to file $3.
seed_items() {
  local tag=$1 items=$2 file=$3
  psql_dev "
    WITH cu AS (
      INSERT INTO customers (org_id, channel, external_id, display_name)
      SELECT '$ORG_ID', 'slack', '$tag-' || i, 'Bench ' || i FROM generate_series(1, $items) i
      RETURNING id),
    conv AS (
      INSERT INTO conversations (org_id, customer_id, channel, connection_id)
      SELECT '$ORG_ID', cu.id, 'slack', '$SLACK_ID' FROM cu RETURNING id),
    msg AS (
      INSERT INTO messages (org_id, conversation_id, direction, author, body, channel, channel_message_id, reply_to)
      SELECT '$ORG_ID', conv.id, 'inbound', 'customer', 'Where is my order?', 'slack', conv.id::text,
             jsonb_build_object('channel', 'C1', 'thread_ts', '1.5')
      FROM conv RETURNING id, conversation_id),
    d AS (
      INSERT INTO drafts (org_id, conversation_id, message_id, body, confidence)
      SELECT '$ORG_ID', conversation_id, id, 'It ships tomorrow.', 0.8 FROM msg
      RETURNING id, conversation_id, message_id, body, confidence)
    INSERT INTO expert_queue (org_id, conversation_id, draft_id, $DRAFT_MESSAGE_COLUMN draft_body, draft_confidence)
    SELECT '$ORG_ID', conversation_id, id, $DRAFT_MESSAGE_VALUE body, confidence FROM d RETURNING id" >"$file"
}

# Seeds WARMUP + ITEMS fresh items for run $1 and releases them at RATE from one client
# process: the warm-up items first (unmeasured), then the measured ones on the same
# schedule and connections; prints the client's JSON line.
release_fresh() {
  local tag=$1 warm_file=""
  if [ "$WARMUP" -gt 0 ]; then
    warm_file="$BENCH/release-warm-items.txt"
    seed_items "warm-$tag" "$WARMUP" "$warm_file"
  fi
  seed_items "$tag" "$ITEMS" "$BENCH/release-items.txt"
  node "$NODE_DIR/release.js" "http://127.0.0.1:${POD_PORTS[0]}" "http://127.0.0.1:${POD_PORTS[1]}" \
    "$TOKEN" "$RATE" "$BENCH/release-items.txt" $warm_file
}

plan=()
for run in $(seq "$RUNS"); do
  if [ -n "$BASELINE_BIN" ]; then plan+=("baseline:$run" "current:$run"); else plan+=("current:$run"); fi
done

results=()
for step in "${plan[@]}"; do
  build="${step%%:*}"
  run="${step#*:}"
  if [ -n "$BASELINE_BIN" ]; then
    if [ "$build" = baseline ]; then restart_pods_on "$BASELINE_BIN"; else restart_pods_on "$CURRENT_BIN"; fi
    log "run $run on the $build build"
  fi
  # Pods just (re)started open their Postgres connections and prepare their statements on
  # first use, and the client opens its connections: the warm-up releases at the same rate,
  # in the same client process, take both out of the measured run.
  line="$(release_fresh "bench-$RUN_ID-$build-$run")"
  line="$(node -e 'const r=JSON.parse(process.argv[1]); r.run=+process.argv[2]; r.run_id=process.argv[3]; r.build=process.argv[4]; console.log(JSON.stringify(r))' "$line" "$run" "$RUN_ID" "$build")"
  echo "$line" | tee -a "$OUT"
  results+=("$line")
done

node -e '
const all = process.argv.slice(1).map(JSON.parse);
for (const build of [...new Set(all.map(r => r.build))]) {
  const rs = all.filter(r => r.build === build);
  console.log(`${build} build (${rs.length} runs):`);
  const med = (k) => { const v = rs.map(r => r[k]).filter(x => x !== null).sort((a, b) => a - b); return v.length ? v[Math.floor(v.length / 2)] : null; };
  const span = (k) => { const v = rs.map(r => r[k]).filter(x => x !== null); return v.length ? `${Math.min(...v)}-${Math.max(...v)}` : "n/a"; };
  for (const k of ["achieved_rate", "http_p50_ms", "http_p99_ms", "cross_pod_p50_ms", "cross_pod_p99_ms", "errors"])
    console.log(`  ${k.padEnd(18)} median ${med(k)}  (runs: ${span(k)})`);
}
' "${results[@]}"
