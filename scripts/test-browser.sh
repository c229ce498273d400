#!/usr/bin/env bash
# Browser end-to-end tests of the expert console (issue 13), in a real headless Chromium
# driven by playwright-core: two pods behind an HAProxy with no stickiness, and
# `switchboard demo-providers` as the agent and the Slack/Twilio/Telegram/Resend APIs.
#
# Runs on the PostgreSQL and Redis that scripts/test.sh starts (it exports
# SB_TEST_DATABASE_URL and SB_TEST_REDIS_URL): a database of its own, a Redis prefix of its
# own, every other port free-picked, everything stopped on exit. Prints one line per test
# and closes with `N passed, N failed`; exits non-zero on any failure.
#
# Environment: SB_BROWSER_ARTIFACTS (screenshots and logs; default .test/browser),
# SB_BROWSER_CACHE (npm packages for the test; default ~/.cache/switchboard-browser),
# SB_UPDATE_SCREENSHOTS=1 also copies the screenshots into docs/screenshots/,
# CHROMIUM (default /usr/bin/chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh

: "${SB_TEST_DATABASE_URL:?run through scripts/test.sh, or export SB_TEST_DATABASE_URL and SB_TEST_REDIS_URL}"
: "${SB_TEST_REDIS_URL:?run through scripts/test.sh, or export SB_TEST_DATABASE_URL and SB_TEST_REDIS_URL}"

PLAYWRIGHT_VERSION=1.65.1
AXE_VERSION=4.14.1
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
artifacts="${SB_BROWSER_ARTIFACTS:-$PWD/.test/browser}"
cache="${SB_BROWSER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/switchboard-browser}"

work="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-browser.XXXXXX")"
db="sb_browser_$$_$RANDOM"
admin_url="$SB_TEST_DATABASE_URL"
db_url="${admin_url%/*}/$db"

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  local f
  for f in "$work"/*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 0.5
  for f in "$work"/*.pid; do
    [ -f "$f" ] || continue
    kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  if [ -n "${keep_logs:-}" ]; then
    mkdir -p "$artifacts"
    cp "$work"/*.log "$artifacts/" 2>/dev/null || true
  fi
  psql "$admin_url" -X -q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

# --- tools ---------------------------------------------------------------------------------
missing=()
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
[ -x "$CHROMIUM" ] || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
[ "${#missing[@]}" -eq 0 ] || sb_apt_install "${missing[@]}"
[ -x "$CHROMIUM" ] || CHROMIUM="$(command -v chromium)"

# The committed console build must be what its sources build to.
console/check.sh

# playwright-core drives Debian's Chromium (its own browser download is not used); axe-core
# is injected into the page for the accessibility scan.
if [ ! -f "$cache/.versions" ] || [ "$(cat "$cache/.versions")" != "$PLAYWRIGHT_VERSION $AXE_VERSION" ]; then
  mkdir -p "$cache"
  (cd "$cache" && [ -f package.json ] || echo '{"private":true}' >"$cache/package.json")
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$cache" --no-audit --no-fund --loglevel=error \
    "playwright-core@$PLAYWRIGHT_VERSION" "axe-core@$AXE_VERSION" >&2
  echo "$PLAYWRIGHT_VERSION $AXE_VERSION" >"$cache/.versions"
fi

# --- the binary and the services -------------------------------------------------------------
cargo build --quiet --bin switchboard
BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/switchboard"

lb_port=$(sb_free_port)
pod1_port=$(sb_free_port)
pod2_port=$(sb_free_port)
demo_port=$(sb_free_port)
demo="http://127.0.0.1:$demo_port"

psql "$admin_url" -X -q -c "CREATE DATABASE $db" >/dev/null
cat >"$work/env" <<EOF
APP_ENV=test
DATABASE_URL=$db_url
REDIS_URL=$SB_TEST_REDIS_URL
REDIS_PREFIX=sbb$$
JWT_SECRET=$(head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n')
MASTER_ENCRYPTION_KEY=$(head -c 32 /dev/urandom | base64 -w0)
PUBLIC_BASE_URL=http://127.0.0.1:$lb_port
BIND_ADDR=127.0.0.1
EXPECTED_PODS=2
DB_POOL_SIZE=10
LOG_LEVEL=warn
NO_COLOR=1
AGENT_URL=$demo/agent
SLACK_API_BASE=$demo/slack/api
TWILIO_API_BASE=$demo/twilio
TELEGRAM_API_BASE=$demo/telegram
RESEND_API_BASE=$demo/resend
EOF
# shellcheck source=/dev/null
with_env() { (set -a && . "$work/env" && set +a && exec "$@"); }

# Starts pod N (1 or 2) in the background; the test restarts a pod it killed with this.
cat >"$work/pod.sh" <<EOF
#!/usr/bin/env bash
set -a; . "$work/env"; set +a
port=\$([ "\$1" = 1 ] && echo $pod1_port || echo $pod2_port)
PORT=\$port POD_ID=pod-\$1 setsid "$BIN" serve >>"$work/pod-\$1.log" 2>&1 </dev/null &
echo \$! >"$work/pod-\$1.pid"
EOF
chmod +x "$work/pod.sh"

with_env "$BIN" migrate >/dev/null
# One subshell that execs the server, so $! is the server itself and the clean-up stops it
# (a backgrounded `with_env` would record the pid of a shell around it instead).
(set -a && . "$work/env" && set +a && exec "$BIN" demo-providers --port "$demo_port" \
  --switchboard-url "http://127.0.0.1:$lb_port" \
  --pod-url "http://127.0.0.1:$pod1_port" --pod-url "http://127.0.0.1:$pod2_port" \
  --seed "$work/seed.json" >"$work/demo-providers.log" 2>&1) &
echo $! >"$work/demo-providers.pid"
"$work/pod.sh" 1
"$work/pod.sh" 2

sed -e "s/@LB_PORT@/$lb_port/" -e "s/@POD1_ADDR@/127.0.0.1:$pod1_port/" \
  -e "s/@POD2_ADDR@/127.0.0.1:$pod2_port/" \
  -e "s|^global\$|global\n    stats socket $work/haproxy.sock mode 600 level admin|" \
  scripts/haproxy.cfg.tmpl >"$work/haproxy.cfg"
haproxy -f "$work/haproxy.cfg" -D -p "$work/haproxy.pid" >"$work/haproxy.log" 2>&1

ready() { curl -fsS -m 2 -o /dev/null "$1" 2>/dev/null; }
for url in "$demo/health" "http://127.0.0.1:$pod1_port/ready" "http://127.0.0.1:$pod2_port/ready" \
  "http://127.0.0.1:$lb_port/ready"; do
  for _ in $(seq 120); do
    if ready "$url"; then break; fi
    sleep 0.5
  done
  ready "$url" || {
    keep_logs=1
    tail -n 30 "$work"/*.log >&2
    echo "test-browser: $url is not ready" >&2
    exit 1
  }
done

# --- users (the SPEC §9 admin commands) ------------------------------------------------------
json_id() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).id))'; }
org=$(with_env "$BIN" admin create-org --name "Browser Test Org" | json_id)
load_org=$(with_env "$BIN" admin create-org --name "Load Test Org" | json_id)
password="browser-test-$RANDOM$RANDOM"
for spec in "$org admin@browser.test admin" "$org expert1@browser.test expert" \
  "$org expert2@browser.test expert" "$load_org load-admin@browser.test admin" \
  "$load_org load-expert@browser.test expert"; do
  read -r o email role <<<"$spec"
  with_env "$BIN" admin create-user --org "$o" --email "$email" --password "$password" --role "$role" >/dev/null
done

# --- the browser tests -------------------------------------------------------------------
mkdir -p "$artifacts"
status=0
SB_LB="http://127.0.0.1:$lb_port" SB_POD1="http://127.0.0.1:$pod1_port" SB_POD2="http://127.0.0.1:$pod2_port" \
  SB_DEMO="$demo" SB_ORG="$org" SB_LOAD_ORG="$load_org" SB_PASSWORD="$password" \
  SB_SEED_FILE="$work/seed.json" SB_WORK="$work" SB_HAPROXY_SOCKET="$work/haproxy.sock" \
  SB_ARTIFACTS="$artifacts" SB_NODE_MODULES="$cache/node_modules" CHROMIUM="$CHROMIUM" \
  node console/e2e/run.mjs || status=$?

if [ "$status" -ne 0 ]; then
  keep_logs=1
  echo "test-browser: logs and screenshots in $artifacts" >&2
elif [ "${SB_UPDATE_SCREENSHOTS:-0}" = 1 ]; then
  mkdir -p docs/screenshots
  cp "$artifacts/console-queue.png" "$artifacts/console-conversation.png" docs/screenshots/
fi
exit "$status"
