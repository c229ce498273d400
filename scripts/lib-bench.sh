# shellcheck shell=bash
# Shared by the benchmarks that run the Node peer (sourced after dev-lib.sh, not run): the
# tools they need, the load generator, and the peer's copy with its database.

# Installs what is missing, only that: a Node.js that did not come from Debian (NodeSource,
# nvm) must not meet Debian's nodejs/npm packages.
bench_tools() {
  local missing=() sudo=""
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  command -v pidstat >/dev/null || missing+=(sysstat)
  command -v python3 >/dev/null || missing+=(python3)
  command -v haproxy >/dev/null || missing+=(haproxy)
  [ "${#missing[@]}" -gt 0 ] || return 0
  log "Installing ${missing[*]}"
  is_root || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Builds sb-loadgen ($1) unless SB_SKIP_BUILD=1 and it exists.
bench_loadgen() {
  if [ "${SB_SKIP_BUILD:-0}" != 1 ] || [ ! -x "$1" ]; then
    log "Building sb-loadgen"
    cargo build --release -q -p switchboard-loadgen
  fi
}

psql_dev() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "${2:-switchboard}" -Atc "$1"; }

# The peer's copy in $2 (from $1, with its npm packages) and its database `node_baseline` on
# the dev stack's Postgres.
bench_node_baseline() {
  local src=$1 dir=$2
  if [ ! -d "$dir/node_modules/pg" ] || [ ! -f "$dir/worker.js" ]; then
    rm -rf "$dir"
    cp -r "$src" "$dir"
    chmod -R u+w "$dir"
    (cd "$dir" && npm install --silent --no-audit --no-fund >/dev/null)
  fi
  psql_dev "SELECT 1 FROM pg_database WHERE datname = 'node_baseline'" postgres | grep -q 1 ||
    psql_dev "CREATE DATABASE node_baseline" postgres >/dev/null
}
