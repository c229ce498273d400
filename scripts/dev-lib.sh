# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts sourcing this
# Shared by dev-up.sh and dev-down.sh (sourced, not run): paths, ports and the helpers both
# need to find, run and stop the local stack. Everything lives under .dev/ in the checkout.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEV="$ROOT/.dev"
COMPOSE_FILE="$ROOT/docker-compose.multi-pod.yml"
BIN="$ROOT/target/release/switchboard"

# Ports are overridable so the stack never collides with the system Postgres (5432) or
# Redis (6379), or with a second checkout.
PG_PORT="${SB_PG_PORT:-55432}"
REDIS_PORT="${SB_REDIS_PORT:-56379}"
LB_PORT="${SB_LB_PORT:-8080}"
PODS=(pod-1 pod-2)
POD_PORTS=("${SB_POD1_PORT:-3001}" "${SB_POD2_PORT:-3002}")

log() { printf '==> %s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "${0##*/}" "$*" >&2; }
die() {
  printf '%s: %s\n' "${0##*/}" "$*" >&2
  exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

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
# already owns .dev/pg, else `postgres` (created by the Debian package), else our own.
pg_user() {
  if ! is_root; then
    id -un
  elif [ -d "$DEV/pg" ] && [ "$(stat -c %u "$DEV/pg")" != 0 ]; then
    stat -c %U "$DEV/pg"
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

# True if a docker engine answers (not just a docker CLI on PATH).
docker_engine() {
  command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1
}
