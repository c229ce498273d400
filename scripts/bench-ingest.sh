#!/usr/bin/env bash
# Ingest benchmark: capacity at a latency target, Switchboard against two Node/BullMQ
# baselines (../shared/bench/node-baseline), in one run on one box.
#
#   sides        switchboard   the two-pod dev stack behind HAProxy (no stickiness)
#                node-durable  two Node processes behind their own HAProxy, each event
#                              committed to Postgres before the 200 (DATABASE_URL set: the
#                              promise Switchboard makes)
#                node-redis    the same with Redis only
#   load         sb-loadgen (crates/loadgen): every request is a new event, signed when it
#                is sent, so no run replays duplicates that a server answers for free
#   capacity     the highest open-loop rate at which p99 <= BENCH_TARGET_MS with no error,
#                found by search: the rate doubles from BENCH_START while it passes, then
#                BENCH_STEPS bisections between the last pass and the first failure; each
#                probe lasts BENCH_PROBE_SECONDS (a failed probe is repeated once before the
#                rate counts as failed), and latency counts from when a request was due (no
#                coordinated omission)
#   rounds       BENCH_ROUNDS rounds, each side in turn (A, B, C, A, B, C, ...), so drift of
#                the box hits every side; the summary gives each side's median and range and
#                the ratios per round
#   CPU          a closed loop per side and round (BENCH_CLOSED_SECONDS, 64 connections), with
#                pidstat: CPU-microseconds per webhook of the service's own processes
#                (pods + Postgres + Redis; Node + Postgres + Redis; Node + Redis) and of the
#                rig (HAProxy + sb-loadgen), which share the same two cores
#
# By default the pods run without workers (BENCH_WORKERS=0): the accept path alone, as the
# baselines have no workers either; what a probe accepted (every side's stored events,
# queue entries and dedup keys) is removed after it, so no probe runs against the backlog
# of the ones before. BENCH_WORKERS=1 measures the whole product (the pods process what
# they accept) and waits for Switchboard's inbox to drain after every probe; node-durable
# then runs the peer's two `worker.js` processes as well (the same processing per event:
# ../shared/bench/node-baseline/README.md) and waits for its inbox in turn. Each probe's
# line then carries the backlog it left (`backlog_after`): a rate passes only if its p99
# holds and the backlog stays under 2 seconds' worth of it, so the capacity found is a
# sustainable rate, not a burst the queue absorbed.
#
# Usage: scripts/bench-ingest.sh            (brings the stack up with dev-up if needed)
# Env:   BENCH_ROUNDS (3), BENCH_TARGET_MS (50), BENCH_START (1000), BENCH_STEPS (3),
#        BENCH_MAX (40000), BENCH_PROBE_SECONDS (10), BENCH_CLOSED_SECONDS (10; 0 skips),
#        BENCH_CONNS (64), BENCH_SIDES ("switchboard node-durable node-redis"),
#        BENCH_WORKERS (0), BASELINE_DIR (../shared/bench/node-baseline),
#        SB_SKIP_BUILD=1 to reuse the binaries.
#        BENCH_LIMITER="off enforce shadow" runs only the rate limiter's cost instead: the
#        closed loop against Switchboard with the webhook limit off, enforcing, and in shadow
#        mode, at a limit no run reaches (10^8 a minute), so every webhook pays for the shared
#        GCRA script and none is refused.
#        BENCH_TRACING="off ratio10 down" runs only the trace export's cost instead: for each
#        of BENCH_ROUNDS rounds, the closed loop against Switchboard with each mode in turn
#        (alternating, so drift hits every mode): no OTEL_EXPORTER_OTLP_ENDPOINT; a 10 %
#        parent-based sampler exporting to a local sink that accepts every export; and the
#        same sampler with every span recorded (always_on) against a collector that is down
#        (a closed port); `always` records every span too, exported to the sink, so that
#        `always` against `down` is the cost of the collector being away. The summary
#        gives each mode's median, min and max of throughput, p99 and CPU per webhook
#        (docs/PERFORMANCE.md: within 5 % of off at 10 %).
# Results: one JSON line per probe, closed loop and summary in .dev/bench/ingest.jsonl.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
# shellcheck source=scripts/lib-bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-bench.sh"
cd "$ROOT"

ROUNDS="${BENCH_ROUNDS:-3}"
TARGET_MS="${BENCH_TARGET_MS:-50}"
START_RATE="${BENCH_START:-1000}"
STEPS="${BENCH_STEPS:-3}"
MAX_RATE="${BENCH_MAX:-40000}"
PROBE_SECONDS="${BENCH_PROBE_SECONDS:-10}"
CLOSED_SECONDS="${BENCH_CLOSED_SECONDS:-10}"
CONNS="${BENCH_CONNS:-64}"
SIDES="${BENCH_SIDES:-switchboard node-durable node-redis}"
WORKERS="${BENCH_WORKERS:-0}"
BASELINE_SRC="${BASELINE_DIR:-$ROOT/../shared/bench/node-baseline}"
BENCH="$DEV/bench"
OUT="$BENCH/ingest.jsonl"
LOADGEN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sb-loadgen"
# Two Node processes per baseline, each pair behind its own HAProxy.
declare -A NODE_PORTS=([node-redis]="4101 4102" [node-durable]="4103 4104")
declare -A NODE_LB=([node-redis]=8090 [node-durable]=8091)

bench_tools
bench_loadgen "$LOADGEN"

scripts/dev-up.sh >/dev/null
export SB_SKIP_BUILD=1
# On the managed topology (SB_TOPOLOGY=managed: TLS Postgres behind PgBouncer, a TLS Redis
# Cluster) only the whole product is measured: the probes' clean-up and the Node baselines
# speak to the plain stack's single Redis.
TOPOLOGY="$(recorded_topology)"
if [ "$TOPOLOGY" != plain ] && { [ "$WORKERS" != 1 ] || [ "$SIDES" != switchboard ]; }; then
  die "on the $TOPOLOGY topology run with BENCH_SIDES=switchboard BENCH_WORKERS=1"
fi
mkdir -p "$BENCH"
: >"$OUT"

# This run's pod settings: workers on or off, no webhook rate limit (its cost is measured
# apart, see docs/PERFORMANCE.md) and no inbound backpressure (without workers the backlog
# only grows).
if [ "$WORKERS" = 1 ]; then
  restart_pods RATE_LIMIT_WEBHOOK_SLACK=off
else
  restart_pods RATE_LIMIT_WEBHOOK_SLACK=off WORKER_CONCURRENCY=0 BACKPRESSURE_INBOUND_DEPTH=0
fi

# --- the baselines --------------------------------------------------------------------------
bench_node_baseline "$BASELINE_SRC" "$BENCH/node-baseline"
stop_baselines() {
  local port pid side
  for pid in $(pgrep -f "node worker.js" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  for side in "${!NODE_PORTS[@]}"; do
    for port in ${NODE_PORTS[$side]}; do
      for pid in $(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2); do
        kill "$pid" 2>/dev/null || true
      done
    done
    [ -f "$BENCH/haproxy-$side.pid" ] && kill "$(cat "$BENCH/haproxy-$side.pid")" 2>/dev/null || true
  done
}
# The dev stack's Redis keeps an append-only file; its automatic rewrites (a forked
# redis-server, 15-30 s each once accept-only runs have grown the data) landed in random
# sides' probes. They are held off for the run and the setting restored after it.
aof_rewrite=""
if [ "$TOPOLOGY" = plain ]; then
  aof_rewrite=$(redis-cli -p "$REDIS_PORT" config get auto-aof-rewrite-percentage | tail -n 1)
  redis-cli -p "$REDIS_PORT" config set auto-aof-rewrite-percentage 0 >/dev/null
fi
cleanup() {
  stop_baselines
  [ -z "$aof_rewrite" ] ||
    redis-cli -p "$REDIS_PORT" config set auto-aof-rewrite-percentage "$aof_rewrite" >/dev/null || true
}
trap cleanup EXIT
stop_baselines
for side in "${!NODE_PORTS[@]}"; do
  db=""
  [ "$side" = node-durable ] && db="postgres://postgres@127.0.0.1:$PG_PORT/node_baseline"
  set -- ${NODE_PORTS[$side]}
  for port in "$@"; do
    (cd "$BENCH/node-baseline" && PORT=$port REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
      DATABASE_URL="$db" SLACK_SIGNING_SECRET=test-signing-secret \
      setsid nohup node server.js >"$BENCH/$side-$port.log" 2>&1 &)
  done
  sed -e "s/@LB_PORT@/${NODE_LB[$side]}/" -e "s/@POD1_ADDR@/127.0.0.1:$1/" \
    -e "s/@POD2_ADDR@/127.0.0.1:$2/" -e "s#GET /ready#GET /health#" \
    scripts/haproxy.cfg.tmpl >"$BENCH/haproxy-$side.cfg"
  haproxy -f "$BENCH/haproxy-$side.cfg" -D -p "$BENCH/haproxy-$side.pid"
done
# The peer's processing, one process after another (each creates its schema on start).
if [ "$WORKERS" = 1 ] && [[ " $SIDES " == *" node-durable "* ]]; then
  for n in 1 2; do
    (cd "$BENCH/node-baseline" && REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
      DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/node_baseline" \
      AGENT_URL="http://127.0.0.1:${SB_DEMO_PORT:-4010}/agent/v1/chat" \
      setsid nohup node worker.js >"$BENCH/node-worker-$n.log" 2>&1 &)
    for _ in $(seq 150); do
      grep -q "baseline worker" "$BENCH/node-worker-$n.log" 2>/dev/null && break
      sleep 0.2
    done
  done
fi
for side in "${!NODE_LB[@]}"; do
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:${NODE_LB[$side]}/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
done

# --- targets -----------------------------------------------------------------------------
read -r SB_ID SB_SECRET < <(python3 -c '
import json; c = json.load(open(".dev/seed.json"))["channels"]["slack"]
print(c["id"], c["secrets"]["signing_secret"])')
url_of() {
  case $1 in
    switchboard) echo "http://127.0.0.1:$LB_PORT/webhooks/slack/$SB_ID" ;;
    *) echo "http://127.0.0.1:${NODE_LB[$1]}/webhooks/slack" ;;
  esac
}
secret_of() { if [ "$1" = switchboard ]; then echo "$SB_SECRET"; else echo test-signing-secret; fi; }
# The processes that serve a side's webhooks.
service_of() {
  case $1 in
    switchboard) echo "switchboard postgres redis-server pgbouncer" ;;
    node-durable) echo "node postgres redis-server" ;;
    node-redis) echo "node redis-server" ;;
  esac
}

# Between probes every side starts from the same small state.
# With workers on, Switchboard keeps working after it answers: wait until its inbox is
# drained so that no probe of any side runs while it still uses the CPU.
# Without workers nothing consumes what a probe accepted, so each probe would otherwise run
# against everything every earlier probe left: a million queued events by the third round,
# in Postgres (the inbox and its indexes, far past `shared_buffers`) and in Redis (queues,
# dedup keys). That is no state a server with workers reaches, and it weighs on later
# probes and on the durable sides most. So what the accept path stored is removed instead,
# for every side alike: Switchboard's inbox rows, inbound queue and dedup keys; the
# baselines' table, BullMQ queue and dedup keys.
backlog_now() {
  case $1 in
    switchboard) psql_dev "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL" ;;
    node-durable) psql_dev "SELECT count(*) FROM baseline_inbound_events WHERE processed_at IS NULL" node_baseline ;;
    *) echo 0 ;;
  esac
}
between_probes() {
  if [ "$WORKERS" = 1 ]; then
    while [ "$(psql_dev "SELECT EXISTS (SELECT 1 FROM inbound_events WHERE processed_at IS NULL)")" = t ]; do
      sleep 1
    done
    if [[ " $SIDES " == *" node-durable "* ]]; then
      while [ "$(psql_dev "SELECT EXISTS (SELECT 1 FROM baseline_inbound_events WHERE processed_at IS NULL)" node_baseline)" = t ]; do
        sleep 1
      done
      psql_dev "TRUNCATE baseline_inbound_events" node_baseline >/dev/null 2>&1 || true
    fi
    return 0
  fi
  psql_dev "TRUNCATE inbound_events" >/dev/null
  psql_dev "TRUNCATE baseline_inbound_events" node_baseline >/dev/null 2>&1 || true
  local pattern
  for pattern in 'sb:dedup:*' 'sb:queue:channel-inbound:*' 'sb:{queue:channel-inbound}:*' 'dedup:slack:*' 'bull:channel-inbound:*'; do
    # The pods' worker registrations stay: only what the accepted events created goes.
    redis-cli -p "$REDIS_PORT" --scan --pattern "$pattern" | { grep -v ':workers' || true; } |
      xargs -r -n 1000 redis-cli -p "$REDIS_PORT" unlink >/dev/null
  done
}

# One open-loop probe; prints the loadgen's JSON with the side, round and verdict added.
probe() {
  local side=$1 round=$2 rate=$3
  local report backlog=null
  report=$("$LOADGEN" --url "$(url_of "$side")" --secret "$(secret_of "$side")" --rate "$rate" \
    --seconds "$PROBE_SECONDS" --conns "$CONNS")
  [ "$WORKERS" != 1 ] || backlog=$(backlog_now "$side")
  python3 -c "
import json, sys
d = json.loads(sys.argv[1])
backlog = $backlog
d.update(target='$side', round=$round, kind='probe', backlog_after=backlog,
         passed=d['errors'] == 0 and d['p99_ms'] is not None and d['p99_ms'] <= $TARGET_MS
                and (backlog is None or backlog <= 2 * $rate))
print(json.dumps(d))" "$report" | tee -a "$OUT"
  between_probes
  sleep 2
}
last_passed() { tail -n 1 "$OUT" | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["passed"] else 1)'; }
# A rate passes when a probe passes. A failure is probed once more before it counts: one
# stall of the shared box (a checkpoint, an fsync) in 10 s is enough to push a p99 over the
# target, and a search that stops at the first such stall measures the stall, not the side.
passes() {
  probe "$@" >/dev/null
  last_passed && return 0
  probe "$@" >/dev/null
  last_passed
}

# Doubling, then bisection (to multiples of 50/s); appends the side's capacity. An
# unrecorded warm-up comes first: a side's first seconds (Node's JIT, new pool connections)
# would otherwise count against whichever side happens to be cold.
capacity() {
  local side=$1 round=$2 lo=0 hi=0 rate=$START_RATE mid
  "$LOADGEN" --url "$(url_of "$side")" --secret "$(secret_of "$side")" --rate "$((START_RATE / 2))" \
    --seconds 5 --conns "$CONNS" >/dev/null
  between_probes
  sleep 2
  while [ "$rate" -le "$MAX_RATE" ]; do
    log "round $round, $side: $rate/s"
    if passes "$side" "$round" "$rate"; then lo=$rate; rate=$((rate * 2)); else hi=$rate; break; fi
  done
  if [ "$hi" -gt 0 ]; then
    for _ in $(seq "$STEPS"); do
      mid=$(((lo + hi) / 100 * 50))
      [ "$mid" -gt "$lo" ] && [ "$mid" -lt "$hi" ] || break
      log "round $round, $side: $mid/s"
      if passes "$side" "$round" "$mid"; then lo=$mid; else hi=$mid; fi
    done
  fi
  printf '{"kind":"capacity","target":"%s","round":%s,"rps":%s,"first_failure":%s}\n' \
    "$side" "$round" "$lo" "$hi" | tee -a "$OUT"
}

# Per-command CPU (% of one core, summed over processes) averaged over N seconds.
cpu_sample() {
  LC_ALL=C pidstat -u "$1" 1 | awk '/^Average/ && $NF != "Command" { cpu[$NF] += $(NF-2) }
    END { for (c in cpu) printf "%s %.1f\n", c, cpu[c] }'
}

# A closed loop with the CPU of every command sampled in its middle.
closed_loop() {
  local side=$1 round=$2 label=${3:-} cpu="$BENCH/closed-cpu.txt" report sampler
  [ "$CLOSED_SECONDS" -ge 6 ] || return 0
  log "round $round, $side: closed loop"
  (sleep 2 && cpu_sample "$((CLOSED_SECONDS - 4))" >"$cpu") &
  sampler=$!
  report=$("$LOADGEN" --url "$(url_of "$side")" --secret "$(secret_of "$side")" --rate 0 \
    --seconds "$CLOSED_SECONDS" --conns "$CONNS")
  wait "$sampler" || : >"$cpu"
  python3 - "$side" "$round" "$report" "$cpu" "$(service_of "$side")" "$label" <<'PY' | tee -a "$OUT"
import json, sys
side, rnd, report, cpu_file, service = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5].split()
if sys.argv[6]:
    report["limiter"] = sys.argv[6]
cpu = dict((c, float(p)) for c, p in (line.split() for line in open(cpu_file)))
rps = report["achieved_rps"]
def us_per_req(commands):
    # None when pidstat recorded nothing (rather than a misleading 0).
    return round(sum(cpu.get(c, 0.0) for c in commands) / 100 * 1e6 / rps, 1) if cpu and rps else None
report.update(kind="closed", target=side, round=rnd,
              cpu_pct={c: cpu.get(c, 0.0) for c in service + ["haproxy", "sb-loadgen"]},
              service_cpu_us_per_req=us_per_req(service),
              rig_cpu_us_per_req=us_per_req(["haproxy", "sb-loadgen"]))
print(json.dumps(report))
PY
  between_probes
  sleep 2
}

if [ -n "${BENCH_TRACING:-}" ]; then
  # A collector that accepts every export at once: what a healthy sidecar costs the pods.
  sink_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 - "$sink_port" <<'PY' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
  sink=$!
  trap 'kill "$sink" 2>/dev/null || :' EXIT
  for round in $(seq "$ROUNDS"); do
    for mode in $BENCH_TRACING; do
      case $mode in
        off) set -- OTEL_EXPORTER_OTLP_ENDPOINT= ;;
        ratio10) set -- OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port" \
          OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1 ;;
        always) set -- OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port" \
          OTEL_TRACES_SAMPLER=always_on ;;
        down) set -- OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 OTEL_TRACES_SAMPLER=always_on ;;
        *) die "BENCH_TRACING: unknown mode $mode" ;;
      esac
      # The webhook limit off, as in every other closed loop: a refused webhook is not the
      # accept path whose cost is measured.
      restart_pods "$@" RATE_LIMIT_WEBHOOK_SLACK=off WORKER_CONCURRENCY=0 BACKPRESSURE_INBOUND_DEPTH=0
      closed_loop switchboard "$round" "tracing:$mode"
    done
  done
  python3 - "$OUT" <<'PY' | tee -a "$OUT"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("kind") == "closed" and str(r.get("limiter", "")).startswith("tracing:")]
def spread(values):
    values = [v for v in values if v is not None]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values} if values else None
by_mode = {}
for r in rows:
    by_mode.setdefault(r["limiter"][len("tracing:"):], []).append(r)
summary = {"kind": "tracing_summary", "modes": {}}
for mode, rs in by_mode.items():
    summary["modes"][mode] = {
        "achieved_rps": spread([r.get("achieved_rps") for r in rs]),
        "p99_ms": spread([r.get("p99_ms") for r in rs]),
        "service_cpu_us_per_req": spread([r.get("service_cpu_us_per_req") for r in rs]),
    }
print(json.dumps(summary))
PY
  exit 0
fi

if [ -n "${BENCH_LIMITER:-}" ]; then
  for mode in $BENCH_LIMITER; do
    case $mode in
      off) set -- RATE_LIMIT_WEBHOOK_SLACK=off ;;
      enforce) set -- RATE_LIMIT_WEBHOOK_SLACK=100000000/min ;;
      shadow) set -- RATE_LIMIT_WEBHOOK_SLACK=100000000/min RATE_LIMIT_SHADOW=webhook_slack ;;
      *) die "BENCH_LIMITER: unknown mode $mode" ;;
    esac
    if [ "$WORKERS" = 1 ]; then
      restart_pods "$@"
    else
      restart_pods "$@" WORKER_CONCURRENCY=0 BACKPRESSURE_INBOUND_DEPTH=0
    fi
    closed_loop switchboard 0 "$mode"
  done
  exit 0
fi

between_probes
for round in $(seq "$ROUNDS"); do
  for side in $SIDES; do
    capacity "$side" "$round"
    closed_loop "$side" "$round"
  done
done

log "summary ($OUT):"
python3 - "$OUT" <<'PY' | tee -a "$OUT"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
caps, cpu = {}, {}
for r in rows:
    if r["kind"] == "capacity":
        caps.setdefault(r["target"], {})[r["round"]] = r["rps"]
    if r["kind"] == "closed" and r.get("service_cpu_us_per_req"):
        cpu.setdefault(r["target"], []).append(r["service_cpu_us_per_req"])
summary = {"kind": "summary", "capacity": {}, "ratios": {}, "service_cpu_us_per_req": {}}
for side, by_round in caps.items():
    v = list(by_round.values())
    summary["capacity"][side] = {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
for base in ("node-durable", "node-redis"):
    if "switchboard" in caps and base in caps:
        r = [caps["switchboard"][k] / caps[base][k] for k in caps["switchboard"] if caps[base].get(k)]
        if r:
            summary["ratios"]["switchboard/" + base] = {
                "median": round(statistics.median(r), 2), "min": round(min(r), 2), "max": round(max(r), 2)}
for side, v in cpu.items():
    summary["service_cpu_us_per_req"][side] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
print(json.dumps(summary))
PY
