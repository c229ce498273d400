#!/usr/bin/env bash
# The previous release on the new schema (docs/OPERATIONS.md, "Schema changes during a rolling
# deploy"): during a deploy the old pods keep serving after `switchboard migrate` of the new
# release ran, so this runs the old binary on a database the new one migrated and checks it
# still does its job.
#
#   1. Finds the previous release (scripts/lib-release.sh: the parent of the commit that added
#      the newest migration, HEAD when that migration is not committed yet; SB_PREV_RELEASE=REV
#      overrides), checks it out with `git worktree add` (in SB_PREV_TARGET_DIR/src, removed
#      once built) and builds its binary into SB_PREV_TARGET_DIR (default
#      target/prev-release; see below). The new binary is the working tree's, built as usual
#      into target/.
#   2. Starts a Postgres and a Redis of its own (scripts/lib-services.sh, as scripts/test.sh
#      does) and migrates the database with the NEW binary.
#   3. Runs the OLD binary's `migrate`: with `--ignore-missing` when it has that option (a
#      rollback runs it), which must succeed and change nothing; a release without it refuses
#      a database that has migrations it does not know, which is reported (its `serve` does
#      not migrate).
#   4. The old binary seeds the demo org (`admin seed-demo`) and serves as the only pod (so it
#      does every background job too), with the new binary's `demo-providers` as the agent
#      and the Slack API. Through it: a signed Slack webhook is accepted, the agent's draft
#      waits in the queue, an expert claims and releases a reply, the fake Slack receives it
#      and the message is marked sent; every GET without a path parameter in the old binary's
#      OpenAPI document answers below 500; the pod logged no ERROR; it drains and exits 0 on
#      SIGTERM.
# Exits non-zero when any step fails, printing the old pod's log (all logs are kept in
# SB_EXPAND_ARTIFACTS, default .test/expand-contract, after a failure).
#
# Why a target directory of its own for the old build: cargo fingerprints every workspace
# crate and vendored patch (vendor/sqlx-postgres, vendor/apalis-redis) by its source files, so
# the old checkout rebuilds those and their dependents whatever the target directory (measured
# on 2 cores, into a copy of target/: 22 crates, 85 s; only crates.io dependencies are
# shared). It names their artifacts as the main build does, though: in target/ it would
# overwrite the main build's own (which the next main build compiles again) and
# target/debug/switchboard, which the test suite and other scripts run. target/prev-release
# keeps its dependencies between runs: the first run builds everything (351 crates, about
# 6.5 minutes on 2 cores), later ones 15 crates (65-125 s; 13 s when rustc's incremental
# cache from the last run still fits, which the fixed worktree path allows).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh
# shellcheck source=scripts/lib-topology.sh
. scripts/lib-topology.sh
# shellcheck source=scripts/lib-release.sh
. scripts/lib-release.sh

t0=$SECONDS
prev=$(sb_prev_release) || exit 2
target="${CARGO_TARGET_DIR:-$ROOT/target}"
prev_target="${SB_PREV_TARGET_DIR:-$target/prev-release}"
artifacts="${SB_EXPAND_ARTIFACTS:-$ROOT/.test/expand-contract}"
work="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-expand.XXXXXX")"
chmod 755 "$work"
failed=0
redis_port=""
worktree=""

log() { printf '==> %s\n' "$*"; }
ok() { printf 'ok: %s\n' "$*"; }
not_ok() {
  failed=$((failed + 1))
  printf 'FAILED: %s\n' "$*"
}
elapsed() { echo "$((SECONDS - $1)) s"; }

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  local rc=$? f
  set +e
  for f in "$work"/proc-*.pid; do
    [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$work"/proc-*.pid; do
    [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
  done
  [ -z "$redis_port" ] || redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1
  sb_stop_postgres "$work/pg"
  if [ "$rc" != 0 ] || [ "$failed" != 0 ]; then
    mkdir -p "$artifacts"
    cp "$work"/*.log "$work"/*.json "$artifacts/" 2>/dev/null
    echo "test-expand-contract: logs in $artifacts" >&2
  fi
  if [ -n "$worktree" ]; then
    git worktree remove --force "$worktree" >/dev/null 2>&1 || rm -rf "$worktree"
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

log "Previous release: $(git log -1 --format='%h %s' "$prev" | cut -c1-100)"
log "Migrations it does not have: $(comm -13 <(git ls-tree --name-only "$prev" migrations/ |
  sed 's|.*/||' | sort) <(ls migrations | sort) | tr '\n' ' ')"

# --- the two binaries ------------------------------------------------------------------------

step=$SECONDS
cargo build --quiet --bin switchboard
# Copies: another build may replace the file while this runs.
cp "$target/debug/switchboard" "$work/new"
log "New binary (working tree) built in $(elapsed "$step")"

step=$SECONDS
# Always the same path: rustc's incremental cache from the last run then still applies (it
# records source paths; 13 s instead of about 65 here). One run at a time builds there.
mkdir -p "$prev_target"
exec 9>"$prev_target/.expand-contract.lock"
flock 9
worktree="$prev_target/src"
# Left by a run that was killed: gone, and (--force) its registration reused.
if [ -e "$worktree" ]; then
  git worktree remove --force "$worktree" 2>/dev/null || rm -rf "$worktree"
fi
git worktree add --force --quiet --detach "$worktree" "$prev"
log "Building the previous release in $worktree into $prev_target (log: build-prev.log)"
if ! (cd "$worktree" && CARGO_TARGET_DIR="$prev_target" cargo build --bin switchboard) \
  >"$work/build-prev.log" 2>&1; then
  tail -n 30 "$work/build-prev.log" >&2
  echo "test-expand-contract: the previous release does not build" >&2
  exit 1
fi
# What the old binary needs at run time: itself and its config/ (the rest is embedded).
cp "$prev_target/debug/switchboard" "$work/old"
mkdir -p "$work/prev"
cp -r "$worktree/config" "$work/prev/config"
git worktree remove --force "$worktree"
worktree=""
exec 9>&-
prev_build_secs=$((SECONDS - step))
log "Previous release built in ${prev_build_secs} s ($(grep -c '^ *Compiling' "$work/build-prev.log" || true) crates compiled)"

# --- services --------------------------------------------------------------------------------

step=$SECONDS
mapfile -t ports < <(sb_free_ports 4)
pg_port=${ports[0]} redis_port=${ports[1]} pod_port=${ports[2]} demo_port=${ports[3]}
sb_need_redis
sb_start_postgres "$work/pg" "$pg_port" "$work/pg.log"
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --daemonize yes --dir "$work" --logfile "$work/redis.log" --pidfile "$work/redis.pid"
POD="http://127.0.0.1:$pod_port"
DEMO="http://127.0.0.1:$demo_port"
cat >"$work/env" <<EOF
APP_ENV=test
DATABASE_URL=postgres://postgres@127.0.0.1:$pg_port/postgres
REDIS_URL=redis://127.0.0.1:$redis_port
REDIS_PREFIX=sbx$$
JWT_SECRET=$(head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n')
MASTER_ENCRYPTION_KEY=$(head -c 32 /dev/urandom | base64 -w0)
PUBLIC_BASE_URL=$POD
BIND_ADDR=127.0.0.1
PORT=$pod_port
POD_ID=pod-prev
EXPECTED_PODS=1
DB_POOL_SIZE=10
LOG_LEVEL=warn
NO_COLOR=1
AGENT_URL=$DEMO/agent
SLACK_API_BASE=$DEMO/slack/api
TWILIO_API_BASE=$DEMO/twilio
TELEGRAM_API_BASE=$DEMO/telegram
RESEND_API_BASE=$DEMO/resend
EOF
log "Postgres 127.0.0.1:$pg_port, Redis 127.0.0.1:$redis_port ready in $(elapsed "$step")"

# The new binary runs from the checkout (its config/), the old one with its own
# config/{APP_ENV}.toml (a newer file may carry keys it does not know).
new() { (set -a && . "$work/env" && set +a && exec "$work/new" "$@"); }
old() {
  (cd "$work/prev" && set -a && . "$work/env" && set +a &&
    export CONFIG_DIR="$work/prev/config" && exec "$work/old" "$@")
}

# --- migrate: new, then old --------------------------------------------------------------------

step=$SECONDS
if new migrate >"$work/migrate-new.log" 2>&1; then
  ok "the new binary migrated a fresh database ($(elapsed "$step"))"
else
  cat "$work/migrate-new.log" >&2
  not_ok "the new binary's migrate"
  exit 1
fi
if old migrate --help 2>/dev/null | grep -q -- '--ignore-missing'; then
  if old migrate --ignore-missing >"$work/migrate-old.log" 2>&1; then
    ok "the previous release's migrate --ignore-missing accepts the newer database (a rollback can run it)"
  else
    not_ok "the previous release's migrate --ignore-missing: $(tail -n 1 "$work/migrate-old.log")"
  fi
elif old migrate >"$work/migrate-old.log" 2>&1; then
  ok "the previous release's migrate accepts the newer database"
else
  log "The previous release's migrate has no --ignore-missing and refuses the newer database" \
    "($(tail -n 1 "$work/migrate-old.log" | cut -c1-160)); its serve does not migrate," \
    "so the pods are unaffected, but a rollback must not run it"
fi

# --- the old binary serves ---------------------------------------------------------------------

step=$SECONDS
if ! DEMO_MODE=true old admin seed-demo >"$work/seed.json" 2>"$work/seed.log"; then
  cat "$work/seed.log" >&2
  not_ok "the previous release's admin seed-demo"
  exit 1
fi
ok "the previous release's admin seed-demo wrote the demo org"
(set -a && . "$work/env" && set +a && exec "$work/new" demo-providers --port "$demo_port" \
  --switchboard-url "$POD" --seed "$work/seed.json" >"$work/demo-providers.log" 2>&1) &
echo $! >"$work/proc-demo.pid"
(cd "$work/prev" && set -a && . "$work/env" && set +a && export CONFIG_DIR="$work/prev/config" &&
  exec "$work/old" serve >"$work/pod-prev.log" 2>&1) &
pod_pid=$!
echo "$pod_pid" >"$work/proc-pod.pid"
answers() { curl -fsS -m 2 -o /dev/null "$1" 2>/dev/null; }
for url in "$DEMO/health" "$POD/ready"; do
  if ! sb_wait_until 60 0.3 answers "$url"; then
    tail -n 30 "$work/pod-prev.log" "$work/demo-providers.log" >&2
    not_ok "$url is not ready within 60 s"
    exit 1
  fi
done
ok "the previous release serves on the new schema: $POD/ready in $(elapsed "$step")"

# --- the smoke test ----------------------------------------------------------------------------

smoke_start=$SECONDS
# call METHOD PATH [curl args...]: the body in $work/body, the status printed.
call() {
  local method=$1 path=$2
  shift 2
  local status
  status=$(curl -sS -m 10 -o "$work/body" -w '%{http_code}' -X "$method" "$POD$path" "$@") || true
  echo "${status:-000}"
}
seed() { jq -r "$1" "$work/seed.json"; }
uuid() { cat /proc/sys/kernel/random/uuid; }
login() { # login ROLE: prints the token
  local status
  status=$(call POST /auth/login -H 'content-type: application/json' \
    -d "$(jq -n --arg e "$(seed ".$1.email")" --arg p "$(seed ".$1.password")" '{email: $e, password: $p}')")
  [ "$status" = 200 ] && jq -r .token "$work/body"
}
fail_smoke() {
  not_ok "$1 (status ${2:-?}: $(head -c 300 "$work/body" 2>/dev/null))"
  echo "--- the previous release's log (last 40 lines)" >&2
  tail -n 40 "$work/pod-prev.log" >&2
  exit 1
}

expert=$(login expert) || fail_smoke "expert login"
admin=$(login admin) || fail_smoke "admin login"
auth=(-H "authorization: Bearer $expert")

# 1. A customer writes on Slack (signed the way Slack signs, as in the README).
connection=$(seed .channels.slack.id)
secret=$(seed .channels.slack.secrets.signing_secret)
ts=$(date +%s)
body=$(jq -cn --arg id "Ev$(uuid | tr -d -)" --arg ts "$ts.000100" \
  '{type: "event_callback", event_id: $id, event: {type: "message", user: "UEXPAND",
    text: "Where is my order?", channel: "CEXPAND", ts: $ts}}')
sig="v0=$(printf 'v0:%s:%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$secret" | sed 's/^.* //')"
status=$(call POST "/webhooks/slack/$connection" -H "X-Slack-Request-Timestamp: $ts" \
  -H "X-Slack-Signature: $sig" -H 'content-type: application/json' -d "$body")
[ "$status" = 200 ] && [ "$(jq -r .status "$work/body")" = accepted ] ||
  fail_smoke "a signed Slack webhook is accepted" "$status"
ok "a signed Slack webhook is accepted"

# 2. The agent's draft waits in the queue.
drafted() {
  [ "$(call GET '/expert-queue?status=pending' "${auth[@]}")" = 200 ] &&
    jq -e '[.items[] | select(.draft != null)] | length > 0' "$work/body" >/dev/null
}
sb_wait_until 60 0.5 drafted || fail_smoke "the message becomes a pending item with the agent's draft"
item=$(jq -r '[.items[] | select(.draft != null)][0].id' "$work/body")
conversation=$(jq -r '[.items[] | select(.draft != null)][0].conversation_id' "$work/body")
ok "the webhook became a pending item with the agent's draft"

# 3. Claim and release.
status=$(call POST "/expert-queue/$item/claim" "${auth[@]}" -H "Idempotency-Key: $(uuid)")
[ "$status" = 200 ] || fail_smoke "claim" "$status"
reply="It ships tomorrow morning ($(uuid | cut -c1-8))."
status=$(call POST "/expert-queue/$item/release" "${auth[@]}" -H "Idempotency-Key: $(uuid)" \
  -H 'content-type: application/json' -d "$(jq -n --arg b "$reply" '{body: $b}')")
[ "$status" = 200 ] || fail_smoke "release" "$status"
ok "an expert claimed the item and released a reply"

# 4. The provider gets it, and the message says so.
delivered() {
  curl -fsS -m 5 "$DEMO/api/calls?kind=slack" 2>/dev/null |
    jq -e --arg t "$reply" '[.calls[] | select(.text == $t)] | length == 1' >/dev/null
}
sb_wait_until 60 0.5 delivered || fail_smoke "the fake Slack API receives the reply"
sent() {
  [ "$(call GET "/conversations/$conversation" "${auth[@]}")" = 200 ] &&
    jq -e --arg t "$reply" '[.messages[] | select(.body == $t and .delivery.status == "sent")] |
      length == 1' "$work/body" >/dev/null
}
sb_wait_until 30 0.5 sent || fail_smoke "the reply is marked sent"
ok "the provider received the reply and the message is marked sent"

# 5. Every GET without a path parameter, as an admin.
[ "$(call GET /openapi.json)" = 200 ] || fail_smoke "GET /openapi.json"
mapfile -t paths < <(jq -r '.paths | to_entries[] | select(.value.get != null) | .key |
  select(test("[{]") | not)' "$work/body")
errors=()
for path in "${paths[@]}"; do
  status=$(call GET "$path" -H "authorization: Bearer $admin")
  [ "$status" != 000 ] && [ "$status" -lt 500 ] || errors+=("$path $status")
done
if [ "${#errors[@]}" = 0 ]; then
  ok "the ${#paths[@]} GETs without a path parameter in its OpenAPI document answer below 500"
else
  not_ok "GETs that fail on the new schema: ${errors[*]}"
fi
log "Smoke test done in $(elapsed "$smoke_start")"

# 6. No error in its log, and a clean stop.
kill -TERM "$pod_pid"
pod_rc=0
wait "$pod_pid" || pod_rc=$?
rm -f "$work/proc-pod.pid"
if [ "$pod_rc" = 0 ]; then
  ok "the previous release drained and exited 0 on SIGTERM"
else
  not_ok "the previous release exited $pod_rc on SIGTERM"
fi
if grep -q ' ERROR ' "$work/pod-prev.log"; then
  not_ok "the previous release logged errors:"
  grep ' ERROR ' "$work/pod-prev.log" | head -n 20
else
  ok "the previous release logged no error"
fi

if [ "$failed" != 0 ]; then
  echo "--- the previous release's log (last 40 lines)" >&2
  tail -n 40 "$work/pod-prev.log" >&2
  echo "test-expand-contract: $failed check(s) failed; previous release $(git rev-parse --short "$prev")" \
    "built in ${prev_build_secs} s, $(elapsed "$t0") in all" >&2
  exit 1
fi
echo "test-expand-contract: the previous release $(git rev-parse --short "$prev") works on the new" \
  "schema (built in ${prev_build_secs} s, $(elapsed "$t0") in all)"
