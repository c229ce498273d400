#!/usr/bin/env bash
# Stops the local stack started by scripts/dev-up.sh: HAProxy, the pods (gracefully, as a
# rolling deploy would), Redis (or, on the managed topology, the Redis Cluster and PgBouncer)
# and Postgres. Data in .dev/ is kept unless --purge is given. Only processes recorded in
# .dev/ (and beside the dev Postgres cluster) are stopped; the system's Postgres and Redis are
# not.
set -euo pipefail

# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

purge=0
for arg in "$@"; do
  case "$arg" in
  --purge) purge=1 ;;
  -h | --help)
    echo "usage: scripts/dev-down.sh [--purge]   (--purge also deletes .dev/)"
    exit 0
    ;;
  *) die "unknown argument: $arg (usage: scripts/dev-down.sh [--purge])" ;;
  esac
done

# Sends SIGTERM to the pids in FILEs (named NAME), waits up to SECS for all of them, then
# SIGKILLs whatever is left. Stale pid files are just removed.
stop_pids() {
  local name=$1 secs=$2 file pid
  shift 2
  local live=()
  for file in "$@"; do
    if pid_alive "$file" "$name"; then
      while read -r pid; do
        if [[ "$pid" =~ ^[0-9]+$ ]]; then kill -TERM "$pid" 2>/dev/null || true; fi
      done <"$file"
      live+=("$file")
    else
      rm -f "$file"
    fi
  done
  [ "${#live[@]}" -gt 0 ] || return 0
  log "Stopping $name (${live[*]##*/})"
  for _ in $(seq $((secs * 5))); do
    local left=()
    for file in "${live[@]}"; do
      pid_alive "$file" "$name" && left+=("$file")
    done
    [ "${#left[@]}" -gt 0 ] || break
    sleep 0.2
  done
  for file in "${live[@]}"; do
    if pid_alive "$file" "$name"; then
      warn "$name ${file##*/} did not stop within ${secs}s; killing it"
      kill -KILL "$(pid_of "$file")" 2>/dev/null || true
    fi
    rm -f "$file"
  done
}

if [ -f "$DEV/compose" ]; then
  # The Compose that dev-up.sh used (`docker compose` or `docker-compose`), one word a line.
  mapfile -t COMPOSE <"$DEV/compose"
  [ "${#COMPOSE[@]}" -gt 0 ] && [ "${COMPOSE[0]}" != "" ] || compose_detect || die "Compose is gone"
  compose=("${COMPOSE[@]}" -p "$COMPOSE_PROJECT" -f "$COMPOSE_FILE")
  log "${compose[*]} down"
  # The file requires the secrets to be set even to take the stack down.
  export JWT_SECRET=unused MASTER_ENCRYPTION_KEY=unused
  if [ "$purge" = 1 ]; then
    "${compose[@]}" down --volumes
  else
    "${compose[@]}" down
  fi
  rm -f "$DEV/compose"
fi

# The load balancer first, so nothing new is routed to pods that are going away.
stop_pids haproxy 10 "$DEV/haproxy.pid"
# Pods drain on SIGTERM (in-flight requests and jobs finish); 30 s is plenty in development.
pod_pidfiles=()
for pod in "${PODS[@]}"; do
  pod_pidfiles+=("$DEV/$pod.pid")
done
stop_pids switchboard 30 "${pod_pidfiles[@]}"
stop_pids switchboard 5 "$DEV/demo-providers.pid"
# SIGTERM makes Redis shut down cleanly (AOF flushed); there are no RDB save points.
stop_pids redis-server 10 "$DEV/redis.pid"
# The managed topology's Redis Cluster, every node by its pidfile (the same SIGTERM).
cluster_up=0
for file in "$REDIS_CLUSTER_DIR"/*/redis.pid; do
  if pid_alive "$file" redis-server; then cluster_up=1; fi
done
if [ "$cluster_up" = 1 ]; then
  log "Stopping the Redis Cluster"
  "$ROOT/scripts/redis-cluster-ctl" "$REDIS_CLUSTER_DIR" stop
fi
# The sentinel topology's set, every process by its pidfile.
sentinel_up=0
for file in "$REDIS_SENTINEL_DIR"/*/redis.pid; do
  if pid_alive "$file" redis-server; then sentinel_up=1; fi
done
if [ "$sentinel_up" = 1 ]; then
  log "Stopping the Redis Sentinel set"
  "$ROOT/scripts/redis-sentinel-ctl" "$REDIS_SENTINEL_DIR" stop
fi
# PgBouncer before Postgres, so it does not try to reconnect to a Postgres on its way down.
stop_pids pgbouncer 10 "$PGBOUNCER_DIR/pgbouncer.pid"

if [ -s "$PG_HOME/pg/PG_VERSION" ]; then
  if PG_BIN="$(pg_bindir)"; then
    PG_USER="$(pg_user)"
    if as_pg "$PG_BIN/pg_ctl" -D "$PG_HOME/pg" status >/dev/null 2>&1; then
      log "Stopping Postgres"
      as_pg "$PG_BIN/pg_ctl" -D "$PG_HOME/pg" stop -m fast -w -t 60 >/dev/null
    fi
  else
    warn "pg_ctl not found; cannot stop Postgres in $PG_HOME/pg"
  fi
fi

# Nothing runs now: the next dev-up may pick any topology.
rm -f "$DEV/topology"

if [ "$purge" = 1 ]; then
  if [ "$PG_HOME" != "$DEV" ] && [ -d "$PG_HOME" ]; then
    log "Deleting $PG_HOME (this checkout's Postgres cluster)"
    rm -rf "$PG_HOME"
  fi
  log "Deleting .dev/"
  rm -rf "$DEV"
fi
log "Stack is down"
