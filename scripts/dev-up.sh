#!/usr/bin/env bash
# Brings up the local active-active stack (SPEC §7): Postgres, Redis, two Switchboard pods
# and HAProxy round-robin in front of them with no stickiness, then seeds a demo org
# (`switchboard admin seed-demo`) and prints how to reach it all.
#
# With a running Docker engine and Compose (`docker compose` or `docker-compose`) this is
# docker-compose.multi-pod.yml; otherwise the same stack runs natively, its state under
# .dev/ (as root, Postgres' cluster lives outside the checkout, see pg_home in dev-lib.sh,
# so a checkout in a 0700 home works). The system's own Postgres and Redis are never
# touched. Re-running only starts what is down. Stop with scripts/dev-down.sh.
#
# SB_TOPOLOGY=managed brings the stack up (natively, never with Docker) the way managed
# services would serve it: Postgres with TLS behind PgBouncer in transaction pooling mode, and
# instead of the one Redis a TLS-only Redis Cluster of three masters with a replica each, all
# with certificates from a CA of its own (kept in $PG_HOME/tls); the pods get DATABASE_URL
# through PgBouncer (sslmode=verify-full), DATABASE_DIRECT_URL, DATABASE_POOLER=transaction,
# DATABASE_TLS_CA, REDIS_URL (the first master), REDIS_CLUSTER_NODES (the masters),
# REDIS_TLS=verify and REDIS_TLS_CA. scripts/redis-cluster-ctl .dev/redis-cluster kill-master
# fails a master over (see that script). SB_TOPOLOGY=sentinel is managed's Postgres with,
# instead of the cluster, a TLS-only Redis master and replica watched by three TLS-only
# sentinels: the pods get REDIS_SENTINELS, REDIS_SENTINEL_MASTER (switchboard), REDIS_URL
# (the master when they started), REDIS_TLS=verify and REDIS_TLS_CA;
# scripts/redis-sentinel-ctl .dev/redis-sentinel failover fails it over. Without SB_TOPOLOGY, a stack that is up keeps its
# topology and a new one is plain; a stack that is up on another topology must be taken down
# first.
#
# Environment: SB_PG_PORT (55432), SB_REDIS_PORT (56379), SB_LB_PORT (8080),
# SB_POD1_PORT (3001), SB_POD2_PORT (3002); managed only: SB_PGBOUNCER_PORT (56432),
# SB_REDIS_CLUSTER_PORT (57001: the six nodes on 57001-57006, their cluster bus on
# 57101-57106); sentinel only: SB_PGBOUNCER_PORT, SB_REDIS_SENTINEL_PORT (57201: the nodes on
# 57201-57202, the sentinels on 57211-57213); SB_NATIVE=1 skips Docker even when an engine runs; SB_SKIP_BUILD=1 reuses the
# built switchboard binary as it is.
set -euo pipefail

# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
# shellcheck source=scripts/lib-services.sh
. "$ROOT/scripts/lib-services.sh"
# shellcheck source=scripts/lib-topology.sh
. "$ROOT/scripts/lib-topology.sh"
# shellcheck source=scripts/lib-sentinel.sh
. "$ROOT/scripts/lib-sentinel.sh"
cd "$ROOT"

SEED="$DEV/seed.json"
LB_URL="http://127.0.0.1:$LB_PORT"
PUBLIC_URL="http://localhost:$LB_PORT"

mkdir -p "$DEV"
if [ "$PG_HOME" = "$DEV" ] && is_root; then
  chmod 755 "$DEV" # a cluster from before lives in .dev/pg: its user must reach it
else
  chmod 700 "$DEV" # env and seed.json hold secrets
fi

# --- topology ------------------------------------------------------------------------------

# True if any part of the stack runs (native or compose).
stack_up() {
  local file
  [ ! -f "$DEV/compose" ] || return 0
  for file in "$DEV"/pod-*.pid "$DEV/demo-providers.pid"; do
    pid_alive "$file" switchboard && return 0
  done
  for file in "$DEV/redis.pid" "$REDIS_CLUSTER_DIR"/*/redis.pid "$REDIS_SENTINEL_DIR"/*/redis.pid; do
    pid_alive "$file" redis-server && return 0
  done
  pid_alive "$DEV/haproxy.pid" haproxy || pid_alive "$PGBOUNCER_DIR/pgbouncer.pid" pgbouncer ||
    pid_alive "$PG_HOME/pg/postmaster.pid" postgres
}

TOPOLOGY="${SB_TOPOLOGY:-}"
case "$TOPOLOGY" in
"" | plain | managed | sentinel) ;;
*) die "SB_TOPOLOGY must be plain, managed or sentinel, not '$TOPOLOGY'" ;;
esac
# managed and sentinel: Postgres with TLS behind PgBouncer, a TLS-only Redis shape.
tls_topology() { [ "$TOPOLOGY" = managed ] || [ "$TOPOLOGY" = sentinel ]; }
if stack_up; then
  running="$(recorded_topology)"
  [ -n "$TOPOLOGY" ] || TOPOLOGY="$running"
  [ "$TOPOLOGY" = "$running" ] ||
    die "the dev stack is up on the $running topology: take it down first (scripts/dev-down.sh), then SB_TOPOLOGY=$TOPOLOGY scripts/dev-up.sh"
fi
TOPOLOGY="${TOPOLOGY:-plain}"
printf '%s\n' "$TOPOLOGY" >"$DEV/topology"

# --- secrets and environment ------------------------------------------------------------

# NAME=VALUE for .dev/env, which shells source: single-quoted when the value holds anything
# a shell would read otherwise (the & between a URL's parameters would end the line's command).
env_line() {
  local q="'\\''"
  if [[ "$2" =~ ^[A-Za-z0-9_./:@,+=-]*$ ]]; then
    printf '%s=%s\n' "$1" "$2"
  else
    printf "%s='%s'\n" "$1" "${2//\'/$q}"
  fi
}

# Secrets are generated once and kept; the URLs are rewritten each run so changed SB_*
# ports take effect. On the managed topology the Redis settings follow once the cluster is up
# (they name its masters).
write_env() {
  local jwt="" key="" tmp db_url direct_url middle tls_query
  if [ -f "$DEV/env" ]; then
    jwt="$(sed -n 's/^JWT_SECRET=//p' "$DEV/env")"
    key="$(sed -n 's/^MASTER_ENCRYPTION_KEY=//p' "$DEV/env")"
  fi
  [ -n "$jwt" ] || jwt="$(head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  [ -n "$key" ] || key="$(head -c 32 /dev/urandom | base64 -w0)"
  if tls_topology; then
    tls_query="sslmode=verify-full&sslrootcert=$TLS_DIR/ca.pem"
    db_url="$(env_line DATABASE_URL \
      "${SB_DATABASE_URL:-postgres://postgres@127.0.0.1:$PGBOUNCER_PORT/switchboard?$tls_query}")"
    direct_url="$(env_line DATABASE_DIRECT_URL \
      "postgres://postgres@127.0.0.1:$PG_PORT/switchboard?$tls_query")"
    middle="DATABASE_POOLER=transaction
$(env_line DATABASE_TLS_CA "$TLS_DIR/ca.pem")"
  else
    db_url="DATABASE_URL=${SB_DATABASE_URL:-postgres://postgres@127.0.0.1:$PG_PORT/switchboard}"
    direct_url="DATABASE_DIRECT_URL=postgres://postgres@127.0.0.1:$PG_PORT/switchboard"
    middle="REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
  fi
  tmp="$(mktemp "$DEV/env.XXXXXX")" # mktemp creates it 0600
  cat >"$tmp" <<EOF
APP_ENV=development
JWT_SECRET=$jwt
MASTER_ENCRYPTION_KEY=$key
$db_url
$direct_url
$middle
PUBLIC_BASE_URL=$PUBLIC_URL
BIND_ADDR=127.0.0.1
TRUSTED_PROXIES=127.0.0.1
EXPECTED_PODS=2
DB_POOL_SIZE=10
EOF
  mv "$tmp" "$DEV/env"
  chmod 600 "$DEV/env"
}

# Runs a command with .dev/env exported (it overrides the caller's APP_ENV, DATABASE_URL...).
with_env() {
  (
    set -a
    # shellcheck source=/dev/null
    . "$DEV/env"
    set +a
    exec "$@"
  )
}

write_env

# --- demo data and summary (both paths) -------------------------------------------------------

# Runs `switchboard admin seed-demo` (COMMAND... runs the binary) into .dev/seed.json: it
# converges the demo org and prints the same JSON every time for the same master key.
seed_demo() {
  local tmp
  log "Seeding the demo org (switchboard admin seed-demo)"
  tmp="$(mktemp "$DEV/seed.json.XXXXXX")" # 0600: passwords and channel secrets
  "$@" admin seed-demo >"$tmp" || {
    rm -f "$tmp"
    die "seed-demo failed"
  }
  mv "$tmp" "$SEED"
}

# Prints what a newcomer needs, the same for both paths. $1 says where the pods' logs are
# ("file" for .dev/pod-N.log, else the compose command prefix).
summary() {
  local logs=$1 leaves i port channel key value
  leaves="$(json_leaves <"$SEED")"
  leaf() { printf '%s\n' "$leaves" | sed -n "s|^$1=||p"; }
  echo
  echo "Switchboard dev stack is up ($MODE)"
  printf '  load balancer  %s   (round robin, no stickiness; X-Served-By names the pod)\n' "$PUBLIC_URL"
  for i in "${!PODS[@]}"; do
    port="${POD_PORTS[$i]}"
    if [ "$logs" = file ]; then
      printf '  %-14s http://127.0.0.1:%s   (log .dev/%s.log)\n' "${PODS[$i]}" "$port" "${PODS[$i]}"
    else
      printf '  %-14s http://127.0.0.1:%s   (log: %s logs %s)\n' "${PODS[$i]}" "$port" "$logs" "${PODS[$i]}"
    fi
  done
  printf '  %-14s %s\n' "org id" "$(leaf org_id)"
  for role in admin expert; do
    printf '  %-14s %s / %s\n' "$role" "$(leaf "$role.email")" "$(leaf "$role.password")"
  done
  echo "  channels:"
  for channel in slack whatsapp telegram email; do
    printf '    %-9s %s\n' "$channel" "$(leaf "channels.$channel.webhook_url")"
    printf '%s\n' "$leaves" | sed -n "s|^channels\.$channel\.secrets\.||p" |
      while IFS='=' read -r key value; do
        printf '              %s = %s\n' "$key" "$value"
      done
  done
  if [ "$logs" = file ]; then
    echo "  env for the CLI: set -a; . .dev/env; set +a   (all of this is in .dev/seed.json)"
  else
    echo "  the CLI:        $logs run --rm --no-deps migrate admin …   (all of this is in .dev/seed.json)"
  fi
  echo "  stop with:      scripts/dev-down.sh   (--purge also deletes .dev/)"
}

wait_lb() {
  # Health checks need `rise 2` passes before a server takes traffic.
  for _ in $(seq 120); do
    curl -fsS -m 2 -o /dev/null "$LB_URL/ready" 2>/dev/null && return 0
    sleep 0.5
  done
  die "the load balancer does not answer on $LB_URL/ready"
}

# --- Docker, when an engine and Compose are there ---------------------------------------------

use_compose=0
# The compose stacks are plain: the managed topology always runs natively.
if [ "${SB_NATIVE:-0}" != 1 ] && [ "$TOPOLOGY" = plain ] && docker_engine; then
  if compose_detect; then
    use_compose=1
  else
    log "A Docker engine runs but Compose does not (neither 'docker compose' nor docker-compose): starting the native stack"
  fi
fi

if [ "$use_compose" = 1 ]; then
  MODE="docker: ${COMPOSE[*]}"
  compose=("${COMPOSE[@]}" -p "$COMPOSE_PROJECT" -f "$COMPOSE_FILE")
  # Base images: present, pulled, or (no registry answers) local stand-ins.
  scripts/docker-base-images.sh
  log "${compose[*]} up -d --build"
  # Compose takes only the secrets from .dev/env (seed-demo derives the demo's credentials
  # from the master key); its URLs point at its own services.
  JWT_SECRET="$(sed -n 's/^JWT_SECRET=//p' "$DEV/env")"
  MASTER_ENCRYPTION_KEY="$(sed -n 's/^MASTER_ENCRYPTION_KEY=//p' "$DEV/env")"
  SB_LB_PORT="$LB_PORT" SB_POD1_PORT="${POD_PORTS[0]}" SB_POD2_PORT="${POD_PORTS[1]}"
  export JWT_SECRET MASTER_ENCRYPTION_KEY SB_LB_PORT SB_POD1_PORT SB_POD2_PORT
  "${compose[@]}" up -d --build
  # Tells dev-down.sh that the stack is compose's, and which Compose started it.
  printf '%s\n' "${COMPOSE[@]}" >"$DEV/compose"
  wait_lb
  seed_demo "${compose[@]}" run --rm --no-deps -T -e APP_ENV=development -e DEMO_MODE=true migrate
  summary "${COMPOSE[*]} -p $COMPOSE_PROJECT -f ${COMPOSE_FILE##*/}"
  exit 0
fi
MODE=native

# --- packages --------------------------------------------------------------------------

missing=()
pg_bindir >/dev/null || missing+=(postgresql)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v curl >/dev/null || missing+=(curl)
if tls_topology; then
  command -v pgbouncer >/dev/null || missing+=(pgbouncer)
  command -v openssl >/dev/null || missing+=(openssl)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  log "Installing ${missing[*]}"
  sudo=()
  is_root || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi
PG_BIN="$(pg_bindir)" || die "no initdb found on PATH or in /usr/lib/postgresql/*/bin"

# --- Postgres ----------------------------------------------------------------------------

PG_USER="$(pg_user)"
PG_DATA="$PG_HOME/pg"
PG_RUN="$PG_HOME/pg-run" # unix socket and server log
if is_root && ! id "$PG_USER" >/dev/null 2>&1; then
  log "Creating system user $PG_USER to own the dev cluster (Postgres will not run as root)"
  useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
fi
socket="$PG_RUN/.s.PGSQL.$PG_PORT"
[ "${#socket}" -le 100 ] || die "socket path too long for a unix socket: $socket (move the checkout)"
if [ "$PG_HOME" != "$DEV" ]; then
  # Root-owned and searchable: only the cluster's own directories belong to its user.
  mkdir -p "$PG_HOME"
  chmod 755 "$(dirname "$PG_HOME")" "$PG_HOME"
fi
mkdir -p "$PG_RUN"
if is_root; then
  chown "$PG_USER": "$PG_RUN"
  [ ! -d "$PG_DATA" ] || chown -R "$PG_USER": "$PG_DATA"
  as_pg test -w "$PG_RUN" || die "user $PG_USER cannot reach $PG_RUN"
fi

# The managed topology's certificates: made once, for 30 days, and made again when they expire
# within a day and nothing that uses them runs (a running server would keep the old ones).
pg_tls_opts=""
if tls_topology; then
  # sb_make_tls and sb_start_pgbouncer give the key and PgBouncer to the postgres user.
  ! is_root || [ "$PG_USER" = postgres ] ||
    die "the $TOPOLOGY topology needs the dev cluster to belong to postgres, not $PG_USER (scripts/dev-down.sh --purge starts afresh)"
  if [ ! -s "$TLS_DIR/server.pem" ] || [ ! -s "$TLS_DIR/client.pem" ] ||
    ! openssl x509 -checkend 86400 -noout -in "$TLS_DIR/ca.pem" >/dev/null 2>&1; then
    if [ -s "$TLS_DIR/server.pem" ] && stack_up; then
      warn "the dev certificates in $TLS_DIR expire within a day: scripts/dev-down.sh, then dev-up again, renews them"
    else
      log "Making a CA and certificates for 127.0.0.1 in $TLS_DIR"
      rm -rf "$TLS_DIR"
      sb_make_tls "$TLS_DIR" 30
    fi
  fi
  # -o is parsed by a shell inside pg_ctl, hence the inner quotes.
  pg_tls_opts=" -c ssl=on -c 'ssl_cert_file=$TLS_DIR/server.pem' -c 'ssl_key_file=$TLS_DIR/server.key'"
fi

if [ ! -s "$PG_DATA/PG_VERSION" ]; then
  log "Initialising a Postgres cluster in $PG_DATA ($PG_BIN)"
  mkdir -p "$PG_DATA"
  chmod 700 "$PG_DATA"
  if is_root; then chown "$PG_USER": "$PG_DATA"; fi
  as_pg "$PG_BIN/initdb" -D "$PG_DATA" -A trust -U postgres -E UTF8 >"$PG_RUN/initdb.log" 2>&1 ||
    die "initdb failed; see $PG_RUN/initdb.log"
fi

if as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
  log "Postgres already running"
else
  log "Starting Postgres on 127.0.0.1:$PG_PORT${pg_tls_opts:+ (TLS)}"
  # -o is parsed by a shell inside pg_ctl, hence the inner quotes around the socket dir.
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_RUN/postgres.log" -w -t 60 \
    -o "-p $PG_PORT -h 127.0.0.1 -k '$PG_RUN'$pg_tls_opts" start >/dev/null || {
    tail -n 20 "$PG_RUN/postgres.log" >&2 || true
    die "Postgres did not start"
  }
fi

psql_bin="$PG_BIN/psql"
[ -x "$psql_bin" ] || psql_bin=psql
pg_query() {
  PGCONNECT_TIMEOUT=5 "$psql_bin" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "${2:-postgres}" \
    -X -q -t -A -v ON_ERROR_STOP=1 -c "$1"
}
if [ "$(pg_query "SELECT 1 FROM pg_database WHERE datname = 'switchboard'")" != 1 ]; then
  log "Creating database switchboard"
  pg_query "CREATE DATABASE switchboard" >/dev/null
fi

if tls_topology; then
  [ "$(pg_query "SHOW ssl")" = on ] ||
    die "Postgres on 127.0.0.1:$PG_PORT runs without TLS: scripts/dev-down.sh, then SB_TOPOLOGY=$TOPOLOGY scripts/dev-up.sh"
  if pid_alive "$PGBOUNCER_DIR/pgbouncer.pid" pgbouncer; then
    log "PgBouncer already running"
  else
    log "Starting PgBouncer on 127.0.0.1:$PGBOUNCER_PORT (transaction pooling, TLS on both sides)"
    mkdir -p "$PGBOUNCER_DIR"
    sb_start_pgbouncer "$PGBOUNCER_DIR" "$PGBOUNCER_PORT" "$PG_PORT" "$TLS_DIR" ||
      die "PgBouncer did not start (log: $PGBOUNCER_DIR/pgbouncer.log)"
  fi
fi

# --- Redis -------------------------------------------------------------------------------

# The managed topology's Redis Cluster: configured once (again when SB_REDIS_CLUSTER_PORT
# changed and it is down), created the first time it starts, and from then on each node finds
# the others from its nodes.conf. Its append-only files keep the data across dev-down/dev-up.
start_redis_cluster() {
  local i specs=() running=0 file masters seeds=""
  for i in 0 1 2 3 4 5; do
    specs+=("$((REDIS_CLUSTER_PORT + i)):$((REDIS_CLUSTER_PORT + 100 + i))")
  done
  for file in "$REDIS_CLUSTER_DIR"/*/redis.pid; do
    if pid_alive "$file" redis-server; then running=$((running + 1)); fi
  done
  if [ -f "$REDIS_CLUSTER_DIR/cluster.env" ] && ! grep -qx "SB_RC_PORTS=(${specs[*]%%:*})" "$REDIS_CLUSTER_DIR/cluster.env"; then
    [ "$running" = 0 ] ||
      die "the Redis Cluster in .dev/redis-cluster runs on other ports than SB_REDIS_CLUSTER_PORT=$REDIS_CLUSTER_PORT says: scripts/dev-down.sh first"
    log "SB_REDIS_CLUSTER_PORT changed: making a new Redis Cluster (the old one's data goes)"
    rm -rf "$REDIS_CLUSTER_DIR"
  fi
  SB_REDIS_CLUSTER_AOF=yes sb_redis_cluster_configure "$REDIS_CLUSTER_DIR" "$TLS_DIR" "${specs[@]}"
  if [ "$running" = 6 ]; then
    log "Redis Cluster already running"
  else
    log "Starting the Redis Cluster on 127.0.0.1:$REDIS_CLUSTER_PORT-$((REDIS_CLUSTER_PORT + 5)) (3 masters, 3 replicas, TLS only)"
  fi
  sb_redis_cluster_start "$REDIS_CLUSTER_DIR" ||
    die "the Redis Cluster is not ok (logs: .dev/redis-cluster/*/redis.log)"
  masters="$(sb_redis_cluster_masters "$REDIS_CLUSTER_DIR")" || die "no master of the Redis Cluster answers"
  for i in $masters; do
    seeds="${seeds:+$seeds,}rediss://127.0.0.1:$i"
  done
  REDIS_MASTERS="$(printf '%s\n' "$masters" | paste -sd ' ')"
  {
    env_line REDIS_URL "rediss://127.0.0.1:${masters%%$'\n'*}"
    env_line REDIS_CLUSTER_NODES "$seeds"
    echo "REDIS_TLS=verify"
    env_line REDIS_TLS_CA "$TLS_DIR/ca.pem"
  } >>"$DEV/env"
}

# The sentinel topology's set: a master and a replica on REDIS_SENTINEL_PORT and +1, three
# sentinels on +10..+12, configured once (again when SB_REDIS_SENTINEL_PORT changed and it is
# down); the sentinels keep what they learn (the master after a failover) in their files.
start_redis_sentinel() {
  local p=$REDIS_SENTINEL_PORT running=0 file master
  local ports=("$p" "$((p + 1))" "$((p + 10))" "$((p + 11))" "$((p + 12))")
  for file in "$REDIS_SENTINEL_DIR"/*/redis.pid; do
    if pid_alive "$file" redis-server; then running=$((running + 1)); fi
  done
  if [ -f "$REDIS_SENTINEL_DIR/sentinel.env" ] && ! grep -qx "SB_RS_NODES=(${ports[*]:0:2})" "$REDIS_SENTINEL_DIR/sentinel.env"; then
    [ "$running" = 0 ] ||
      die "the Redis Sentinel set in .dev/redis-sentinel runs on other ports than SB_REDIS_SENTINEL_PORT=$p says: scripts/dev-down.sh first"
    log "SB_REDIS_SENTINEL_PORT changed: making a new Redis Sentinel set (the old one's data goes)"
    rm -rf "$REDIS_SENTINEL_DIR"
  fi
  # Sentinel rewrites the files it is given: they are written only the first time.
  [ -f "$REDIS_SENTINEL_DIR/sentinel.env" ] ||
    sb_rs_configure "$REDIS_SENTINEL_DIR" "$TLS_DIR" "${ports[@]}"
  if [ "$running" = 5 ]; then
    log "Redis Sentinel set already running"
  else
    log "Starting Redis on 127.0.0.1:$p with a replica on $((p + 1)) and sentinels on $((p + 10))-$((p + 12)) (TLS only)"
  fi
  sb_redis_sentinel_start "$REDIS_SENTINEL_DIR" ||
    die "the Redis Sentinel set did not settle (logs: .dev/redis-sentinel/*/redis.log)"
  master="$(sb_rs_master "$REDIS_SENTINEL_DIR")" || die "no sentinel names the master"
  REDIS_MASTERS=$master
  {
    env_line REDIS_URL "rediss://127.0.0.1:$master"
    env_line REDIS_SENTINELS "rediss://127.0.0.1:$((p + 10)),rediss://127.0.0.1:$((p + 11)),rediss://127.0.0.1:$((p + 12))"
    env_line REDIS_SENTINEL_MASTER "$SB_SENTINEL_MASTER"
    echo "REDIS_TLS=verify"
    env_line REDIS_TLS_CA "$TLS_DIR/ca.pem"
  } >>"$DEV/env"
}

redis_up() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }
if [ "$TOPOLOGY" = managed ]; then
  start_redis_cluster
elif [ "$TOPOLOGY" = sentinel ]; then
  start_redis_sentinel
elif redis_up; then
  log "Redis already running"
else
  log "Starting Redis on 127.0.0.1:$REDIS_PORT"
  mkdir -p "$DEV/redis"
  # No RDB snapshots, AOF on: the same persistence the pods should expect in production.
  redis-server --daemonize yes --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$DEV/redis" \
    --save "" --appendonly yes --pidfile "$DEV/redis.pid" --logfile "$DEV/redis.log"
  for _ in $(seq 50); do
    redis_up && break
    sleep 0.2
  done
  redis_up || {
    tail -n 20 "$DEV/redis.log" >&2 || true
    die "Redis did not start"
  }
fi

# --- Switchboard ------------------------------------------------------------------------

if [ "${SB_SKIP_BUILD:-0}" = 1 ] && [ -x "$BIN" ]; then
  log "Reusing $BIN (SB_SKIP_BUILD=1)"
else
  command -v cargo >/dev/null || die "cargo is not on PATH (install the Rust toolchain)"
  log "Building ${BIN#"$ROOT/"}"
  cargo build --release --bin switchboard
fi

log "Applying migrations"
# Another build (SB_BIN: benchmarks alternate an earlier build with this one) leaves alone
# the migrations a newer build applied, as the previous release does during a rolling deploy.
if [ -n "${SB_BIN:-}" ]; then
  with_env "$BIN" migrate --ignore-missing >/dev/null
else
  with_env "$BIN" migrate >/dev/null
fi

# --- demo providers --------------------------------------------------------------------------
# `switchboard demo-providers` is the agent and the Slack, Twilio, Telegram and Resend APIs of
# the local stack: drafts depend on the message and replies are recorded, never sent to a real
# provider. Its page is a customer simulator (signed webhooks through the load balancer, and
# the replies each channel received). It is also where the stack's alerts go (fake Slack,
# PagerDuty and signed-webhook sinks, listed on its page) and its system mail (the fake
# Resend): agent-health probes every 10 s, so `POST $DEMO_URL/api/faults
# {"kind":"agent","status":503}` opens `agent_failing` within about a minute.
# SB_REAL_PROVIDERS=1 leaves it out; SB_DEMO_PORT (4010).
DEMO_PORT="${SB_DEMO_PORT:-4010}"
DEMO_URL="http://127.0.0.1:$DEMO_PORT"
# The demo's Standard Webhooks secret for alert webhooks: demo-providers' own default too.
DEMO_ALERT_SECRET="whsec_c3dpdGNoYm9hcmQgZGVtbyBhbGVydCB3ZWJob29rcyE="
if [ "${SB_REAL_PROVIDERS:-0}" != 1 ]; then
  # .dev/env is rewritten at every run, so these lines are never doubled.
  {
    printf '%s\n' "AGENT_URL=$DEMO_URL/agent" "SLACK_API_BASE=$DEMO_URL/slack/api" \
      "TWILIO_API_BASE=$DEMO_URL/twilio" "TELEGRAM_API_BASE=$DEMO_URL/telegram" \
      "RESEND_API_BASE=$DEMO_URL/resend" \
      "ALERT_SLACK_WEBHOOK_URL=$DEMO_URL/alerts/slack" \
      "ALERT_PAGERDUTY_URL=$DEMO_URL/alerts/pagerduty/v2/enqueue" \
      "ALERT_PAGERDUTY_ROUTING_KEY=demo-routing-key" \
      "ALERT_WEBHOOK_URL=$DEMO_URL/alerts/webhook" \
      "ALERT_WEBHOOK_SECRET=$DEMO_ALERT_SECRET" "DEMO_ALERT_WEBHOOK_SECRET=$DEMO_ALERT_SECRET" \
      "MAIL_RESEND_API_KEY=demo"
    env_line MAIL_FROM "Switchboard <alerts@demo.local>"
    env_line SCHEDULE_AGENT_HEALTH "*/10 * * * * *"
  } >>"$DEV/env"
  if pid_alive "$DEV/demo-providers.pid" switchboard; then
    log "demo-providers already running (pid $(pid_of "$DEV/demo-providers.pid"))"
  else
    log "Starting demo-providers on $DEMO_URL"
    (
      set -a
      # shellcheck source=/dev/null
      . "$DEV/env"
      set +a
      exec setsid nohup "$BIN" demo-providers --port "$DEMO_PORT" --switchboard-url "$PUBLIC_URL" \
        --pod-url "http://127.0.0.1:${POD_PORTS[0]}" --pod-url "http://127.0.0.1:${POD_PORTS[1]}" \
        --seed "$SEED" >>"$DEV/demo-providers.log" 2>&1 </dev/null
    ) &
    echo "$!" >"$DEV/demo-providers.pid"
  fi
fi

# Starts one pod detached from this shell (setsid: its own session, so the terminal's ^C
# and hang-up never reach it). `exec` keeps the pid, so $! is the server's own pid.
start_pod() {
  local pod=$1 port=$2
  if pid_alive "$DEV/$pod.pid" switchboard; then
    log "$pod already running (pid $(pid_of "$DEV/$pod.pid")); dev-down + dev-up picks up a new build"
    return
  fi
  log "Starting $pod on 127.0.0.1:$port"
  (
    set -a
    # shellcheck source=/dev/null
    . "$DEV/env"
    set +a
    # NO_COLOR: the log is a file, not a terminal.
    export PORT="$port" POD_ID="$pod" NO_COLOR=1
    exec setsid nohup "$BIN" serve >>"$DEV/$pod.log" 2>&1 </dev/null
  ) &
  echo "$!" >"$DEV/$pod.pid"
}

wait_ready() {
  local pod=$1 port=$2
  for _ in $(seq 120); do
    if curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$port/ready" 2>/dev/null; then
      return 0
    fi
    pid_alive "$DEV/$pod.pid" switchboard || break # exited: no point waiting
    sleep 0.5
  done
  printf '\n--- last lines of .dev/%s.log ---\n' "$pod" >&2
  tail -n 30 "$DEV/$pod.log" >&2 || true
  die "$pod is not ready on http://127.0.0.1:$port/ready"
}

for i in "${!PODS[@]}"; do
  start_pod "${PODS[$i]}" "${POD_PORTS[$i]}"
done
for i in "${!PODS[@]}"; do
  wait_ready "${PODS[$i]}" "${POD_PORTS[$i]}"
done
log "Both pods ready"

# --- HAProxy ------------------------------------------------------------------------------

cfg_new="$(mktemp "$DEV/haproxy.cfg.XXXXXX")"
sed -e "s/@LB_PORT@/$LB_PORT/" \
  -e "s/@POD1_ADDR@/127.0.0.1:${POD_PORTS[0]}/" \
  -e "s/@POD2_ADDR@/127.0.0.1:${POD_PORTS[1]}/" \
  "$ROOT/scripts/haproxy.cfg.tmpl" >"$cfg_new"
chmod 644 "$cfg_new"
haproxy -c -q -f "$cfg_new" || die "generated HAProxy config is invalid: $cfg_new"
if pid_alive "$DEV/haproxy.pid" haproxy && cmp -s "$cfg_new" "$DEV/haproxy.cfg"; then
  rm -f "$cfg_new"
  log "HAProxy already running"
else
  mv "$cfg_new" "$DEV/haproxy.cfg"
  old=()
  if pid_alive "$DEV/haproxy.pid" haproxy; then
    log "Reloading HAProxy (config changed)"
    mapfile -t old <"$DEV/haproxy.pid"
  else
    log "Starting HAProxy on 127.0.0.1:$LB_PORT"
  fi
  # -sf: the new process takes over and the old one finishes its connections, then exits.
  if [ "${#old[@]}" -gt 0 ]; then
    haproxy -f "$DEV/haproxy.cfg" -D -p "$DEV/haproxy.pid" -sf "${old[@]}"
  else
    haproxy -f "$DEV/haproxy.cfg" -D -p "$DEV/haproxy.pid"
  fi
fi

wait_lb
seed_demo with_env "$BIN"
summary file
# The console is served by the pods; log in with the demo expert.
expert="$(json_leaves <"$SEED" | sed -n 's/^expert\.email=//p')"
expert_password="$(json_leaves <"$SEED" | sed -n 's/^expert\.password=//p')"
printf '  %-14s %s/   (log in as %s / %s)\n' "console" "$PUBLIC_URL" "$expert" "$expert_password"
if [ "${SB_REAL_PROVIDERS:-0}" != 1 ]; then
  printf '  %-14s %s/   (customer simulator; fake agent and providers, log .dev/demo-providers.log)\n' \
    "demo providers" "$DEMO_URL"
  printf '  %-14s %s   (take the fake agent down; its alerts show on that page and, for admins, in the console)\n' \
    "alert demo" "curl -X POST $DEMO_URL/api/faults -H 'content-type: application/json' -d '{\"kind\":\"agent\",\"status\":503}'"
fi
if [ "$TOPOLOGY" = managed ]; then
  printf '  %-14s 127.0.0.1:%s (TLS); the pods go through PgBouncer 127.0.0.1:%s (transaction pooling)\n' \
    postgres "$PG_PORT" "$PGBOUNCER_PORT"
  printf '  %-14s 127.0.0.1:%s-%s (TLS only), masters %s\n' "redis cluster" "$REDIS_CLUSTER_PORT" \
    "$((REDIS_CLUSTER_PORT + 5))" "$REDIS_MASTERS"
  printf '  %-14s %s\n' "TLS CA" "$TLS_DIR/ca.pem"
  printf '  %-14s %s\n' "fail over" \
    "scripts/redis-cluster-ctl .dev/redis-cluster kill-master   (also: restart PORT, masters, nodes)"
  printf '  %-14s %s\n' "redis-cli" "redis-cli --tls --cacert $TLS_DIR/ca.pem -c -p ${REDIS_MASTERS%% *}"
fi
if [ "$TOPOLOGY" = sentinel ]; then
  printf '  %-14s 127.0.0.1:%s (TLS); the pods go through PgBouncer 127.0.0.1:%s (transaction pooling)\n' \
    postgres "$PG_PORT" "$PGBOUNCER_PORT"
  printf '  %-14s 127.0.0.1:%s and %s (TLS only), master %s; sentinels 127.0.0.1:%s-%s, master name %s\n' \
    "redis" "$REDIS_SENTINEL_PORT" "$((REDIS_SENTINEL_PORT + 1))" "$REDIS_MASTERS" \
    "$((REDIS_SENTINEL_PORT + 10))" "$((REDIS_SENTINEL_PORT + 12))" "$SB_SENTINEL_MASTER"
  printf '  %-14s %s\n' "TLS CA" "$TLS_DIR/ca.pem"
  printf '  %-14s %s\n' "fail over" \
    "scripts/redis-sentinel-ctl .dev/redis-sentinel failover   (also: kill-master, restart PORT, master)"
fi
