#!/usr/bin/env bash
# Backlog benchmark: how fast the two-pod stack processes a backlog, and whether the rate
# holds as the backlog grows. The pods first run without workers (WORKER_CONCURRENCY=0)
# while sb-loadgen (closed loop, every request a new event) drives signed Slack webhooks at
# them for BENCH_LOAD_SECONDS, so every accepted event waits; then the pods restart with
# their workers and the inbox is polled until it is empty, printing the rate of each 5 s window, and the CPU of each process in the first
# 20 s, in all and per processed event.
#
# Usage: scripts/bench-drain.sh     (uses the dev stack; starts it with dev-up if needed)
# Env:   BENCH_LOAD_SECONDS (8), BENCH_CONNS (64), SB_SKIP_BUILD=1 to reuse the binary.
#        BENCH_SUSTAIN_RATE=N instead keeps the workers on and sends N webhooks/s (open loop)
#        for BENCH_LOAD_SECONDS, printing the backlog every 5 s, then waits for it to drain.
# Appends one JSON line to .dev/bench/drain.jsonl.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

LOAD_SECONDS="${BENCH_LOAD_SECONDS:-8}"
CONNS="${BENCH_CONNS:-64}"
BENCH="$DEV/bench"
LOADGEN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sb-loadgen"
for tool in pidstat psql; do
  command -v "$tool" >/dev/null || die "$tool is needed (apt-get install sysstat postgresql-client)"
done
mkdir -p "$BENCH"
if [ "${SB_SKIP_BUILD:-0}" != 1 ] || [ ! -x "$LOADGEN" ]; then
  cargo build --release -q -p switchboard-loadgen
fi

psql_dev() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d switchboard -Atc "$1"; }
backlog() { psql_dev "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL"; }

SB_SKIP_BUILD="${SB_SKIP_BUILD:-0}" scripts/dev-up.sh >/dev/null
export SB_SKIP_BUILD=1
[ "$(backlog)" -eq 0 ] || die "the inbox already has unprocessed events; let them drain first"

read -r ID SECRET < <(python3 -c '
import json; c = json.load(open(".dev/seed.json"))["channels"]["slack"]
print(c["id"], c["secrets"]["signing_secret"])')

if [ -n "${BENCH_SUSTAIN_RATE:-}" ]; then
  # Sustained load: webhooks at a fixed rate (open loop) while the pods process them; the
  # backlog every 5 s says whether processing keeps up.
  log "pods with workers; $BENCH_SUSTAIN_RATE webhooks/s for ${LOAD_SECONDS}s"
  restart_pods BACKPRESSURE_INBOUND_DEPTH=0 RATE_LIMIT_WEBHOOK_SLACK=off
  "$LOADGEN" --url "http://127.0.0.1:$LB_PORT/webhooks/slack/$ID" --secret "$SECRET" \
    --rate "$BENCH_SUSTAIN_RATE" --seconds "$LOAD_SECONDS" --conns "$CONNS" >"$BENCH/sustain.json" &
  load=$!
  started=$(date +%s)
  while kill -0 "$load" 2>/dev/null; do
    sleep 5
    echo "t=$(($(date +%s) - started))s backlog $(backlog)"
  done
  wait "$load"
  cat "$BENCH/sustain.json"
  while [ "$(backlog)" -gt 0 ]; do sleep 1; done
  echo "drained $(($(date +%s) - started))s after the load began"
  exit 0
fi

log "pods without workers; ${LOAD_SECONDS}s of webhooks"
restart_pods WORKER_CONCURRENCY=0 BACKPRESSURE_INBOUND_DEPTH=0 RATE_LIMIT_WEBHOOK_SLACK=off
"$LOADGEN" --url "http://127.0.0.1:$LB_PORT/webhooks/slack/$ID" --secret "$SECRET" --rate 0 \
  --seconds "$LOAD_SECONDS" --conns "$CONNS"
total=$(backlog)
log "backlog: $total events; pods with workers"
# The clock starts before the restart: workers begin while dev-up still waits for the load
# balancer to see both pods.
started=$(date +%s.%N)
restart_pods
# CPU per command over 20 s, and the events processed in the same 20 s, for the CPU per
# processed event of each process.
(LC_ALL=C pidstat -u 20 1 | awk '/^Average/ && $NF != "Command" { cpu[$NF] += $(NF-2) }
  END { for (c in cpu) if (cpu[c] >= 1) printf "%s %.0f\n", c, cpu[c] }' >"$BENCH/drain-cpu.txt") &
sampler=$!
(first=$(backlog); sleep 20; echo "$((first - $(backlog)))" >"$BENCH/drain-cpu-events.txt") &
prev=$total
window=$started
while :; do
  sleep 5
  left=$(backlog)
  now=$(date +%s.%N)
  python3 -c "print(f'left {$left:>7}  {($prev - $left) / ($now - $window):7.0f} events/s')"
  prev=$left
  window=$now
  [ "$left" -gt 0 ] || break
done
wait "$sampler" 2>/dev/null || true
wait
python3 - "$total" "$started" "$(date +%s.%N)" "$BENCH/drain-cpu.txt" "$BENCH/drain-cpu-events.txt" <<'PY' | tee -a "$BENCH/drain.jsonl"
import json, sys
total, started, ended, cpu_file = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
cpu = dict((c, float(p)) for c, p in (line.split() for line in open(cpu_file)))
events_20s = int(open(sys.argv[5]).read().strip() or 0)
seconds = ended - started
per_event = {c: round(p / 100 * 20 * 1e6 / events_20s) for c, p in cpu.items()} if events_20s else None
print(json.dumps({"backlog": total, "seconds": round(seconds, 1),
                  "events_per_s": round(total / seconds, 1), "cpu_pct_first_20s": cpu,
                  "events_first_20s": events_20s, "cpu_us_per_event_first_20s": per_event}))
PY
