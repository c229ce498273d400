#!/usr/bin/env bash
# End-to-end benchmark: accept AND process, Switchboard against the Node peer doing the same
# work (../shared/bench/node-baseline: two `server.js` in durable mode and two `worker.js`
# behind their own HAProxy), on the same Postgres server, Redis and fake agent, in one run.
#
#   round      for each side in turn (A, B, A, B, ...): a closed loop of BENCH_LOAD_SECONDS
#              (BENCH_CONNS connections, every request a new signed event from one of
#              BENCH_USERS customers, workers on), then the time until every accepted event
#              is processed (Switchboard: `inbound_events.processed_at`; the peer:
#              `baseline_inbound_events.processed_at`)
#   figures    accepted per second and its p99; processed per second during the load;
#              the drain rate after it (what was left ÷ the time to process it); end to end
#              (accepted ÷ (load + drain time))
#   CPU        pidstat over the whole round (load and drain), attributed per process:
#              the side's own processes (Switchboard: pods + Postgres + Redis [+ PgBouncer];
#              the peer: its Node processes + Postgres + Redis), each of them apart, and the
#              rig (HAProxy, sb-loadgen, the fake agent), in CPU-µs per processed event
#   sides      switchboard   the two-pod dev stack behind HAProxy (no stickiness), this build
#              node-peer     the Node servers and workers
#              base          Switchboard again, built from another commit (BENCH_BASE_BIN),
#                            so that a change is measured against the build before it in
#                            the same run; its pods restart into that binary for its rounds
#
# Usage: scripts/bench-e2e.sh          (brings the dev stack up with dev-up if needed)
# Env:   BENCH_ROUNDS (2), BENCH_LOAD_SECONDS (15), BENCH_CONNS (64), BENCH_USERS (1000),
#        BENCH_SIDES ("switchboard node-peer"), BENCH_BASE_BIN (for the `base` side),
#        BENCH_POD_ENV (extra VAR=value settings for the pods, e.g.
#        "ACCEPT_PRIORITY_IN_FLIGHT=0"), BENCH_DRAIN_TIMEOUT (900 s),
#        BASELINE_DIR (../shared/bench/node-baseline), SB_SKIP_BUILD=1 to reuse the binaries.
# Results: one JSON line per round and a summary in .dev/bench/e2e.jsonl.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
# shellcheck source=scripts/lib-bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-bench.sh"
cd "$ROOT"

ROUNDS="${BENCH_ROUNDS:-2}"
LOAD_SECONDS="${BENCH_LOAD_SECONDS:-15}"
CONNS="${BENCH_CONNS:-64}"
USERS="${BENCH_USERS:-1000}"
SIDES="${BENCH_SIDES:-switchboard node-peer}"
DRAIN_TIMEOUT="${BENCH_DRAIN_TIMEOUT:-900}"
DRAIN="${BENCH_DRAIN:-1}"
BASELINE_SRC="${BASELINE_DIR:-$ROOT/../shared/bench/node-baseline}"
BENCH="$DEV/bench"
OUT="$BENCH/e2e.jsonl"
LOADGEN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sb-loadgen"
THIS_BIN="$BIN"
# The peer: two servers and two workers; the servers behind their own HAProxy.
PEER_SERVERS=(4105 4106)
PEER_LB=8092
read -r -a POD_ENV <<<"${BENCH_POD_ENV:-}"

bench_tools
for side in $SIDES; do
  case $side in
    switchboard | node-peer) ;;
    base)
      [ -x "${BENCH_BASE_BIN:-}" ] || die "the base side needs BENCH_BASE_BIN (a switchboard binary)"
      # dev-up tells its pods by their process name.
      [ "$(basename "$BENCH_BASE_BIN")" = switchboard ] ||
        die "BENCH_BASE_BIN must be named switchboard (e.g. /tmp/base/<commit>/switchboard)"
      ;;
    *) die "BENCH_SIDES: unknown side $side" ;;
  esac
done
bench_loadgen "$LOADGEN"

scripts/dev-up.sh >/dev/null
export SB_SKIP_BUILD=1
[ "$(recorded_topology)" = plain ] || die "the Node peer speaks to the plain stack's Postgres and Redis: run on the plain topology"
mkdir -p "$BENCH"

# --- the peer --------------------------------------------------------------------------------
bench_node_baseline "$BASELINE_SRC" "$BENCH/node-baseline"
PEER_DB="postgres://postgres@127.0.0.1:$PG_PORT/node_baseline"
AGENT_URL="http://127.0.0.1:${SB_DEMO_PORT:-4010}/agent/v1/chat"
peer_pids=()
worker_pids=()
stop_peer() {
  local pid
  for pid in "${peer_pids[@]}" "${worker_pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  if [ -f "$BENCH/haproxy-peer.pid" ]; then kill "$(cat "$BENCH/haproxy-peer.pid")" 2>/dev/null || true; fi
}
cleanup() {
  stop_peer
  [ -z "${sampler:-}" ] || kill -INT "$sampler" 2>/dev/null || true
}
trap cleanup EXIT
# Started one after another: each process creates its schema with IF NOT EXISTS, which two
# sessions racing on the same object do not make safe.
started() {
  local log=$1 line=$2
  for _ in $(seq 150); do
    grep -q "$line" "$log" 2>/dev/null && return 0
    sleep 0.2
  done
  die "a peer process did not start ($log)"
}
start_peer_workers() {
  local n
  for n in 1 2; do
    (cd "$BENCH/node-baseline" && exec env REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
      DATABASE_URL="$PEER_DB" AGENT_URL="$AGENT_URL" node worker.js >"$BENCH/peer-worker-$n.log" 2>&1) &
    worker_pids+=("$!")
    started "$BENCH/peer-worker-$n.log" "baseline worker"
  done
}
if [[ " $SIDES " == *" node-peer "* ]]; then
  # The peer starts empty: what an earlier, interrupted run left in its queue would be
  # processed by the first worker while the second creates its schema, and deadlock it.
  redis-cli -p "$REDIS_PORT" --scan --pattern 'bull:channel-inbound:*' |
    xargs -r -n 1000 redis-cli -p "$REDIS_PORT" unlink >/dev/null
  psql_dev "TRUNCATE baseline_inbound_events" node_baseline >/dev/null 2>&1 || true
  for port in "${PEER_SERVERS[@]}"; do
    (cd "$BENCH/node-baseline" && exec env PORT="$port" REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
      DATABASE_URL="$PEER_DB" SLACK_SIGNING_SECRET=test-signing-secret \
      node server.js >"$BENCH/peer-server-$port.log" 2>&1) &
    peer_pids+=("$!")
    started "$BENCH/peer-server-$port.log" "baseline listening"
  done
  start_peer_workers
  sed -e "s/@LB_PORT@/$PEER_LB/" -e "s/@POD1_ADDR@/127.0.0.1:${PEER_SERVERS[0]}/" \
    -e "s/@POD2_ADDR@/127.0.0.1:${PEER_SERVERS[1]}/" -e "s#GET /ready#GET /health#" \
    scripts/haproxy.cfg.tmpl >"$BENCH/haproxy-peer.cfg"
  haproxy -f "$BENCH/haproxy-peer.cfg" -D -p "$BENCH/haproxy-peer.pid"
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$PEER_LB/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
fi

# --- targets -----------------------------------------------------------------------------
read -r SB_ID SB_SECRET < <(python3 -c '
import json; c = json.load(open(".dev/seed.json"))["channels"]["slack"]
print(c["id"], c["secrets"]["signing_secret"])')
url_of() {
  case $1 in
    node-peer) echo "http://127.0.0.1:$PEER_LB/webhooks/slack" ;;
    *) echo "http://127.0.0.1:$LB_PORT/webhooks/slack/$SB_ID" ;;
  esac
}
secret_of() { if [ "$1" = node-peer ]; then echo test-signing-secret; else echo "$SB_SECRET"; fi; }
# Events accepted and not yet processed. The peer's inbox is emptied before each of its
# rounds, so its count reads only that round's rows.
backlog_of() {
  case $1 in
    node-peer) psql_dev "SELECT count(*) FROM baseline_inbound_events WHERE processed_at IS NULL" node_baseline ;;
    *) psql_dev "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL" ;;
  esac
}
# Whether any is left: cheaper than counting, which the drain polls twice a second.
pending_in() {
  case $1 in
    node-peer) psql_dev "SELECT EXISTS (SELECT 1 FROM baseline_inbound_events WHERE processed_at IS NULL)" node_baseline ;;
    *) psql_dev "SELECT EXISTS (SELECT 1 FROM inbound_events WHERE processed_at IS NULL)" ;;
  esac
}
wait_drained() {
  local side=$1 deadline=$(($(date +%s) + DRAIN_TIMEOUT))
  while [ "$(pending_in "$side")" = t ]; do
    [ "$(date +%s)" -lt "$deadline" ] || die "$side: the backlog did not drain within ${DRAIN_TIMEOUT}s"
    sleep 0.5
  done
}
# The pods of a Switchboard side, restarted into its build with this run's settings: no
# webhook rate limit (the load comes from one address), the rest as configured.
start_side() {
  case $1 in
    switchboard) SB_BIN="$THIS_BIN" restart_pods RATE_LIMIT_WEBHOOK_SLACK=off "${POD_ENV[@]}" ;;
    base) SB_BIN="$BENCH_BASE_BIN" restart_pods RATE_LIMIT_WEBHOOK_SLACK=off "${POD_ENV[@]}" ;;
    node-peer) psql_dev "TRUNCATE baseline_inbound_events" node_baseline >/dev/null 2>&1 || true ;;
  esac
}
# Which role each process plays, by pid (the pods and the fake agent run the same binary).
roles() {
  local f
  for f in "$DEV"/pod-*.pid; do printf 'pods %s\n' "$(pid_of "$f")"; done
  printf 'agent %s\n' "$(pid_of "$DEV/demo-providers.pid")"
  # The subshells' exec made the pids node's own.
  for f in "${peer_pids[@]}" "${worker_pids[@]}"; do printf 'node %s\n' "$f"; done
}

# Starts and stops a side's processing (its workers), for the drain measurement.
# The peer's workers are frozen (SIGSTOP) rather than restarted: a worker creates its schema
# on start, and its ALTER TABLE deadlocks with the other worker's jobs once a backlog waits.
workers_off() {
  case $1 in
    switchboard) SB_BIN="$THIS_BIN" restart_pods RATE_LIMIT_WEBHOOK_SLACK=off "${POD_ENV[@]}" WORKER_CONCURRENCY=0 ;;
    base) SB_BIN="$BENCH_BASE_BIN" restart_pods RATE_LIMIT_WEBHOOK_SLACK=off "${POD_ENV[@]}" WORKER_CONCURRENCY=0 ;;
    node-peer) kill -STOP "${worker_pids[@]}" ;;
  esac
}
workers_on() {
  case $1 in
    node-peer) kill -CONT "${worker_pids[@]}" ;;
    *) start_side "$1" ;;
  esac
}

# Figures of one measured window; CPU from pidstat's file, attributed by role.
figures() {
  python3 - "$@" "$(roles)" <<'PY'
import datetime, json, sys
(kind, side, rnd, report, cpu_file, t0, t_load, t_end, left, roles) = sys.argv[1:11]
rnd, report, left = int(rnd), json.loads(report), int(left)
t0, t_load, t_end = float(t0), float(t_load), float(t_end)
by_pid = dict(reversed(line.split()) for line in roles.splitlines())
# pidstat -h: "<HH:MM:SS> <uid> <pid> %usr %system %guest %wait %CPU CPU Command" in local
# time; each line covers the second before its timestamp.
def day_seconds(t):
    d = datetime.datetime.fromtimestamp(t)
    return d.hour * 3600 + d.minute * 60 + d.second + d.microsecond / 1e6
start = day_seconds(t0)
end = start + (t_end - t0)
cpu = {}
for line in open(cpu_file):
    f = line.split()
    if len(f) < 10 or f[0].count(":") != 2 or not f[2].isdigit():
        continue
    h, m, s = (int(x) for x in f[0].split(":"))
    at = h * 3600 + m * 60 + s
    if at < start - 43200:
        at += 86400  # past midnight
    if at <= start or at > end + 1:
        continue
    role = by_pid.get(f[2], f[9])
    cpu[role] = cpu.get(role, 0.0) + float(f[7]) / 100  # CPU-seconds
own = ["node", "postgres", "redis-server"] if side == "node-peer" else ["pods", "postgres", "redis-server", "pgbouncer"]
rig = ["haproxy", "sb-loadgen", "agent"]
load_s, drain_s = t_load - t0, t_end - t_load
if kind == "load":
    # The whole product: accepted under load with workers on, then drained.
    events = report["ok"]
    row = dict(accepted=events, errors=report["errors"], accepted_per_s=round(events / load_s, 1),
               p50_ms=report["p50_ms"], p99_ms=report["p99_ms"],
               processed_during_load_per_s=round((events - left) / load_s, 1), left_at_load_end=left,
               drain_s=round(drain_s, 1), drain_per_s=round(left / drain_s, 1) if drain_s > 0.5 else None,
               end_to_end_per_s=round(events / (load_s + drain_s), 1))
else:
    # A backlog accepted with the workers off, processed from the moment they start.
    events = left
    row = dict(backlog=events, backlog_drain_s=round(drain_s, 1),
               backlog_drain_per_s=round(events / drain_s, 1) if drain_s > 0 else None)
us = lambda roles: round(sum(cpu.get(r, 0.0) for r in roles) * 1e6 / events, 1) if events else None
row = dict(kind=kind, target=side, round=rnd, **row,
           cpu_us_per_event={r: round(v * 1e6 / events, 1) for r, v in sorted(cpu.items()) if v > 0.05} if events else {},
           own_cpu_us_per_event=us(own), postgres_cpu_us_per_event=us(["postgres"]), rig_cpu_us_per_event=us(rig))
print(json.dumps(row))
PY
}

sample_cpu() {
  LC_ALL=C stdbuf -oL pidstat -u -h 1 >"$1" &
  sampler=$!
}
stop_sampling() {
  sleep 1.5
  kill -INT "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  sampler=""
}
closed_loop() {
  "$LOADGEN" --url "$(url_of "$1")" --secret "$(secret_of "$1")" --rate 0 \
    --seconds "$LOAD_SECONDS" --conns "$CONNS" --users "$USERS"
}

# The whole product: load with the workers on, then until everything is processed.
load_round() {
  local side=$1 n=$2
  local cpu="$BENCH/e2e-cpu-$side-$n.txt" report t0 t_load t_end left
  log "round $n, $side: load with workers on"
  start_side "$side"
  wait_drained "$side"
  sleep 2
  sample_cpu "$cpu"
  t0=$(date +%s.%N)
  report=$(closed_loop "$side")
  t_load=$(date +%s.%N)
  left=$(backlog_of "$side")
  wait_drained "$side"
  t_end=$(date +%s.%N)
  stop_sampling
  figures load "$side" "$n" "$report" "$cpu" "$t0" "$t_load" "$t_end" "$left" | tee -a "$OUT"
}

# The drain rate: a backlog accepted with the workers off, timed from when they start.
drain_round() {
  local side=$1 n=$2
  local cpu="$BENCH/e2e-cpu-$side-$n-drain.txt" t0 t_end left
  log "round $n, $side: backlog drain"
  workers_off "$side"
  [ "$side" != node-peer ] || psql_dev "TRUNCATE baseline_inbound_events" node_baseline >/dev/null
  closed_loop "$side" >/dev/null
  left=$(backlog_of "$side")
  sleep 2
  sample_cpu "$cpu"
  t0=$(date +%s.%N)
  workers_on "$side"
  wait_drained "$side"
  t_end=$(date +%s.%N)
  stop_sampling
  figures drain "$side" "$n" '{}' "$cpu" "$t0" "$t0" "$t_end" "$left" | tee -a "$OUT"
}

: >"$OUT"
for n in $(seq "$ROUNDS"); do
  for side in $SIDES; do
    load_round "$side" "$n"
    [ "$DRAIN" != 1 ] || drain_round "$side" "$n"
  done
done
# Leave the pods on this build.
[[ " $SIDES " != *" base "* ]] || SB_BIN="$THIS_BIN" restart_pods

log "summary ($OUT):"
python3 - "$OUT" <<'PY' | tee -a "$OUT"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("kind") in ("load", "drain")]
keys = {"load": ["accepted_per_s", "p99_ms", "processed_during_load_per_s", "drain_per_s", "end_to_end_per_s",
                 "own_cpu_us_per_event", "postgres_cpu_us_per_event", "rig_cpu_us_per_event"],
        "drain": ["backlog_drain_per_s", "own_cpu_us_per_event", "postgres_cpu_us_per_event"]}
summary = {"kind": "summary", "sides": {}, "ratios": {}}
by = {}
for r in rows:
    by.setdefault((r["target"], r["kind"]), []).append(r)
for (side, kind), rs in by.items():
    summary["sides"].setdefault(side, {})[kind] = {
        k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
        for k in keys[kind] if (v := [r[k] for r in rs if r.get(k) is not None])}
ratio_keys = {"load": ["accepted_per_s", "processed_during_load_per_s", "end_to_end_per_s"],
              "drain": ["backlog_drain_per_s"]}
for other in ("node-peer", "base"):
    pair = {}
    for kind, ks in ratio_keys.items():
        a, b = by.get(("switchboard", kind), []), by.get((other, kind), [])
        for k in ks:
            v = [x[k] / y[k] for x, y in zip(a, b) if x.get(k) and y.get(k)]
            if v:
                pair[k] = {"median": round(statistics.median(v), 2), "min": round(min(v), 2), "max": round(max(v), 2)}
    if pair:
        summary["ratios"]["switchboard/" + other] = pair
print(json.dumps(summary))
PY
