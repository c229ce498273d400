# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts sourcing this
# Shared by dev-up.sh and dev-down.sh (sourced, not run): paths, ports and the helpers both
# need to find, run and stop the local stack. Its state lives under .dev/ in the checkout,
# but for Postgres' cluster when run as root (see PG_HOME).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEV="$ROOT/.dev"
COMPOSE_FILE="$ROOT/docker-compose.multi-pod.yml"
COMPOSE_PROJECT=switchboard-multi
# SB_BIN runs another build (benchmarks alternate a baseline binary with the current one).
BIN="${SB_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/switchboard}"

# Ports are overridable so the stack never collides with the system Postgres (5432) or
# Redis (6379), or with a second checkout.
PG_PORT="${SB_PG_PORT:-55432}"
REDIS_PORT="${SB_REDIS_PORT:-56379}"
LB_PORT="${SB_LB_PORT:-8080}"
PODS=(pod-1 pod-2)
POD_PORTS=("${SB_POD1_PORT:-3001}" "${SB_POD2_PORT:-3002}")
# The managed topology (SB_TOPOLOGY=managed): PgBouncer in front of Postgres, and a Redis
# Cluster of six nodes on REDIS_CLUSTER_PORT..+5, their cluster bus on REDIS_CLUSTER_PORT+100..+105
# (Redis' own choice, port+10000, is past 65535 for these ports).
PGBOUNCER_PORT="${SB_PGBOUNCER_PORT:-56432}"
REDIS_CLUSTER_PORT="${SB_REDIS_CLUSTER_PORT:-57001}"
REDIS_CLUSTER_DIR="$DEV/redis-cluster"
# The sentinel topology (SB_TOPOLOGY=sentinel): a master and a replica on
# REDIS_SENTINEL_PORT and +1, three sentinels on +10..+12 (scripts/lib-sentinel.sh).
REDIS_SENTINEL_PORT="${SB_REDIS_SENTINEL_PORT:-57201}"
REDIS_SENTINEL_DIR="$DEV/redis-sentinel"

# Stops the native pods (SIGTERM, as a rolling deploy would) and starts them again through
# dev-up, with VAR=value settings on top of .dev/env (benchmarks vary them per run).
restart_pods() {
  local file pid
  for file in "$DEV"/pod-*.pid; do
    [ -f "$file" ] || continue
    pid=$(pid_of "$file")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    rm -f "$file"
  done
  env "$@" "$ROOT/scripts/dev-up.sh" >/dev/null
}

log() { printf '==> %s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "${0##*/}" "$*" >&2; }
die() {
  printf '%s: %s\n' "${0##*/}" "$*" >&2
  exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# Where Postgres' cluster (pg/) and socket (pg-run/) live. As root, Postgres runs as another
# user, which must be able to enter every directory above them, and a checkout often sits
# where it cannot (root's home is 0700 on Debian). So as root they live outside the
# checkout, in /var/lib/switchboard-dev/<hash of the checkout's path> (SB_PG_HOME moves the
# parent), unless .dev/pg already holds a cluster from before. Otherwise in .dev/.
pg_home() {
  if ! is_root || [ -s "$DEV/pg/PG_VERSION" ]; then
    printf '%s\n' "$DEV"
  else
    printf '%s/%s\n' "${SB_PG_HOME:-/var/lib/switchboard-dev}" \
      "$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
  fi
}

# The directory holding initdb, pg_ctl and postgres: PATH first (resolving symlinks such as
# /usr/local/bin/pg_ctl so pg_ctl finds its own postgres), then the newest Debian/Ubuntu
# /usr/lib/postgresql/*/bin. Prints nothing and fails if there is none.
pg_bindir() {
  local initdb dir
  if initdb="$(command -v initdb)"; then
    dir="$(dirname "$(readlink -f "$initdb")")"
    if [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
      printf '%s\n' "$dir"
      return 0
    fi
  fi
  dir="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
    printf '%s\n' "$dir"
    return 0
  fi
  return 1
}

# Postgres refuses to run as root, so as root the cluster belongs to a system user: whoever
# already owns it, else `postgres` (created by the Debian package), else our own.
pg_user() {
  if ! is_root; then
    id -un
  elif [ -d "$PG_HOME/pg" ] && [ "$(stat -c %u "$PG_HOME/pg")" != 0 ]; then
    stat -c %U "$PG_HOME/pg"
  elif id postgres >/dev/null 2>&1; then
    echo postgres
  else
    echo switchboard-dev
  fi
}

# Runs a command as the cluster's user (a no-op switch when we are not root).
as_pg() {
  if ! is_root; then
    "$@"
  elif command -v runuser >/dev/null 2>&1; then
    runuser -u "$PG_USER" -- "$@"
  else
    # After `--`, su hands the words to the shell as $0, $1, ... (without it, su would
    # parse the command's own options, such as pg_ctl -D, as its own).
    # shellcheck disable=SC2016
    su -s /bin/sh "$PG_USER" -c 'exec "$@"' -- sh "$@"
  fi
}

# True if the pid in FILE is a live (non-zombie) process whose name is NAME. Checking the
# name guards against a stale pid file whose number now belongs to something else.
pid_alive() {
  local file=$1 name=$2 pid state
  [ -s "$file" ] || return 1
  pid="$(head -n 1 "$file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  [ -r "/proc/$pid/stat" ] || return 0
  # Killed children linger as zombies until reaped, and PID 1 here may not reap them.
  state="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null || true)"
  [ "$state" != Z ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]
}

# The pid from FILE (first line).
pid_of() { head -n 1 "$1"; }

PG_HOME="$(pg_home)"
# The managed topology's certificates (a CA of its own, as in scripts/test.sh) and PgBouncer's
# config, log and pidfile: beside the cluster, where the Postgres user, which runs PgBouncer
# too, can reach them.
TLS_DIR="$PG_HOME/tls"
PGBOUNCER_DIR="$PG_HOME/pgbouncer"

# The topology the stack was last brought up with (dev-up.sh writes it, dev-down.sh removes
# it): plain when none is recorded.
recorded_topology() {
  local topology
  topology="$(cat "$DEV/topology" 2>/dev/null || true)"
  printf '%s\n' "${topology:-plain}"
}

# True if a docker engine answers (not just a docker CLI on PATH).
docker_engine() {
  command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1
}

# Sets COMPOSE to the Compose that works here: the v2 plugin (`docker compose`), else the
# standalone `docker-compose` (v1, e.g. Debian's 1.29). Fails when there is neither: a
# docker CLI without the plugin answers `docker compose -f` with "unknown shorthand flag".
compose_detect() {
  COMPOSE=()
  if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  elif command -v docker-compose >/dev/null 2>&1 && docker-compose version >/dev/null 2>&1; then
    COMPOSE=(docker-compose)
  else
    return 1
  fi
}

# Prints `a.b.c=value` for each string leaf of pretty-printed JSON on stdin (the shape
# `switchboard admin seed-demo` prints: two-space indents, one key per line, string values
# without escapes), so the scripts need neither Python nor jq to read it.
json_leaves() {
  local line key value path=()
  while IFS= read -r line; do
    line="${line#"${line%%[![:space:]]*}"}"
    case "$line" in
    \"*\":\ \{)
      key="${line#\"}"
      path+=("${key%%\"*}")
      ;;
    \} | \},)
      [ "${#path[@]}" -eq 0 ] || unset 'path[${#path[@]}-1]'
      ;;
    \"*\":\ \"*)
      key="${line#\"}"
      key="${key%%\"*}"
      value="${line#*\": \"}"
      value="${value%,}"
      value="${value%\"}"
      if [ "${#path[@]}" -gt 0 ]; then
        printf '%s.%s=%s\n' "$(IFS=.; echo "${path[*]}")" "$key" "$value"
      else
        printf '%s=%s\n' "$key" "$value"
      fi
      ;;
    esac
  done
}
