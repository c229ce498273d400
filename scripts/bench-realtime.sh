#!/usr/bin/env bash
# Realtime benchmark (issue 4): N Socket.IO clients split evenly over the two pods of the
# local stack (half connect straight to pod-1, half to pod-2; websocket transport only, all
# logged in as the demo org's expert, so every socket is in org:{org_id}), then signed Slack
# webhooks at a fixed rate to one pod. For each N it reports
#   connect   total time until all N are connected, p50/p99 of one handshake
#   memory    VmRSS of each pod before and after, divided by the sockets on that pod
#   latency   from each webhook's HTTP 200 to: the first socket anywhere, the first socket on
#             BOTH pods (one of the two is reached across pods through Redis), and the last
#             socket (fan-out complete); for `message_created` (emitted by the inbound job
#             once the message is stored) and `queue_item_created|updated` (emitted after the
#             draft: in development no agent is configured, so this is the fallback draft).
# The webhook's message is matched to its events exactly: gen-slack.py's event ts becomes
# messages.channel_message_id, which one query maps to the message_id / conversation_id the
# events carry (scripts/bench/sio-clients.js explains the phases).
#
# Usage: scripts/bench-realtime.sh   (brings the stack up with dev-up if needed)
# Env:   BENCH_SOCKETS ("1000 5000 10000")  socket counts, one round each
#        BENCH_EVENTS (200), BENCH_RATE (2)   webhooks per round, and per second (every
#                                            webhook is 2 events x N sockets of frames for
#                                            the one client process to parse: keep it low)
#        BENCH_CLIENT (rust)                 rust | node: what holds the sockets. rust:
#                                            sb-sio-listen (crates/loadgen), one thread per
#                                            client process; node: socket.io-client, which
#                                            spends 200-300 ms of a core parsing one event's
#                                            10 000 frames on the pods' own two cores
#        BENCH_CLIENT_PROCS (1)              client processes the sockets are spread over
#        BENCH_WEBHOOK_TARGET (pod-2)        pod-1 | pod-2 | lb: where webhooks are POSTed
#        BENCH_CONNECT_CONCURRENCY (200)     handshakes in flight while connecting
#        BENCH_RESTART_PODS (1)              restart the pods before each round, so each RSS
#                                            "before" is a fresh process (allocators keep
#                                            freed memory) and the pods inherit this
#                                            script's raised `ulimit -n`; 0 keeps them
#        BENCH_SETTLE_S (60)                 wait at most this long after the last webhook
#        BENCH_NOFILE (65536)                open-file limit to ask for (soft and hard)
#        BENCH_ROLE (expert)                 expert | admin: whose token the sockets use
#        SB_SKIP_BUILD=1                     reuse target/release/switchboard (dev-up) and
#                                            target/release/sb-sio-listen
# Output: JSON lines on stdout and appended to .dev/bench/realtime-results.jsonl (each line
# carries the run id), then a short summary; per-webhook timings of the last round of each N
# in .dev/bench/realtime-N-events.jsonl.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

SOCKET_COUNTS="${BENCH_SOCKETS:-1000 5000 10000}"
# One client address (and a few users) opens every socket: the per-address handshake rate
# limit and the per-user and per-address socket caps would refuse most of them. The pods
# this script (re)starts inherit these.
export RATE_LIMIT_SOCKET="${RATE_LIMIT_SOCKET:-off}"
export SOCKETS_PER_USER="${SOCKETS_PER_USER:-0}" SOCKETS_PER_ADDRESS="${SOCKETS_PER_ADDRESS:-0}"
EVENTS="${BENCH_EVENTS:-200}"
RATE="${BENCH_RATE:-2}"
TARGET="${BENCH_WEBHOOK_TARGET:-pod-2}"
CONCURRENCY="${BENCH_CONNECT_CONCURRENCY:-200}"
RESTART="${BENCH_RESTART_PODS:-1}"
SETTLE="${BENCH_SETTLE_S:-60}"
NOFILE="${BENCH_NOFILE:-65536}"
ROLE="${BENCH_ROLE:-expert}"
CLIENT="${BENCH_CLIENT:-rust}"
LISTENER_BIN=""
BENCH="$DEV/bench"
NODE_DIR="$BENCH/realtime"
OUT="$BENCH/realtime-results.jsonl"
RUN="$(date -u +%Y%m%dT%H%M%SZ)"

case "$ROLE" in expert | admin) ;; *) die "BENCH_ROLE must be expert or admin" ;; esac
case "$CLIENT" in rust | node) ;; *) die "BENCH_CLIENT must be rust or node" ;; esac
case "$TARGET" in pod-1 | pod-2 | lb) ;; *) die "BENCH_WEBHOOK_TARGET must be pod-1, pod-2 or lb" ;; esac

# --- open files: the client holds N sockets, each pod N/2 -----------------------------------
# Raise the hard limit too when allowed (root, or a high enough hard limit already); the pods
# inherit it when this script (re)starts them.
ulimit -Hn "$NOFILE" 2>/dev/null || true
ulimit -n "$NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
max_n=0
for n in $SOCKET_COUNTS; do [ "$n" -gt "$max_n" ] && max_n=$n; done
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((max_n + 512)) ]; then
  warn "ulimit -n is $(ulimit -n) (hard $(ulimit -Hn)); the client needs about $((max_n + 512)) for $max_n sockets"
fi

# --- tools and the Node client ------------------------------------------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=""
  is_root || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
command -v psql >/dev/null || die "psql is needed (package postgresql-client)"
mkdir -p "$NODE_DIR"
if ! cmp -s scripts/bench/package.json "$NODE_DIR/package.json" ||
  [ ! -d "$NODE_DIR/node_modules/socket.io-client" ]; then
  log "Installing the Socket.IO client into ${NODE_DIR#"$ROOT"/}"
  cp scripts/bench/package.json "$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund --no-package-lock >/dev/null)
fi

if [ "$CLIENT" = rust ]; then
  LISTENER_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sb-sio-listen"
  if [ "${SB_SKIP_BUILD:-0}" != 1 ] || [ ! -x "$LISTENER_BIN" ]; then
    log "Building sb-sio-listen"
    cargo build --release -q -p switchboard-loadgen --bin sb-sio-listen
  fi
fi

# --- the stack -------------------------------------------------------------------------------
pod_pidfile() { echo "$DEV/pod-$1.pid"; }
pod_nofile() { sed -n 's/^Max open files *\([0-9a-z]*\).*/\1/p' "/proc/$(pid_of "$(pod_pidfile "$1")")/limits"; }

# Stops both pods gracefully (SIGTERM: they drain, as in a rolling deploy) and starts them
# again through dev-up, from this shell, so they get its open-file limit.
restart_pods() {
  local i file
  for i in 1 2; do
    file="$(pod_pidfile $i)"
    pid_alive "$file" switchboard && kill -TERM "$(pid_of "$file")"
  done
  for _ in $(seq 150); do
    pid_alive "$(pod_pidfile 1)" switchboard || pid_alive "$(pod_pidfile 2)" switchboard || break
    sleep 0.2
  done
  for i in 1 2; do
    file="$(pod_pidfile $i)"
    if pid_alive "$file" switchboard; then
      warn "pod-$i did not stop within 30 s; killing it"
      kill -KILL "$(pid_of "$file")"
    fi
  done
  stack_up
}
stack_up() { scripts/dev-up.sh >"$BENCH/realtime-dev-up.log" 2>&1 || {
  tail -n 20 "$BENCH/realtime-dev-up.log" >&2
  die "dev-up failed (log: .dev/bench/realtime-dev-up.log)"
}; }

mkdir -p "$BENCH"
log "Bringing the stack up (scripts/dev-up.sh)"
stack_up

psql_dev() { psql "postgres://postgres@127.0.0.1:$PG_PORT/switchboard" -XAtqc "$1"; }
read -r ORG_ID SLACK_ID SLACK_SECRET EMAIL PASSWORD < <(python3 - "$ROLE" <<'PY'
import json, sys
s = json.load(open(".dev/seed.json"))
c = s["channels"]["slack"]
u = s[sys.argv[1]]
print(s["org_id"], c["id"], c["secrets"]["signing_secret"], u["email"], u["password"])
PY
)
case "$TARGET" in
pod-1) HOOK_BASE="http://127.0.0.1:${POD_PORTS[0]}" ;;
pod-2) HOOK_BASE="http://127.0.0.1:${POD_PORTS[1]}" ;;
lb) HOOK_BASE="http://127.0.0.1:$LB_PORT" ;;
esac
WEBHOOK_URL="$HOOK_BASE/webhooks/slack/$SLACK_ID"

login() {
  local body
  body="$(python3 -c 'import json, sys; print(json.dumps({"email": sys.argv[1], "password": sys.argv[2]}))' "$EMAIL" "$PASSWORD")"
  curl -fsS -m 10 -H 'Content-Type: application/json' --data-binary "$body" \
    "http://127.0.0.1:$LB_PORT/auth/login" | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])'
}

# Waits until no inbound event is left unprocessed, so a round does not start while earlier
# load still keeps the pods busy; gives up (and says so) after 120 s, or when the backlog has
# not moved for 10 s (events whose lease is held by a worker that is not progressing).
wait_idle() {
  local backlog last="" still=0
  for _ in $(seq 240); do
    backlog="$(psql_dev "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL")"
    [ "$backlog" = 0 ] && return 0
    if [ "$backlog" = "$last" ]; then still=$((still + 1)); else still=0; fi
    [ "$still" -ge 20 ] && break
    last=$backlog
    sleep 0.5
  done
  warn "$backlog inbound events still unprocessed (not from this benchmark); measuring anyway"
}

emit_line() { printf '%s\n' "$1" | tee -a "$OUT"; }

emit_line "$(python3 - "$RUN" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$(stat -c %y "$BIN" 2>/dev/null || echo unknown)" "$SOCKET_COUNTS" "$EVENTS" "$RATE" "$TARGET" \
  "$WEBHOOK_URL" "$CONCURRENCY" "$RESTART" "$(ulimit -n)" "$(nproc)" "$(node --version)" "$CLIENT" "${BENCH_CLIENT_PROCS:-1}" <<'PY'
import json, sys
a = sys.argv[1:]
print(json.dumps({"bench": "realtime", "run": a[0], "phase": "meta", "git_head": a[1],
                  "binary_mtime": a[2], "socket_counts": [int(x) for x in a[3].split()],
                  "events": int(a[4]), "rate_per_s": float(a[5]), "webhook_target": a[6],
                  "webhook_url": a[7], "connect_concurrency": int(a[8]),
                  "restart_pods_each_round": a[9] == "1", "client_nofile": a[10],
                  "cpus": int(a[11]), "node": a[12], "client": a[13],
                  "client_processes": int(a[14])}))
PY
)"

failed=0
for n in $SOCKET_COUNTS; do
  need=$((n / 2 + 512))
  if [ "$RESTART" = 1 ]; then
    log "Round N=$n: restarting the pods for a fresh RSS baseline"
    restart_pods
  else
    for i in 1 2; do
      lim="$(pod_nofile $i)"
      if [ "$lim" != unlimited ] && [ "$lim" -lt "$need" ]; then
        log "pod-$i allows $lim open files, $n sockets need about $need there: restarting the pods"
        restart_pods
        break
      fi
    done
  fi
  wait_idle
  token="$(login)" || die "login as $EMAIL failed"
  # Which build the pods run (another checkout user may rebuild the binary between rounds).
  sums=""
  for i in 1 2; do
    sums+="\"pod-$i\":\"$(md5sum "/proc/$(pid_of "$(pod_pidfile $i)")/exe" | cut -c1-12)\","
  done
  emit_line "{\"bench\":\"realtime\",\"run\":\"$RUN\",\"sockets\":$n,\"phase\":\"round\",\"pod_binary_md5\":{${sums%,}},\"pod_nofile\":{\"pod-1\":\"$(pod_nofile 1)\",\"pod-2\":\"$(pod_nofile 2)\"}}"
  log "Round N=$n: $n sockets ($((n / 2)) per pod), $EVENTS webhooks at $RATE/s to $TARGET"
  if ! SIO_RUN="$RUN" SIO_PODS="http://127.0.0.1:${POD_PORTS[0]},http://127.0.0.1:${POD_PORTS[1]}" \
    SIO_POD_PIDS="$(pid_of "$(pod_pidfile 1)"),$(pid_of "$(pod_pidfile 2)")" \
    SIO_SOCKETS="$n" SIO_TOKEN="$token" SIO_CONCURRENCY="$CONCURRENCY" SIO_PROCS="${BENCH_CLIENT_PROCS:-1}" \
    SIO_LISTENER_BIN="$LISTENER_BIN" \
    SIO_WEBHOOK_URL="$WEBHOOK_URL" SIO_SIGNING_SECRET="$SLACK_SECRET" SIO_EVENTS="$EVENTS" \
    SIO_RATE="$RATE" SIO_SETTLE_S="$SETTLE" SIO_GEN="$ROOT/scripts/bench/gen-slack.py" \
    SIO_TMP="$BENCH" SIO_ORG_ID="$ORG_ID" SIO_NODE_DIR="$NODE_DIR" \
    SIO_RAW="$BENCH/realtime-$n-events.jsonl" \
    DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/switchboard" \
    node --max-old-space-size=4096 scripts/bench/sio-clients.js >"$BENCH/realtime-$n.jsonl"; then
    failed=1
    warn "round N=$n failed (see the messages above)"
    emit_line "{\"bench\":\"realtime\",\"run\":\"$RUN\",\"sockets\":$n,\"phase\":\"error\"}"
  fi
  while IFS= read -r line; do emit_line "$line"; done <"$BENCH/realtime-$n.jsonl"
done

# --- summary -------------------------------------------------------------------------------
python3 - "$OUT" "$RUN" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r.get("run") == sys.argv[2]]
meta = next((r for r in rows if r["phase"] == "meta"), {})
print()
print(f"Realtime benchmark {sys.argv[2]} (HEAD {meta.get('git_head')}, {meta.get('cpus')} CPUs, "
      f"webhooks {meta.get('events')} at {meta.get('rate_per_s')}/s to {meta.get('webhook_target')})")
def ms(s, k):
    v = (s or {}).get(k)
    return "-" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.1f}"
# One group per round, in order: each starts at its "round" line.
rounds = []
for r in rows:
    if r["phase"] == "round":
        rounds.append((r["sockets"], {}))
    elif rounds and r.get("sockets") == rounds[-1][0]:
        rounds[-1][1][r["phase"]] = r
for n, by in rounds:
    if "error" in by or "connect" not in by:
        print(f"  N={n}: failed")
        continue
    c, m, l = by["connect"], by.get("memory", {}), by.get("latency")
    per_pod = ", ".join(f"{v['kib_per_socket']}" for v in m.get("by_pod", {}).values())
    print(f"  N={n}: {c['connected']} connected ({c['failed']} failed) in {c['total_s']} s, "
          f"handshake p50 {ms(c['handshake'], 'p50_ms')} ms / p99 {ms(c['handshake'], 'p99_ms')} ms; "
          f"RSS +{m.get('kib_per_socket_mean')} KiB/socket (per pod: {per_pod})")
    if l:
        for label in ("message_created", "queue_item"):
            e = l[label]
            print(f"    {label:<16} first socket p50/p99 {ms(e['first_socket_any_pod'], 'p50_ms')}/"
                  f"{ms(e['first_socket_any_pod'], 'p99_ms')} ms, on both pods "
                  f"{ms(e['first_socket_on_both_pods'], 'p50_ms')}/{ms(e['first_socket_on_both_pods'], 'p99_ms')} ms, "
                  f"all {c['connected']} sockets {ms(e['all_sockets'], 'p50_ms')}/{ms(e['all_sockets'], 'p99_ms')} ms")
        print(f"    webhooks {l['webhooks_ok']}/{l['events']} ok (ack p50 {ms(l['webhook_ack'], 'p50_ms')} ms), "
              f"all delivered everywhere: {l['all_delivered_everywhere']}, missing {l['events_with_no_delivery']}, "
              f"partial {l['events_missing_some_sockets']}, client loop delay p99 "
              f"{l['client_event_loop_delay_ms']['p99']} ms, disconnects {l['unexpected_disconnects']}")
print(f"  (all lines: {sys.argv[1]})")
PY
exit "$failed"
