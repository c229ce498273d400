#!/usr/bin/env bash
# Runs the whole test suite against a PostgreSQL and a Redis of its own, started on free
# ports in a temporary folder and removed afterwards, so a developer's data is never touched.
# Usage: scripts/test.sh [extra args for cargo nextest run / cargo test]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh

work=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-test.XXXXXX")
chmod 755 "$work"
pg_port=$(sb_free_port)
redis_port=$(sb_free_port)

cleanup() {
  sb_stop_postgres "$work/pg"
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# Interrupted (Ctrl-C, a CI timeout, a closed pipe): still stop the servers.
trap 'exit 130' INT TERM HUP PIPE

sb_need_redis
echo "test services: postgres 127.0.0.1:$pg_port, redis 127.0.0.1:$redis_port ($work)"
sb_start_postgres "$work/pg" "$pg_port" "$work/pg.log"
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --daemonize yes --dir "$work" --logfile "$work/redis.log" --pidfile "$work/redis.pid"

export SB_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
export SB_TEST_REDIS_URL="redis://127.0.0.1:$redis_port"

# With arguments (e.g. `-p switchboard-api auth`), run just those; without, everything.
[ "$#" -gt 0 ] || set -- --workspace
cargo fmt --all -- --check
# What CI claims for the code: no clippy warning anywhere (tests included).
cargo clippy --workspace --all-targets --quiet -- -D warnings
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --no-fail-fast "$@"
else
  cargo test --no-fail-fast "$@"
fi

# The expert console end to end in headless Chromium (two pods, a load balancer, the demo
# providers), on the same Postgres and Redis; whole-suite runs only, SB_SKIP_BROWSER=1 skips.
if [ "$*" = --workspace ] && [ "${SB_SKIP_BROWSER:-0}" != 1 ]; then
  scripts/test-browser.sh
fi
