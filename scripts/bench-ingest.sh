#!/usr/bin/env bash
# Ingest benchmark: signed Slack webhooks against the two-pod stack behind HAProxy, and the
# Node/BullMQ baseline (../shared/bench/node-baseline) as two processes behind the same kind
# of HAProxy, against the same Redis, in the same run.
#
#   closed loop  wrk -t2 -c64 (max throughput; every request a new event id)
#   open loop    scripts/bench/openloop.py at fixed rates (latency from the scheduled send
#                time, so no coordinated omission)
#   CPU          pidstat during each closed loop: CPU per command, and CPU-microseconds per
#                request of the service's own processes (pods + Postgres + Redis; Node +
#                Redis) and of the rig (HAProxy + wrk), which share the same two cores
#
#   limiter      the same closed loop against Switchboard with the webhook rate limit off,
#                enforcing and in shadow mode (a limit the run never reaches, so every
#                request pays for the Redis GCRA script and none is refused): its cost
#
# Usage: scripts/bench-ingest.sh            (brings the stack up with dev-up if needed)
# Env:   BENCH_LIMITER ("off enforce shadow"; empty skips), BENCH_LIMITER_ONLY=1 runs only
#        that comparison (no Node baseline, no open loop),
#        BENCH_DRAIN=0 skips the drain waits (for pods started with WORKER_CONCURRENCY=0),
#        BENCH_SECONDS (20), BENCH_RATES ("1000 2000 4000"), BENCH_CONNS (64),
#        BASELINE_DIR (../shared/bench/node-baseline), SB_SKIP_BUILD=1 to reuse the binary.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

SECONDS_EACH="${BENCH_SECONDS:-20}"
RATES="${BENCH_RATES:-1000 2000 4000}"
CONNS="${BENCH_CONNS:-64}"
BASELINE_SRC="${BASELINE_DIR:-$ROOT/../shared/bench/node-baseline}"
LUA="$(dirname "$BASELINE_SRC")/wrk/signed.lua"
BENCH="$DEV/bench"
NODE_PORTS=(4101 4102)
NODE_LB_PORT=8090
OUT="$BENCH/results.jsonl"

# Only what is missing: a Node.js that did not come from Debian (NodeSource, nvm) must not
# meet Debian's nodejs/npm packages.
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v pidstat >/dev/null || missing+=(sysstat)
command -v python3 >/dev/null || missing+=(python3)
if [ "${#missing[@]}" -gt 0 ]; then
  log "Installing ${missing[*]}"
  sudo=""
  is_root || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

scripts/dev-up.sh >/dev/null
mkdir -p "$BENCH"
: >"$OUT"
LIMITER_MODES="${BENCH_LIMITER-off enforce shadow}"
LIMITER_ONLY="${BENCH_LIMITER_ONLY:-0}"

# --- the baseline: two Node processes behind their own HAProxy, same Redis ------------------
if [ "$LIMITER_ONLY" != 1 ] && [ ! -d "$BENCH/node-baseline/node_modules" ]; then
  rm -rf "$BENCH/node-baseline"
  cp -r "$BASELINE_SRC" "$BENCH/node-baseline"
  chmod -R u+w "$BENCH/node-baseline"
  (cd "$BENCH/node-baseline" && npm install --silent --no-audit --no-fund >/dev/null)
fi
stop_baseline() {
  local pid
  for port in "${NODE_PORTS[@]}"; do
    [ -f "$BENCH/node-$port.pid" ] && kill "$(cat "$BENCH/node-$port.pid")" 2>/dev/null || true
    # Whatever still listens there (a run cut short before its trap ran).
    for pid in $(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2); do
      kill "$pid" 2>/dev/null || true
    done
  done
  [ -f "$BENCH/haproxy-node.pid" ] && kill "$(cat "$BENCH/haproxy-node.pid")" 2>/dev/null || true
}
trap stop_baseline EXIT
stop_baseline
[ "$LIMITER_ONLY" = 1 ] || for port in "${NODE_PORTS[@]}"; do
  (cd "$BENCH/node-baseline" && PORT=$port REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
    SLACK_SIGNING_SECRET=test-signing-secret setsid nohup node server.js \
    >"$BENCH/node-$port.log" 2>&1 & echo $! >"$BENCH/node-$port.pid")
done
sed -e "s/@LB_PORT@/$NODE_LB_PORT/" -e "s/@POD1_ADDR@/127.0.0.1:${NODE_PORTS[0]}/" \
  -e "s/@POD2_ADDR@/127.0.0.1:${NODE_PORTS[1]}/" -e "s#GET /ready#GET /health#" \
  scripts/haproxy.cfg.tmpl >"$BENCH/haproxy-node.cfg"
[ "$LIMITER_ONLY" = 1 ] || haproxy -f "$BENCH/haproxy-node.cfg" -D -p "$BENCH/haproxy-node.pid"
[ "$LIMITER_ONLY" = 1 ] || for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$NODE_LB_PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done

# --- targets -----------------------------------------------------------------------------
read -r SB_ID SB_SECRET < <(python3 -c '
import json; c = json.load(open(".dev/seed.json"))["channels"]["slack"]
print(c["id"], c["secrets"]["signing_secret"])')
SB_URL="http://127.0.0.1:$LB_PORT/webhooks/slack/$SB_ID"
NODE_URL="http://127.0.0.1:$NODE_LB_PORT/webhooks/slack"

# Fresh signed requests right before each run (timestamps must be within 300 s), from 1000
# different customers.
gen() { python3 scripts/bench/gen-slack.py "$2" "$3" "$1"; }

# Switchboard keeps working after it answers (drafts, queue items). Wait until its inbox is
# drained before the next run, so neither side is measured while the other still uses the
# CPU, and record how long the drain took: that is the processing throughput.
psql_dev() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d switchboard -Atc "$1"; }
drain() {
  local label=$1 started backlog total
  # BENCH_DRAIN=0: the pods run without workers (WORKER_CONCURRENCY=0) to measure the
  # accept path alone; nothing would drain.
  [ "${BENCH_DRAIN:-1}" = 0 ] && return 0
  started=$(date +%s.%N)
  total=$(psql_dev "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL")
  while backlog=$(psql_dev "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL") && [ "$backlog" -gt 0 ]; do
    sleep 1
  done
  python3 -c "import json,time; t=time.time()-$started; print(json.dumps({'target':'switchboard','mode':'drain','after':'$label','backlog':$total,'seconds':round(t,1),'events_per_s':round($total/t,1) if t>0 else None}))" >>"$OUT"
}
secret_of() { if [ "$1" = switchboard ]; then echo "$SB_SECRET"; else echo test-signing-secret; fi; }
url_of() { if [ "$1" = switchboard ]; then echo "$SB_URL"; else echo "$NODE_URL"; fi; }

# Per-command CPU (% of one core, summed over processes) averaged over N seconds.
cpu_sample() {
  LC_ALL=C pidstat -u "$1" 1 | awk '/^Average/ && $NF != "Command" { cpu[$NF] += $(NF-2) }
    END { for (c in cpu) printf "%s %.1f\n", c, cpu[c] }'
}

closed_loop() {
  local name=$1 file="$BENCH/$1-closed.tsv" cpu="$BENCH/$1-closed-cpu.txt" report sampler
  gen "$(secret_of "$name")" 150000 "$file"
  # CPU is sampled in the middle of the run (after 3 s of warm-up, ending 2 s early).
  (sleep 3 && cpu_sample "$((SECONDS_EACH - 5))" >"$cpu") &
  sampler=$!
  report=$(wrk -t2 -c"$CONNS" -d"${SECONDS_EACH}s" -s "$LUA" --latency "$(url_of "$name")" -- 2 "$file")
  wait "$sampler" || : >"$cpu"
  python3 - "$name" "$report" "$cpu" >>"$OUT" <<'PY'
import json, re, sys
name, r, cpu_file = sys.argv[1], sys.argv[2], sys.argv[3]
def ms(label):
    m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)", r, re.M)
    return None if not m else round(float(m[1]) * {"us": 0.001, "ms": 1, "s": 1000}[m[2]], 2)
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", r)[1])
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", r)
cpu = {}
for line in open(cpu_file):
    command, pct = line.split()
    cpu[command] = float(pct)
# The processes that serve the webhook (the service), and the rest of the test rig.
service = {"switchboard": ["switchboard", "postgres", "redis-server"],
           "node": ["node", "redis-server"]}[name]
def us_per_req(commands):
    # None when pidstat recorded nothing (rather than a misleading 0).
    if not cpu or not rps:
        return None
    return round(sum(cpu.get(c, 0.0) for c in commands) / 100 * 1e6 / rps, 1)
import os
print(json.dumps({"target": name, "mode": "closed", "limiter": os.environ.get("BENCH_LABEL"), "rps": rps, "p50_ms": ms(50), "p99_ms": ms(99),
                  "non_2xx": int(non2xx[1]) if non2xx else 0,
                  "cpu_pct": {c: cpu.get(c, 0.0) for c in service + ["haproxy", "wrk"]},
                  "service_cpu_us_per_req": us_per_req(service),
                  "rig_cpu_us_per_req": us_per_req(["haproxy", "wrk"])}))
PY
}

open_loop() {
  local name=$1 rate=$2 file="$BENCH/$1-open.tsv" need
  need=$(python3 -c "print(int($rate * $SECONDS_EACH) + 10)")
  gen "$(secret_of "$name")" "$need" "$file"
  python3 scripts/bench/openloop.py "$(url_of "$name")" "$file" "$rate" "$SECONDS_EACH" "$CONNS" |
    python3 -c "import json,sys; d=json.load(sys.stdin); d.update(target='$name', mode='open'); print(json.dumps(d))" >>"$OUT"
}

# Restarts the native pods with extra settings (dev-up starts the pods that are not running,
# and its env file leaves variables it does not set to the caller).
restart_pods() {
  local f
  for f in "$DEV"/pod*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    for _ in $(seq 100); do pid_alive "$f" switchboard || break; sleep 0.2; done
  done
  env "$@" scripts/dev-up.sh >/dev/null
}

drain "start"
if [ -n "$LIMITER_MODES" ]; then
  # A limit the closed loop never reaches (about 10^8 a minute per connection).
  for mode in $LIMITER_MODES; do
    case $mode in
      off) restart_pods RATE_LIMIT_WEBHOOK_SLACK=off RATE_LIMIT_SHADOW= ;;
      enforce) restart_pods RATE_LIMIT_WEBHOOK_SLACK=100000000/min RATE_LIMIT_SHADOW= ;;
      shadow) restart_pods RATE_LIMIT_WEBHOOK_SLACK=100000000/min RATE_LIMIT_SHADOW=webhook_slack ;;
      *) die "BENCH_LIMITER: unknown mode $mode" ;;
    esac
    log "closed loop: switchboard, rate limiter $mode"
    export BENCH_LABEL=$mode
    closed_loop switchboard
    unset BENCH_LABEL
    drain "closed loop, limiter $mode"
    sleep 3
  done
  # Back to the configured limits for the rest.
  restart_pods
fi
if [ "$LIMITER_ONLY" = 1 ]; then
  log "results ($OUT):"
  cat "$OUT"
  exit 0
fi
for name in switchboard node; do
  log "closed loop: $name"
  closed_loop "$name"
  [ "$name" = switchboard ] && drain "closed loop"
  sleep 3
done
for rate in $RATES; do
  for name in switchboard node; do
    log "open loop at $rate/s: $name"
    open_loop "$name" "$rate"
    [ "$name" = switchboard ] && drain "open loop $rate/s"
    sleep 3
  done
done

log "results ($OUT):"
cat "$OUT"
