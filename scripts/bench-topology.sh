#!/usr/bin/env bash
# What the managed topology costs: the release benchmark and the whole-product ingest
# benchmark on the laptop topology (one plaintext Postgres, one Redis) and on the managed one
# (TLS Postgres behind PgBouncer in transaction mode, a 3-master, 3-replica TLS Redis
# Cluster), alternating plain, managed, plain, managed, ... so drift of the box hits both.
# Every run starts on a fresh stack (`dev-down --purge`, then dev-up with SB_TOPOLOGY).
#
# Usage: scripts/bench-topology.sh
# Env:   BENCH_TOPOLOGY_ROUNDS (2) rounds of both topologies;
#        BENCH_RELEASE_RUNS (2) release runs per topology and round (BENCH_RUNS there);
#        the ingest round uses BENCH_SIDES=switchboard BENCH_WORKERS=1 BENCH_ROUNDS=1 and
#        whatever else of bench-ingest.sh's settings is set (BENCH_PROBE_SECONDS, ...);
#        SB_SKIP_BUILD=1 reuses the built binaries.
# Output: .dev-bench-topology.jsonl in the checkout (kept across the purges): every JSON line
#        of both benchmarks with "topology" and "round" added; a summary at the end.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

ROUNDS="${BENCH_TOPOLOGY_ROUNDS:-2}"
RELEASE_RUNS="${BENCH_RELEASE_RUNS:-2}"
OUT="$ROOT/.dev-bench-topology.jsonl"
: >"$OUT"

if [ "${SB_SKIP_BUILD:-0}" != 1 ]; then
  log "Building switchboard and sb-loadgen (release)"
  cargo build --release -q -p switchboard -p switchboard-loadgen
fi
export SB_SKIP_BUILD=1 SB_NATIVE=1

# Appends the benchmark's JSON lines (those on stdout that parse) with the topology and round.
tag() {
  python3 -c '
import json, sys
topology, rnd = sys.argv[1], int(sys.argv[2])
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if isinstance(d, dict):
        d.update(topology=topology, round=rnd)
        print(json.dumps(d))' "$1" "$2" >>"$OUT"
}

for round in $(seq "$ROUNDS"); do
  for topology in plain managed; do
    log "round $round: $topology"
    scripts/dev-down.sh --purge >/dev/null 2>&1 || true
    SB_TOPOLOGY=$topology BENCH_RUNS=$RELEASE_RUNS scripts/bench-release.sh | tag "$topology" "$round"
    SB_TOPOLOGY=$topology BENCH_SIDES=switchboard BENCH_WORKERS=1 BENCH_ROUNDS=1 \
      scripts/bench-ingest.sh >/dev/null
    tag "$topology" "$round" <"$DEV/bench/ingest.jsonl"
  done
done
scripts/dev-down.sh --purge >/dev/null 2>&1 || true

python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def show(label, pick, key):
    for topology in ("plain", "managed"):
        vals = [r[key] for r in rows if r["topology"] == topology and pick(r) and r.get(key) is not None]
        if vals:
            vals.sort()
            print(f"  {label:<34} {topology:<8} median {vals[len(vals)//2]:>9}  (runs: {', '.join(str(v) for v in vals)})")
release = lambda r: "http_p99_ms" in r
closed = lambda r: r.get("kind") == "closed"
print("release (200/s):")
show("release p50 ms", release, "http_p50_ms")
show("release p99 ms", release, "http_p99_ms")
show("release -> other pod's socket p99 ms", release, "cross_pod_p99_ms")
print("ingest, whole product (workers on):")
show("capacity at p99 <= target (req/s)", lambda r: r.get("kind") == "capacity", "rps")
show("closed loop accepted/s", closed, "achieved_rps")
show("closed loop p99 ms", closed, "p99_ms")
show("CPU us per webhook (service)", closed, "service_cpu_us_per_req")
PY
