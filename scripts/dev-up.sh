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
# Environment: SB_PG_PORT (55432), SB_REDIS_PORT (56379), SB_LB_PORT (8080),
# SB_POD1_PORT (3001), SB_POD2_PORT (3002); SB_NATIVE=1 skips Docker even when an engine
# runs; SB_SKIP_BUILD=1 reuses the built switchboard binary as it is.
set -euo pipefail

# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
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

# --- secrets and environment ------------------------------------------------------------

# Secrets are generated once and kept; the URLs are rewritten each run so changed SB_*
# ports take effect.
write_env() {
  local jwt="" key="" tmp
  if [ -f "$DEV/env" ]; then
    jwt="$(sed -n 's/^JWT_SECRET=//p' "$DEV/env")"
    key="$(sed -n 's/^MASTER_ENCRYPTION_KEY=//p' "$DEV/env")"
  fi
  [ -n "$jwt" ] || jwt="$(head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  [ -n "$key" ] || key="$(head -c 32 /dev/urandom | base64 -w0)"
  tmp="$(mktemp "$DEV/env.XXXXXX")" # mktemp creates it 0600
  cat >"$tmp" <<EOF
APP_ENV=development
JWT_SECRET=$jwt
MASTER_ENCRYPTION_KEY=$key
DATABASE_URL=${SB_DATABASE_URL:-postgres://postgres@127.0.0.1:$PG_PORT/switchboard}
DATABASE_DIRECT_URL=postgres://postgres@127.0.0.1:$PG_PORT/switchboard
REDIS_URL=redis://127.0.0.1:$REDIS_PORT
PUBLIC_BASE_URL=$PUBLIC_URL
BIND_ADDR=127.0.0.1
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
if [ "${SB_NATIVE:-0}" != 1 ] && docker_engine; then
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
  seed_demo "${compose[@]}" run --rm --no-deps -T migrate
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
  log "Starting Postgres on 127.0.0.1:$PG_PORT"
  # -o is parsed by a shell inside pg_ctl, hence the inner quotes around the socket dir.
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_RUN/postgres.log" -w -t 60 \
    -o "-p $PG_PORT -h 127.0.0.1 -k '$PG_RUN'" start >/dev/null || {
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

# --- Redis -------------------------------------------------------------------------------

redis_up() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }
if redis_up; then
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
with_env "$BIN" migrate >/dev/null

# --- demo providers --------------------------------------------------------------------------
# `switchboard demo-providers` is the agent and the Slack, Twilio, Telegram and Resend APIs of
# the local stack: drafts depend on the message and replies are recorded, never sent to a real
# provider. Its page is a customer simulator (signed webhooks through the load balancer, and
# the replies each channel received). SB_REAL_PROVIDERS=1 leaves it out; SB_DEMO_PORT (4010).
DEMO_PORT="${SB_DEMO_PORT:-4010}"
DEMO_URL="http://127.0.0.1:$DEMO_PORT"
if [ "${SB_REAL_PROVIDERS:-0}" != 1 ]; then
  # .dev/env is rewritten at every run, so these lines are never doubled.
  printf '%s\n' "AGENT_URL=$DEMO_URL/agent" "SLACK_API_BASE=$DEMO_URL/slack/api" \
    "TWILIO_API_BASE=$DEMO_URL/twilio" "TELEGRAM_API_BASE=$DEMO_URL/telegram" \
    "RESEND_API_BASE=$DEMO_URL/resend" >>"$DEV/env"
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
fi
