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
#                    care about the topology (see tls_pooler_tests below); fmt, clippy and
#                    the browser tests stay with the plain run. With arguments, like plain
#                    (fmt, clippy, the tests asked for) but never the browser tests.
#                    Installs pgbouncer when it is missing.
# Both export SB_TEST_DATABASE_URL (what pods use), SB_TEST_DATABASE_DIRECT_URL (Postgres
# itself, for what a pooler cannot do), SB_TEST_REDIS_URL, SB_TEST_PG_DATADIR,
# SB_TEST_PG_BINDIR and SB_TEST_PG_RESTART (a script that restarts the test Postgres);
# tls-pooler adds SB_TEST_DATABASE_POOLER=transaction, SB_TEST_TLS_CA (the CA that signed the
# servers' certificate) and SB_TEST_TLS_OTHER_CA (an unrelated CA, which must be refused).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh
# shellcheck source=scripts/lib-topology.sh
. scripts/lib-topology.sh

topology="${SB_TOPOLOGY:-plain}"
case "$topology" in
  plain | tls-pooler) ;;
  *)
    echo "SB_TOPOLOGY must be plain or tls-pooler, not '$topology'" >&2
    exit 2
    ;;
esac

# The tests a tls-pooler run picks when given no arguments: a regex on test names, used as
# the nextest filterset test(/…/) (and split at | into cargo test filters without nextest).
# Add a name, or a word every such test's name has, to run more.
tls_pooler_tests='multi_pod|kill|topology|restart|realtime|tls'

work=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-test.XXXXXX")
chmod 755 "$work"
pg_port=$(sb_free_port)
redis_port=$(sb_free_port)
pgbouncer_port=""
[ "$topology" = plain ] || pgbouncer_port=$(sb_free_port)

cleanup() {
  if [ "$topology" = plain ]; then
    sb_stop_postgres "$work/pg"
    redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  else
    # PgBouncer first, so it does not try to reconnect to a Postgres on its way down.
    sb_stop_pgbouncer "$work/pgbouncer.pid"
    sb_stop_postgres "$work/pg"
    sb_stop_redis_tls "$redis_port" "$work/tls/ca.pem" "$work/redis.pid"
  fi
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
  # Left over from a tls-pooler run by hand, these would make tests expect TLS or a pooler.
  unset SB_TEST_DATABASE_POOLER SB_TEST_TLS_CA SB_TEST_TLS_OTHER_CA
else
  echo "test services (tls-pooler): postgres 127.0.0.1:$pg_port (TLS)," \
    "pgbouncer 127.0.0.1:$pgbouncer_port (TLS, transaction pooling)," \
    "redis 127.0.0.1:$redis_port (TLS only) ($work)"
  sb_make_tls "$work/tls"
  pg_opts="${SB_PG_OPTS:-} $(sb_pg_tls_opts "$work/tls")"
  SB_PG_OPTS=$pg_opts sb_start_postgres "$work/pg" "$pg_port" "$work/pg.log"
  SB_PG_OPTS=$pg_opts sb_write_pg_restart "$work/pg-restart" "$work/pg" "$pg_port" "$work/pg.log"
  sb_start_pgbouncer "$work" "$pgbouncer_port" "$pg_port" "$work/tls"
  sb_start_redis_tls "$work" "$redis_port" "$work/tls"

  tls_query="sslmode=verify-full&sslrootcert=$work/tls/ca.pem"
  export SB_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pgbouncer_port/postgres?$tls_query"
  export SB_TEST_DATABASE_DIRECT_URL="postgres://postgres@127.0.0.1:$pg_port/postgres?$tls_query"
  export SB_TEST_DATABASE_POOLER=transaction
  export SB_TEST_TLS_CA="$work/tls/ca.pem"
  export SB_TEST_TLS_OTHER_CA="$work/tls/other-ca.pem"
  export SB_TEST_REDIS_URL="rediss://127.0.0.1:$redis_port"
fi
# For tests that take Postgres away under running pods.
export SB_TEST_PG_DATADIR="$work/pg"
SB_TEST_PG_BINDIR=$(sb_pg_bindir)
export SB_TEST_PG_BINDIR
export SB_TEST_PG_RESTART="$work/pg-restart"

# The topology test restarts the test Postgres under load: every other test's connections
# would be cut with it. It runs alone, after the others (whole runs only).
alone='topology'
run_alone() {
  if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast -p switchboard -E "test(/$alone/)"
  else
    cargo test --no-fail-fast -p switchboard --test it -- "$alone"
  fi
}

if [ "$topology" = tls-pooler ] && [ "$#" -eq 0 ]; then
  status=0
  if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast --workspace \
      -E "test(/$tls_pooler_tests/) and not test(/$alone/)" || status=$?
  else
    IFS='|' read -r -a filters <<<"$tls_pooler_tests"
    cargo test --no-fail-fast --workspace -- "${filters[@]}" --skip "$alone" || status=$?
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
    cargo nextest run --no-fail-fast "$@" -E "not test(/$alone/)" || status=$?
  else
    cargo nextest run --no-fail-fast "$@" || status=$?
  fi
elif [ "$whole" = 1 ]; then
  cargo test --no-fail-fast "$@" -- --skip "$alone" || status=$?
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
