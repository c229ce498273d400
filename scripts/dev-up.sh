#!/usr/bin/env bash
# Brings up the local active-active stack (SPEC §7): Postgres, Redis, two Switchboard pods
# and HAProxy round-robin in front of them with no stickiness, then seeds a demo org.
# All state lives under .dev/; the system's own Postgres and Redis are never touched.
# Re-running only starts what is down. Stop with scripts/dev-down.sh.
#
# Environment: SB_PG_PORT (55432), SB_REDIS_PORT (56379), SB_LB_PORT (8080),
# SB_POD1_PORT (3001), SB_POD2_PORT (3002); SB_NATIVE=1 skips Docker even when an engine
# runs; SB_SKIP_BUILD=1 reuses target/release/switchboard as it is.
set -euo pipefail

# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"
cd "$ROOT"

SEED="$DEV/seed.json"
LB_URL="http://127.0.0.1:$LB_PORT"
PUBLIC_URL="http://localhost:$LB_PORT"

mkdir -p "$DEV"
chmod 755 "$DEV" # the Postgres user must be able to reach .dev/pg when we run as root

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
DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/switchboard
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

# --- Docker, when an engine is running ----------------------------------------------------

if [ "${SB_NATIVE:-0}" != 1 ] && docker_engine; then
  log "Docker engine found: docker compose -f ${COMPOSE_FILE##*/} up -d --build"
  # Compose takes only the secrets from .dev/env; its URLs point at its own services.
  JWT_SECRET="$(sed -n 's/^JWT_SECRET=//p' "$DEV/env")" \
    MASTER_ENCRYPTION_KEY="$(sed -n 's/^MASTER_ENCRYPTION_KEY=//p' "$DEV/env")" \
    docker compose -f "$COMPOSE_FILE" up -d --build
  touch "$DEV/compose" # tells dev-down.sh to use compose
  log "Load balancer: $PUBLIC_URL (pods are not seeded in Docker mode; SB_NATIVE=1 runs natively)"
  log "Stop with: scripts/dev-down.sh"
  exit 0
fi

# --- packages --------------------------------------------------------------------------

missing=()
pg_bindir >/dev/null || missing+=(postgresql)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3) # JSON handling for the seed step
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
PG_RUN="$DEV/pg-run" # unix socket and server log
if is_root && ! id "$PG_USER" >/dev/null 2>&1; then
  log "Creating system user $PG_USER to own the dev cluster (Postgres will not run as root)"
  useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
fi
socket="$PG_RUN/.s.PGSQL.$PG_PORT"
[ "${#socket}" -le 100 ] || die "socket path too long for a unix socket: $socket (move the checkout)"
mkdir -p "$PG_RUN"
if is_root; then
  chown "$PG_USER": "$PG_RUN"
  [ ! -d "$DEV/pg" ] || chown -R "$PG_USER": "$DEV/pg"
  as_pg test -w "$PG_RUN" ||
    die "user $PG_USER cannot reach $PG_RUN: make the checkout's parent directories world-searchable (chmod o+x)"
fi

if [ ! -s "$DEV/pg/PG_VERSION" ]; then
  log "Initialising Postgres cluster in .dev/pg ($PG_BIN)"
  mkdir -p "$DEV/pg"
  chmod 700 "$DEV/pg"
  if is_root; then chown "$PG_USER": "$DEV/pg"; fi
  as_pg "$PG_BIN/initdb" -D "$DEV/pg" -A trust -U postgres -E UTF8 >"$PG_RUN/initdb.log" 2>&1 ||
    die "initdb failed; see $PG_RUN/initdb.log"
fi

if as_pg "$PG_BIN/pg_ctl" -D "$DEV/pg" status >/dev/null 2>&1; then
  log "Postgres already running"
else
  log "Starting Postgres on 127.0.0.1:$PG_PORT"
  # -o is parsed by a shell inside pg_ctl, hence the inner quotes around the socket dir.
  as_pg "$PG_BIN/pg_ctl" -D "$DEV/pg" -l "$PG_RUN/postgres.log" -w -t 60 \
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
  log "Building target/release/switchboard"
  cargo build --release --bin switchboard
fi

log "Applying migrations"
with_env "$BIN" migrate >/dev/null

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

# Health checks need `rise 2` passes before a server takes traffic.
for _ in $(seq 60); do
  curl -fsS -m 2 -o /dev/null "$LB_URL/ready" 2>/dev/null && break
  sleep 0.5
done
curl -fsS -m 2 -o /dev/null "$LB_URL/ready" || die "the load balancer does not answer on $LB_URL/ready"

# --- demo data ------------------------------------------------------------------------------

# Prints the value at a dotted PATH (e.g. admin.password) of the JSON text in $1; '' if absent.
jget() {
  python3 -c '
import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
  v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)' "$1" "$2"
}

# Sets the dotted PATH in seed.json to VALUE (a JSON text), rewriting the file atomically.
seed_set() {
  python3 -c '
import json, os, sys
path, keys, value = sys.argv[1], sys.argv[2].split("."), json.loads(sys.argv[3])
with open(path) as f:
  seed = json.load(f)
node = seed
for k in keys[:-1]:
  node = node.setdefault(k, {})
node[keys[-1]] = value
# 0600: the seed holds passwords and channel secrets.
with os.fdopen(os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
  json.dump(seed, f, indent=2)
  f.write("\n")
os.replace(path + ".tmp", path)
os.chmod(path, 0o600)' "$SEED" "$1" "$2"
}

# The demo credentials and channel secrets are generated once, before anything is created,
# so a run interrupted half-way resumes with the same passwords instead of orphaning them.
new_seed() {
  (
    umask 077
    python3 - "$SEED" <<'PY'
import base64, json, secrets, string, sys

alnum = string.ascii_letters + string.digits
def token(n):
  return "".join(secrets.choice(alnum) for _ in range(n))

seed = {
  "org_id": None,
  "admin": {"email": "admin@demo.local", "password": token(16)},
  "expert": {"email": "expert@demo.local", "password": token(16)},
  "channels": {
    "slack": {"name": "demo-slack", "secrets": {
      "signing_secret": secrets.token_hex(16),
      "bot_token": "xoxb-demo-" + token(24)}},
    "whatsapp": {"name": "demo-whatsapp", "secrets": {
      "account_sid": "AC" + secrets.token_hex(16),
      "auth_token": secrets.token_hex(16),
      "from_number": "whatsapp:+15555550100"}},
    "telegram": {"name": "demo-telegram", "secrets": {
      "bot_token": "%d:%s" % (secrets.randbelow(9 * 10**9) + 10**9, token(35)),
      "secret_token": token(32)}},
    "email": {"name": "demo-email", "secrets": {
      "webhook_secret": "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode(),
      "api_key": "re_demo_" + token(24),
      "from_address": "support@demo.local"}},
  },
}
with open(sys.argv[1], "w") as f:
  json.dump(seed, f, indent=2)
  f.write("\n")
PY
  )
}

admin_cli() { with_env "$BIN" admin "$@"; }

[ -s "$SEED" ] || new_seed
seed="$(cat "$SEED")"
org="$(jget "$seed" org_id)"
# A seed whose org is gone (the cluster was re-initialised) is re-seeded into a new org.
if [[ -n "$org" && ! "$org" =~ ^[0-9a-fA-F-]{36}$ ]]; then
  die "org_id in .dev/seed.json is not a UUID: $org"
fi
if [ -n "$org" ] && [ "$(pg_query "SELECT count(*) FROM orgs WHERE id = '$org'" switchboard)" = 0 ]; then
  warn "org $org from .dev/seed.json no longer exists; creating a new demo org"
  org=""
fi
if [ -z "$org" ]; then
  log "Creating the demo org"
  out="$(admin_cli create-org --name "Demo Org")"
  org="$(jget "$out" id)"
  [ -n "$org" ] || die "create-org printed no id: $out"
  seed_set org_id "\"$org\""
fi
# create-user is idempotent (an existing user keeps its password and gets the membership).
for role in admin expert; do
  admin_cli create-user --org "$org" --email "$(jget "$seed" "$role.email")" \
    --password "$(jget "$seed" "$role.password")" --role "$role" >/dev/null
done

# HTTP against the load balancer: sets $status and $resp (the body) in this shell.
status=""
resp=""
token=""
api() {
  local method=$1 path=$2 body=${3:-}
  local args=(-sS -m 10 -X "$method" -H 'Accept: application/json' -o "$DEV/.response" -w '%{http_code}')
  [ -z "$token" ] || args+=(-H "Authorization: Bearer $token")
  [ -z "$body" ] || args+=(-H 'Content-Type: application/json' --data-binary "$body")
  status="$(curl "${args[@]}" "$LB_URL$path")" || status=000
  resp="$(cat "$DEV/.response" 2>/dev/null || true)"
  rm -f "$DEV/.response"
}

login_body="$(python3 -c 'import json, sys; print(json.dumps({"email": sys.argv[1], "password": sys.argv[2]}))' \
  "$(jget "$seed" admin.email)" "$(jget "$seed" admin.password)")"
api POST /auth/login "$login_body"
[ "$status" = 200 ] || die "login as $(jget "$seed" admin.email) failed ($status): $resp"
token="$(jget "$resp" token)"

for channel in slack whatsapp telegram email; do
  name="$(jget "$seed" "channels.$channel.name")"
  body="$(python3 -c '
import json, sys
seed, org, channel = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
c = seed["channels"][channel]
print(json.dumps({"org_id": org, "channel": channel, "name": c["name"],
                  "secrets": c["secrets"], "settings": {}}))' "$seed" "$org" "$channel")"
  api POST /channel-connections "$body"
  case "$status" in
  201) log "Created the $channel connection" ;;
  409)
    log "The $channel connection already exists"
    # Already there from an earlier run: find it to report its id and webhook URL.
    api GET "/channel-connections?org_id=$org"
    [ "$status" = 200 ] || die "listing connections failed ($status): $resp"
    resp="$(python3 -c '
import json, sys
items = json.loads(sys.argv[1]).get("items", [])
match = [i for i in items if i.get("channel") == sys.argv[2] and i.get("name") == sys.argv[3]]
print(json.dumps(match[0] if match else {}))' "$resp" "$channel" "$name")"
    ;;
  *) die "creating the $channel connection failed ($status): $resp" ;;
  esac
  seed_set "channels.$channel.id" "\"$(jget "$resp" id)\""
  seed_set "channels.$channel.webhook_url" "\"$(jget "$resp" webhook_url)\""
done

# --- summary --------------------------------------------------------------------------------

python3 - "$SEED" "$PUBLIC_URL" "${POD_PORTS[@]}" <<'PY'
import json, sys
seed = json.load(open(sys.argv[1]))
lb, ports = sys.argv[2], sys.argv[3:]
print()
print("Switchboard dev stack is up")
print(f"  load balancer  {lb}   (round robin, no stickiness; X-Served-By names the pod)")
for i, port in enumerate(ports, 1):
  print(f"  pod-{i}          http://127.0.0.1:{port}   (log .dev/pod-{i}.log)")
print(f"  org id         {seed['org_id']}")
for role in ("admin", "expert"):
  print(f"  {role:<14} {seed[role]['email']} / {seed[role]['password']}")
print("  channels:")
for name, c in seed["channels"].items():
  print(f"    {name:<9} {c.get('webhook_url', '?')}")
  for k, v in c["secrets"].items():
    print(f"              {k} = {v}")
print("  env for the CLI: set -a; . .dev/env; set +a   (all of this is in .dev/seed.json)")
print("  stop with:      scripts/dev-down.sh   (--purge also deletes .dev/)")
PY
