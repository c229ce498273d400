# shellcheck shell=bash
# Helpers shared by the scripts that run their own PostgreSQL and Redis: find (or install)
# the server binaries, pick free ports, and run Postgres as a non-root user when needed.

# Installs Debian packages when a command is missing (root or sudo).
sb_apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: $*" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

# Prints the directory holding initdb/pg_ctl/postgres, installing PostgreSQL if needed.
sb_pg_bindir() {
  local dir
  if command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    # An explicit 0: a bare return in an EXIT trap returns the status the script is exiting
    # with, and the cleanup (under set -e) would stop before stopping Postgres.
    return 0
  fi
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
    sb_apt_install postgresql >/dev/null
    dir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  echo "$dir"
}

# Makes sure redis-server and redis-cli exist.
sb_need_redis() {
  command -v redis-server >/dev/null 2>&1 || sb_apt_install redis-server >/dev/null
  # The package starts a system instance on 6379; our scripts never use it.
}

# Prints a TCP port on 127.0.0.1 that nothing listens on.
sb_free_port() {
  local port
  while :; do
    # Below Linux's ephemeral range (32768 and up): a port from that range can become the
    # local end of an outgoing connection between being picked and being bound.
    port=$(( (RANDOM % 22000) + 10000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
}

# Runs a command as the Postgres user: initdb and postgres refuse to run as root.
sb_as_pg_user() {
  if [ "$(id -u)" -eq 0 ]; then
    id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# sb_pg_opts DATADIR PORT: the server options sb_start_postgres starts the cluster with
# (SB_PG_OPTS included), for a restart with the same ones.
sb_pg_opts() {
  echo "-p $2 -k $1 -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off ${SB_PG_OPTS:-}"
}

# sb_start_postgres DATADIR PORT LOGFILE: initialises (once) and starts a throwaway cluster.
# SB_PG_OPTS adds server options, e.g. "-c shared_preload_libraries=pg_stat_statements" to
# see which statements a benchmark runs.
sb_start_postgres() {
  local datadir=$1 port=$2 log=$3 bindir
  bindir=$(sb_pg_bindir)
  mkdir -p "$datadir"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$datadir" "$(dirname "$log")" 2>/dev/null
  if [ ! -f "$datadir/PG_VERSION" ]; then
    sb_as_pg_user "$bindir/initdb" -D "$datadir" -A trust -U postgres --no-sync >/dev/null
  fi
  sb_as_pg_user "$bindir/pg_ctl" -D "$datadir" -l "$log" -w -t 60 \
    -o "$(sb_pg_opts "$datadir" "$port")" start >/dev/null
}

# sb_stop_postgres DATADIR
sb_stop_postgres() {
  local bindir
  bindir=$(sb_pg_bindir)
  sb_as_pg_user "$bindir/pg_ctl" -D "$1" -m immediate -w stop >/dev/null 2>&1 || true
}
