#!/usr/bin/env bash
# What running behind a transaction-mode pooler costs (docs/PERFORMANCE.md, "Behind a
# transaction-mode pooler"). The local stack's two pods alternate, round by round (direct,
# pooler, direct, pooler, ...), between Postgres itself and PgBouncer in transaction mode in
# front of the same Postgres (`DATABASE_POOLER=transaction`: no named statements, each
# statement parsed again with its Bind), measured by the project's own benchmarks:
#   ingest   bench-ingest.sh's Switchboard side (accept path): capacity at the p99 target,
#            then a closed loop's throughput, p99 and CPU per webhook
#   release  bench-release.sh: release latency and release -> `agent_message_sent` on a
#            socket connected to the other pod, fresh items each run
# Both plaintext: this is the pooler and the statement strategy it needs, not TLS (which
# costs a handshake per new connection and encryption per byte, whatever the pooler).
#
# Usage: scripts/bench-pooler.sh
# Env:   BENCH_ROUNDS (3) rounds of both modes; the two benchmarks' own variables pass
#        through (BENCH_TARGET_MS, BENCH_PROBE_SECONDS, BENCH_ITEMS, BENCH_RATE, ...).
# Output: one JSON line per measurement with its mode and round, then a summary, in
#         .dev/bench/pooler.jsonl.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
# shellcheck source=scripts/lib-services.sh
. "$ROOT/scripts/lib-services.sh"
# shellcheck source=scripts/lib-topology.sh
. "$ROOT/scripts/lib-topology.sh"
cd "$ROOT"

ROUNDS="${BENCH_ROUNDS:-3}"
BENCH="$DEV/bench"
OUT="$BENCH/pooler.jsonl"
# PgBouncer runs as the Postgres user, who cannot enter .dev (0700: it holds secrets).
PGB=$(mktemp -d "${TMPDIR:-/tmp}/sb-pgbouncer.XXXXXX")
chmod 755 "$PGB"
# The comparison needs the native stack: its pods are restarted with each mode's settings.
export SB_NATIVE=1

mkdir -p "$BENCH"
: >"$OUT"
log "Bringing the stack up (scripts/dev-up.sh)"
scripts/dev-up.sh >"$BENCH/pooler-dev-up.log" 2>&1 || {
  tail -n 20 "$BENCH/pooler-dev-up.log" >&2
  die "dev-up failed (log: .dev/bench/pooler-dev-up.log)"
}
export SB_SKIP_BUILD=1

PGB_PORT=$(sb_free_port)
sb_start_pgbouncer "$PGB" "$PGB_PORT" "$PG_PORT" ""
stop_pooler() {
  sb_stop_pgbouncer "$PGB/pgbouncer.pid"
  rm -rf "$PGB"
  # Leave the stack on Postgres directly, as dev-up makes it.
  unset SB_DATABASE_URL DATABASE_POOLER
  restart_pods >/dev/null 2>&1 || true
}
trap stop_pooler EXIT
log "PgBouncer (transaction mode) on 127.0.0.1:$PGB_PORT in front of Postgres :$PG_PORT"

# Points the pods (on their next restart) at Postgres directly or through the pooler.
use_mode() {
  if [ "$1" = pooler ]; then
    export SB_DATABASE_URL="postgres://postgres@127.0.0.1:$PGB_PORT/switchboard"
    export DATABASE_POOLER=transaction
  else
    unset SB_DATABASE_URL DATABASE_POOLER
  fi
}

# Appends JSON lines from stdin to $OUT with mode $1 and round $2 added.
tag() {
  python3 -c '
import json, sys
mode, rnd = sys.argv[1], int(sys.argv[2])
for line in sys.stdin:
    row = json.loads(line)
    row.update(mode=mode, round=rnd)
    print(json.dumps(row))' "$1" "$2" | tee -a "$OUT"
}

for round in $(seq "$ROUNDS"); do
  for mode in direct pooler; do
    use_mode "$mode"
    log "round $round, $mode: ingest"
    BENCH_ROUNDS=1 BENCH_SIDES=switchboard BENCH_WORKERS=0 scripts/bench-ingest.sh \
      >"$BENCH/pooler-ingest.log" 2>&1 || {
      tail -n 20 "$BENCH/pooler-ingest.log" >&2
      die "bench-ingest failed ($mode, round $round)"
    }
    grep -E '"kind": ?"(capacity|closed)"' "$BENCH/ingest.jsonl" | tag "$mode" "$round"
    log "round $round, $mode: release"
    # bench-ingest left the pods without workers; the release needs them.
    restart_pods
    BENCH_RUNS=1 scripts/bench-release.sh >"$BENCH/pooler-release.log" 2>&1 || {
      tail -n 20 "$BENCH/pooler-release.log" >&2
      die "bench-release failed ($mode, round $round)"
    }
    tail -n 1 "$BENCH/release-results.jsonl" | python3 -c '
import json, sys
row = json.loads(sys.stdin.read()); row["kind"] = "release"; print(json.dumps(row))' |
      tag "$mode" "$round"
  done
done

log "summary ($OUT):"
python3 - "$OUT" <<'PY' | tee -a "$OUT"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
metrics = {
    "capacity": ["rps"],
    "closed": ["achieved_rps", "p99_ms", "service_cpu_us_per_req"],
    "release": ["http_p50_ms", "http_p99_ms", "cross_pod_p50_ms", "cross_pod_p99_ms", "errors"],
}
summary = {"kind": "summary"}
for kind, keys in metrics.items():
    for key in keys:
        entry = {}
        for mode in ("direct", "pooler"):
            v = [r[key] for r in rows if r["kind"] == kind and r["mode"] == mode and r.get(key) is not None]
            if v:
                entry[mode] = {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
        if entry:
            summary[f"{kind}.{key}"] = entry
print(json.dumps(summary))
PY
