#!/usr/bin/env bash
# Runs the whole test suite against a PostgreSQL and a Redis of its own, started on free
# ports in a temporary folder and removed afterwards, so a developer's data is never touched.
# Usage: scripts/test.sh [extra args for cargo nextest run / cargo test]
#
# SB_TOPOLOGY picks what the tests talk to:
#   plain (default)  Postgres and Redis without TLS, reached directly; fmt, clippy, every
#                    test, then the browser tests (SB_SKIP_BROWSER=1 skips those).
#   tls-pooler       the production shape: a throwaway CA signs a certificate for
#                    127.0.0.1/localhost; Postgres with TLS behind PgBouncer (transaction
#                    pooling, TLS on both sides, verify-full to Postgres), and a TLS-only
#                    Redis. Without arguments it runs only the tests whose names say they
#                    care about the topology (see topology_tests below); fmt, clippy and
#                    the browser tests stay with the plain run. With arguments, like plain
#                    (fmt, clippy, the tests asked for) but never the browser tests.
#                    Installs pgbouncer when it is missing.
#   managed          tls-pooler's Postgres, and instead of the one Redis a TLS-only Redis
#                    Cluster of 3 masters with a replica each (6 redis-server; TLS on the
#                    cluster bus and for replication too; nodes announce 127.0.0.1; a dead
#                    master's replica takes over within about 5 s). Without arguments the
#                    same kind of subset as tls-pooler, plus the cluster and failover tests;
#                    with arguments like tls-pooler.
#   sentinel         tls-pooler's Postgres, and instead of the one Redis a TLS-only Redis
#                    master with a replica, watched by three TLS-only sentinels (a dead
#                    master's replica takes over within about 3 s). Without arguments the
#                    same kind of subset as tls-pooler, plus the sentinel and failover
#                    tests; with arguments like tls-pooler.
# All export SB_TEST_DATABASE_URL (what pods use), SB_TEST_DATABASE_DIRECT_URL (Postgres
# itself, for what a pooler cannot do), SB_TEST_REDIS_URL, SB_TEST_PG_DATADIR,
# SB_TEST_PG_BINDIR and SB_TEST_PG_RESTART (a script that restarts the test Postgres);
# tls-pooler and managed add SB_TEST_DATABASE_POOLER=transaction, SB_TEST_TLS_CA (the CA that
# signed the servers' certificate) and SB_TEST_TLS_OTHER_CA (an unrelated CA, which must be
# refused). managed adds SB_TEST_REDIS_CLUSTER_NODES (rediss://127.0.0.1:PORT of each master,
# comma-separated: the seeds) and SB_TEST_REDIS_CLUSTER_CTL (a script for the cluster: `masters`
# prints the masters' ports, `kill-master [PORT]` SIGKILLs one and returns once its replica has
# taken over, printing its port, `restart PORT` brings a killed node back as a replica,
# `stop`; see scripts/redis-cluster-ctl); its SB_TEST_REDIS_URL is the first master.
# sentinel adds SB_TEST_REDIS_SENTINELS (rediss://127.0.0.1:PORT of each sentinel),
# SB_TEST_REDIS_SENTINEL_MASTER (the name they watch) and SB_TEST_REDIS_SENTINEL_CTL (`master`,
# `failover`, `kill-master` printing the killed port, `restart PORT`, `stop`; see
# scripts/redis-sentinel-ctl); its SB_TEST_REDIS_URL is the first master.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh
# shellcheck source=scripts/lib-topology.sh
. scripts/lib-topology.sh
# shellcheck source=scripts/lib-sentinel.sh
. scripts/lib-sentinel.sh

topology="${SB_TOPOLOGY:-plain}"
# The tests a tls-pooler or managed run picks when given no arguments: a regex on test names
# (see named below). Add a name, or a word every such test's name has, to run more.
case "$topology" in
  plain) topology_tests='' ;;
  tls-pooler) topology_tests='multi_pod|kill|topology|restart|realtime|tls' ;;
  managed) topology_tests='multi_pod|kill|topology|restart|realtime|tls|cluster|failover' ;;
  sentinel) topology_tests='multi_pod|kill|topology|restart|realtime|tls|sentinel|failover' ;;
  *)
    echo "SB_TOPOLOGY must be plain, tls-pooler, managed or sentinel, not '$topology'" >&2
    exit 2
    ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-test.XXXXXX")
chmod 755 "$work"
# Distinct ports: Postgres, Redis (plain, tls-pooler) or the cluster's six nodes and their six
# cluster bus ports (managed) or two nodes and three sentinels (sentinel), PgBouncer.
case "$topology" in
  plain) mapfile -t ports < <(sb_free_ports 2) ;;
  tls-pooler) mapfile -t ports < <(sb_free_ports 3) ;;
  managed) mapfile -t ports < <(sb_free_ports 14) ;;
  sentinel) mapfile -t ports < <(sb_free_ports 7) ;;
esac
pg_port=${ports[0]}
redis_port=""
pgbouncer_port=""
cluster_nodes=()
case "$topology" in
  plain) redis_port=${ports[1]} ;;
  tls-pooler) redis_port=${ports[1]} pgbouncer_port=${ports[2]} ;;
  managed)
    pgbouncer_port=${ports[1]}
    for i in 2 3 4 5 6 7; do
      cluster_nodes+=("${ports[$i]}:${ports[$((i + 6))]}")
    done
    ;;
  sentinel) pgbouncer_port=${ports[1]} ;;
esac

cleanup() {
  case "$topology" in
    plain)
      sb_stop_postgres "$work/pg"
      redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
      ;;
    *)
      # PgBouncer first, so it does not try to reconnect to a Postgres on its way down.
      sb_stop_pgbouncer "$work/pgbouncer.pid"
      sb_stop_postgres "$work/pg"
      if [ "$topology" = tls-pooler ]; then
        sb_stop_redis_tls "$redis_port" "$work/tls/ca.pem" "$work/redis.pid"
      elif [ "$topology" = sentinel ]; then
        sb_redis_sentinel_stop "$work/redis-sentinel"
      else
        # By pidfile: nodes that tests killed and restarted included.
        sb_redis_cluster_stop "$work/redis-cluster"
      fi
      ;;
  esac
  rm -rf "$work"
}
trap cleanup EXIT
# Interrupted (Ctrl-C, a CI timeout, a closed pipe): still stop the servers.
trap 'exit 130' INT TERM HUP PIPE

sb_need_redis
if [ "$topology" = plain ]; then
  echo "test services: postgres 127.0.0.1:$pg_port, redis 127.0.0.1:$redis_port ($work)"
  sb_start_postgres "$work/pg" "$pg_port" "$work/pg.log"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize yes --dir "$work" --logfile "$work/redis.log" --pidfile "$work/redis.pid"
  sb_write_pg_restart "$work/pg-restart" "$work/pg" "$pg_port" "$work/pg.log"

  export SB_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
  export SB_TEST_DATABASE_DIRECT_URL="$SB_TEST_DATABASE_URL"
  export SB_TEST_REDIS_URL="redis://127.0.0.1:$redis_port"
  # Left over from a tls-pooler or managed run by hand, these would make tests expect TLS, a
  # pooler or a cluster.
  unset SB_TEST_DATABASE_POOLER SB_TEST_TLS_CA SB_TEST_TLS_OTHER_CA \
    SB_TEST_REDIS_CLUSTER_NODES SB_TEST_REDIS_CLUSTER_CTL \
    SB_TEST_REDIS_SENTINELS SB_TEST_REDIS_SENTINEL_MASTER SB_TEST_REDIS_SENTINEL_CTL
else
  if [ "$topology" = tls-pooler ]; then
    redis_desc="redis 127.0.0.1:$redis_port (TLS only)"
  elif [ "$topology" = sentinel ]; then
    redis_desc="redis 127.0.0.1:${ports[2]} and replica ${ports[3]}, sentinels ${ports[4]},${ports[5]},${ports[6]} (TLS only)"
  else
    redis_desc="redis cluster 127.0.0.1:{$(printf '%s\n' "${cluster_nodes[@]%%:*}" | paste -sd,)} (TLS only)"
  fi
  echo "test services ($topology): postgres 127.0.0.1:$pg_port (TLS)," \
    "pgbouncer 127.0.0.1:$pgbouncer_port (TLS, transaction pooling), $redis_desc ($work)"
  sb_make_tls "$work/tls"
  pg_opts="${SB_PG_OPTS:-} $(sb_pg_tls_opts "$work/tls")"
  SB_PG_OPTS=$pg_opts sb_start_postgres "$work/pg" "$pg_port" "$work/pg.log"
  SB_PG_OPTS=$pg_opts sb_write_pg_restart "$work/pg-restart" "$work/pg" "$pg_port" "$work/pg.log"
  sb_start_pgbouncer "$work" "$pgbouncer_port" "$pg_port" "$work/tls"

  tls_query="sslmode=verify-full&sslrootcert=$work/tls/ca.pem"
  export SB_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pgbouncer_port/postgres?$tls_query"
  export SB_TEST_DATABASE_DIRECT_URL="postgres://postgres@127.0.0.1:$pg_port/postgres?$tls_query"
  export SB_TEST_DATABASE_POOLER=transaction
  export SB_TEST_TLS_CA="$work/tls/ca.pem"
  export SB_TEST_TLS_OTHER_CA="$work/tls/other-ca.pem"
  if [ "$topology" = tls-pooler ]; then
    sb_start_redis_tls "$work" "$redis_port" "$work/tls"
    export SB_TEST_REDIS_URL="rediss://127.0.0.1:$redis_port"
    unset SB_TEST_REDIS_CLUSTER_NODES SB_TEST_REDIS_CLUSTER_CTL \
      SB_TEST_REDIS_SENTINELS SB_TEST_REDIS_SENTINEL_MASTER SB_TEST_REDIS_SENTINEL_CTL
  elif [ "$topology" = sentinel ]; then
    sb_rs_configure "$work/redis-sentinel" "$work/tls" "${ports[@]:2:5}"
    sb_redis_sentinel_start "$work/redis-sentinel"
    sb_write_redis_sentinel_ctl "$work/redis-sentinel-ctl" "$work/redis-sentinel"
    export SB_TEST_REDIS_SENTINELS="rediss://127.0.0.1:${ports[4]},rediss://127.0.0.1:${ports[5]},rediss://127.0.0.1:${ports[6]}"
    export SB_TEST_REDIS_SENTINEL_MASTER="$SB_SENTINEL_MASTER"
    export SB_TEST_REDIS_URL="rediss://127.0.0.1:${ports[2]}"
    export SB_TEST_REDIS_SENTINEL_CTL="$work/redis-sentinel-ctl"
    unset SB_TEST_REDIS_CLUSTER_NODES SB_TEST_REDIS_CLUSTER_CTL
    echo "test redis sentinel: master ${ports[2]}; control: $SB_TEST_REDIS_SENTINEL_CTL"
  else
    sb_redis_cluster_configure "$work/redis-cluster" "$work/tls" "${cluster_nodes[@]}"
    sb_redis_cluster_start "$work/redis-cluster"
    sb_write_redis_cluster_ctl "$work/redis-cluster-ctl" "$work/redis-cluster"
    mapfile -t masters < <(sb_redis_cluster_masters "$work/redis-cluster")
    [ "${#masters[@]}" = 3 ] || {
      echo "the test Redis Cluster has ${#masters[@]} masters, not 3" >&2
      exit 1
    }
    export SB_TEST_REDIS_CLUSTER_NODES="rediss://127.0.0.1:${masters[0]},rediss://127.0.0.1:${masters[1]},rediss://127.0.0.1:${masters[2]}"
    export SB_TEST_REDIS_URL="rediss://127.0.0.1:${masters[0]}"
    export SB_TEST_REDIS_CLUSTER_CTL="$work/redis-cluster-ctl"
    unset SB_TEST_REDIS_SENTINELS SB_TEST_REDIS_SENTINEL_MASTER SB_TEST_REDIS_SENTINEL_CTL
    echo "test redis cluster: masters ${masters[*]}; control: $SB_TEST_REDIS_CLUSTER_CTL"
  fi
fi
# For tests that take Postgres away under running pods.
export SB_TEST_PG_DATADIR="$work/pg"
SB_TEST_PG_BINDIR=$(sb_pg_bindir)
export SB_TEST_PG_BINDIR
export SB_TEST_PG_RESTART="$work/pg-restart"

# Most tests wait (on their pods, Postgres, Redis, a fake's delay) far more than they
# compute: one test per core left two cores about half idle, two per core keep them busy
# (the plain run went from 155 s to about 80 s on 2 cores). Never fewer than nextest's own
# default of one per core, and no more than 8 from this rule (each test holds a few pods'
# worth of Postgres connections). NEXTEST_TEST_THREADS set by the caller wins.
if [ -z "${NEXTEST_TEST_THREADS:-}" ]; then
  cores=$(nproc 2>/dev/null || echo 1)
  threads=$((cores * 2 > 8 ? 8 : cores * 2))
  NEXTEST_TEST_THREADS=$((threads > cores ? threads : cores))
  export NEXTEST_TEST_THREADS
fi

# A regex on test names as a nextest filterset: the tests whose names match $1. The
# integration tests (the `it` binaries) are in folders laid out like the spec, and their
# names start with the folder (`f4_realtime::`, `topology::`), which says where a test is,
# not what it needs: for them the regex is matched on what follows the folder.
named() {
  echo "((binary(it) and test(/^[^:]+::.*($1)/)) or (not binary(it) and test(/$1/)))"
}
# Without nextest (cargo test's filters are substrings, folder included): the full names of
# the tests that `named "$1"` picks, one a line.
names() {
  local it rest
  it=$(cargo test --quiet --workspace --test it -- --list --format terse) || return
  rest=$(cargo test --quiet --workspace --lib --bins -- --list --format terse) || return
  {
    sed -n 's/: test$//p' <<<"$it" | grep -E "^[^:]+::.*($1)" || true
    sed -n 's/: test$//p' <<<"$rest" | grep -E "$1" || true
  } | sort -u
}
# Without nextest: runs exactly the tests named on stdin (none when it is empty).
run_named() {
  local picked
  mapfile -t picked
  [ "${#picked[@]}" -gt 0 ] || return 0
  cargo test --no-fail-fast --workspace -- --exact "${picked[@]}"
}

# The topology test restarts the test Postgres under load: every other test's connections
# would be cut with it. It runs alone, after the others (whole runs only). It is picked from
# the whole workspace by name, not with `-p switchboard`: one package alone unifies its
# dependencies' features differently and rebuilt much of the tree (a minute) before it ran.
alone='topology'
run_alone() {
  if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast --workspace -E "$(named "$alone")"
  else
    names "$alone" | run_named
  fi
}

if [ "$topology" != plain ] && [ "$#" -eq 0 ]; then
  status=0
  if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast --workspace \
      -E "$(named "$topology_tests") and not $(named "$alone")" || status=$?
  else
    names "$topology_tests" | { grep -vxF -f <(names "$alone") || true; } | run_named || status=$?
  fi
  run_alone || status=$?
  exit "$status"
fi

# With arguments (e.g. `-p switchboard-api auth`), run just those; without, everything.
[ "$#" -gt 0 ] || set -- --workspace
cargo fmt --all -- --check
# What CI claims for the code: no clippy warning anywhere (tests included).
cargo clippy --workspace --all-targets --quiet -- -D warnings
whole=0
[ "$*" = --workspace ] && whole=1
status=0
if command -v cargo-nextest >/dev/null 2>&1; then
  if [ "$whole" = 1 ]; then
    cargo nextest run --no-fail-fast "$@" -E "not $(named "$alone")" || status=$?
  else
    cargo nextest run --no-fail-fast "$@" || status=$?
  fi
elif [ "$whole" = 1 ]; then
  mapfile -t skips < <(names "$alone" | sed 's/^/--skip\n/')
  cargo test --no-fail-fast "$@" -- --exact "${skips[@]}" || status=$?
else
  cargo test --no-fail-fast "$@" || status=$?
fi
[ "$whole" = 0 ] || run_alone || status=$?
[ "$status" = 0 ] || exit "$status"

# The expert console end to end in headless Chromium (two pods, a load balancer, the demo
# providers), on the same Postgres and Redis; whole-suite, plain-topology runs only,
# SB_SKIP_BROWSER=1 skips.
if [ "$topology" = plain ] && [ "$*" = --workspace ] && [ "${SB_SKIP_BROWSER:-0}" != 1 ]; then
  scripts/test-browser.sh
fi
