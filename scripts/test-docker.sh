#!/usr/bin/env bash
# Builds the image from our Dockerfile and smoke-tests both compose stacks for real, then
# tears everything down. Works on a machine that has only Debian's packages: it installs
# docker.io and docker-compose when missing, starts dockerd when no engine answers (and
# stops only what it started), and builds stand-in base images when no registry answers
# (scripts/docker-base-images.sh).
#
# The smoke test, through the load balancer of docker-compose.multi-pod.yml:
#   1. both pods answer, in turn; `migrate` ran once
#   2. a signed Slack webhook is accepted and becomes a message; a Socket.IO client connected
#      through the load balancer receives its message_created
#   3. one pod crashes (SIGKILL): webhooks keep being accepted, the restart policy brings the
#      pod back and the load balancer uses it again
#   4. a rolling restart of both pods (stop within stop_grace_period, exit 0, start) under 50
#      webhooks/s: no 5xx, no error at all
#   5. `down` leaves no container, network or volume of the project
# and docker-compose.yml (one pod) comes up ready and goes down clean. Then
# scripts/test-dev-up-private.sh runs dev-up natively from a clone in a 0700 directory,
# with the binary taken out of the image (no second build). Also reported: image
# size, user and CA bundle, time from container start to /ready, time to stop on SIGTERM.
#
# Usage: scripts/test-docker.sh      Env: SB_KEEP_DOCKER=1 leaves a dockerd it started running.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/dev-lib.sh
. scripts/dev-lib.sh
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh

IMAGE=switchboard:dev
PROJECT="sbtest$$"
MULTI=docker-compose.multi-pod.yml
SINGLE=docker-compose.yml
RATE=50
passed=0
failed=0
started_dockerd=""
work="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-docker.XXXXXX")"
t0=$SECONDS

ok() {
  passed=$((passed + 1))
  printf 'ok: %s\n' "$*"
}
not_ok() {
  failed=$((failed + 1))
  printf 'FAILED: %s\n' "$*"
}
check() { # check "what" command...
  local what=$1
  shift
  if "$@"; then ok "$what"; else not_ok "$what"; fi
}
elapsed() { echo "$((SECONDS - $1)) s"; }

# --- engine, compose ------------------------------------------------------------------------

apt_install() {
  log "Installing $*"
  local sudo=()
  is_root || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

missing=()
command -v docker >/dev/null || missing+=(docker.io)
if ! docker_engine && ! command -v dockerd >/dev/null; then
  [[ " ${missing[*]} " == *" docker.io "* ]] || missing+=(docker.io)
fi
compose_detect || missing+=(docker-compose)
[ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"
compose_detect || die "no Compose after installing docker-compose"

stop_dockerd() {
  [ -n "$started_dockerd" ] || return 0
  if [ "${SB_KEEP_DOCKER:-0}" = 1 ]; then
    log "Leaving dockerd (pid $started_dockerd) running (SB_KEEP_DOCKER=1)"
    return 0
  fi
  log "Stopping the dockerd this script started (pid $started_dockerd)"
  kill -TERM "$started_dockerd" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$started_dockerd" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL "$started_dockerd" 2>/dev/null || true
}

if ! docker_engine; then
  is_root || die "no Docker engine answers, and only root can start one here"
  log "No Docker engine answers: starting dockerd (log: $work/dockerd.log)"
  setsid dockerd >"$work/dockerd.log" 2>&1 </dev/null &
  started_dockerd=$!
  for _ in $(seq 150); do
    docker_engine && break
    kill -0 "$started_dockerd" 2>/dev/null || break
    sleep 0.2
  done
  docker_engine || {
    tail -n 20 "$work/dockerd.log" >&2
    die "dockerd did not start"
  }
fi

compose() { "${COMPOSE[@]}" -p "$PROJECT" "$@"; }

cleanup() {
  local rc=$?
  set +e
  if [ -n "${COMPOSE_FILE_UP:-}" ]; then
    compose -f "$COMPOSE_FILE_UP" down -v --remove-orphans -t 20 >/dev/null 2>&1
  fi
  stop_dockerd
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

log "Docker $(docker version -f '{{.Server.Version}}'), $("${COMPOSE[@]}" version --short 2>/dev/null || "${COMPOSE[@]}" version | head -n 1) (${COMPOSE[*]})"

# --- images ---------------------------------------------------------------------------------

step=$SECONDS
scripts/docker-base-images.sh
log "Base images ready in $(elapsed "$step")"

step=$SECONDS
log "docker build -t $IMAGE . (log: $work/build.log)"
if ! docker build --force-rm -t "$IMAGE" . >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" >&2
  die "docker build failed"
fi
build_secs=$((SECONDS - step))
ok "image built from the Dockerfile in ${build_secs} s"

size="$(docker image inspect -f '{{.Size}}' "$IMAGE")"
size_mb="$(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1e6 }')"
user="$(docker image inspect -f '{{.Config.User}}' "$IMAGE")"
env_app="$(docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" | sed -n 's/^APP_ENV=//p')"
log "Image $IMAGE: $size_mb MB, user $user, APP_ENV=$env_app"
check "the image runs as a non-root user ($(docker run --rm --entrypoint id "$IMAGE"))" \
  test "$(docker run --rm --entrypoint id "$IMAGE" -u)" != 0
check "the image carries CA certificates" \
  test "$(docker run --rm --entrypoint grep "$IMAGE" -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt)" -gt 100
check "the image defaults to APP_ENV=production" test "$env_app" = production

# --- the two-pod stack ------------------------------------------------------------------------

export JWT_SECRET MASTER_ENCRYPTION_KEY SB_LB_PORT SB_POD1_PORT SB_POD2_PORT SB_PORT \
  SB_POD1_METRICS_PORT SB_POD2_METRICS_PORT SB_METRICS_PORT SB_COMPOSE_SUBNET SB_LB_ADDR
JWT_SECRET="$(head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n')"
MASTER_ENCRYPTION_KEY="$(head -c 32 /dev/urandom | base64 -w0)"
pick_ports() {
  SB_LB_PORT="$(sb_free_port)"
  SB_POD1_PORT="$(sb_free_port)"
  SB_POD2_PORT="$(sb_free_port)"
  SB_PORT="$(sb_free_port)"
  SB_POD1_METRICS_PORT="$(sb_free_port)"
  SB_POD2_METRICS_PORT="$(sb_free_port)"
  SB_METRICS_PORT="$(sb_free_port)"
  # A subnet of its own for the two-pod stack (the compose file's fixed default would collide
  # with a developer's stack of it running meanwhile), and its load balancer's address.
  local octet=$((RANDOM % 200 + 20))
  SB_COMPOSE_SUBNET="172.31.$octet.0/24"
  SB_LB_ADDR="172.31.$octet.10"
  LB="http://127.0.0.1:$SB_LB_PORT"
}

# Free ports can be taken between the pick and the bind (other test runs on this machine
# pick theirs the same way): then pick again.
up() { # up FILE
  local attempt
  for attempt in 1 2 3; do
    pick_ports
    COMPOSE_FILE_UP=$1
    log "${COMPOSE[*]} -p $PROJECT -f $1 up -d (ports: lb $SB_LB_PORT, pods $SB_POD1_PORT $SB_POD2_PORT, single $SB_PORT)"
    compose -f "$1" up -d --no-build >"$work/up.log" 2>&1 && return 0
    grep -q 'address already in use\|Pool overlaps' "$work/up.log" || break
    log "A port was taken meanwhile (attempt $attempt); again with others"
    compose -f "$1" down -v --remove-orphans >/dev/null 2>&1 || true
  done
  cat "$work/up.log" >&2
  compose -f "$1" logs --no-color --tail 30 >&2 || true
  return 1
}

step=$SECONDS
up "$MULTI" || die "compose up failed"
wait_http() { # wait_http URL SECONDS
  local deadline=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$deadline" ]; do
    curl -fsS -m 2 -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}
check "the stack is up and the load balancer answers /ready ($(elapsed "$step"))" wait_http "$LB/ready" 60
# Production serves /metrics on the pods' internal listener only, never through the API port.
# (The text is fetched whole first: `curl | grep -q` fails under pipefail when grep stops
# reading early.)
# A pod's counters appear with its first request (the load balancer's health checks), so
# this waits up to 20 s for both.
metrics_scraped() {
  local port text deadline=$((SECONDS + 20))
  for port in "$SB_POD1_METRICS_PORT" "$SB_POD2_METRICS_PORT"; do
    until text="$(curl -fsS -m 5 "http://127.0.0.1:$port/metrics" 2>/dev/null)" &&
      grep -q '^http_requests_total' <<<"$text"; do
      [ "$SECONDS" -lt "$deadline" ] || return 1
      sleep 0.5
    done
  done
}
check "both pods' metrics are scraped on their metrics listener" metrics_scraped
check "the load balancer does not serve /metrics" \
  test "$(curl -sS -m 5 -o /dev/null -w '%{http_code}' "$LB/metrics")" = 404

cid() { compose -f "$MULTI" ps -q "$1"; }
# Both pods back in rotation: HAProxy needs `rise 2` passing checks per pod.
both_in_rotation() {
  local deadline=$((SECONDS + $1)) seen
  while [ "$SECONDS" -lt "$deadline" ]; do
    seen="$(for _ in 1 2 3 4; do curl -sS -m 2 -o /dev/null -D - "$LB/health" 2>/dev/null |
      tr -d '\r' | sed -n 's/^[Xx]-[Ss]erved-[Bb]y: //p'; done | sort -u | tr '\n' ' ')"
    [ "$seen" = "pod-1 pod-2 " ] && return 0
    sleep 0.5
  done
  return 1
}
both_in_rotation 60 || true

node_dir="$work/node"
mkdir -p "$node_dir"
log "Installing socket.io-client for the smoke test (npm)"
# Only what is missing: a Node.js that did not come from Debian must not meet its packages.
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"
cp scripts/docker/package.json "$node_dir/"
(cd "$node_dir" && npm install --silent --no-audit --no-fund >/dev/null 2>&1) ||
  die "npm install socket.io-client failed"
export SMOKE_LB="$LB" SMOKE_SEED="$work/seed.json" SMOKE_NODE_DIR="$node_dir" \
  SMOKE_KILL_FILE="$work/killed-at"
smoke() { node scripts/docker/smoke.js "$@"; }
# Background load: a simple command, so $! is node itself and SIGTERM reaches it.
load_start() { # load_start RATE SECONDS OUTFILE
  node scripts/docker/smoke.js load "$1" "$2" >"$3" 2>&1 &
  load_pid=$!
}

# 1. Round robin, and migrate once.
if out="$(smoke alternate 10)"; then
  ok "both pods answer through the load balancer, alternating: $out"
else
  not_ok "round robin through the load balancer: $out"
fi
migrate_runs="$(docker ps -a --filter "label=com.docker.compose.project=$PROJECT" \
  --filter label=com.docker.compose.service=migrate --filter label=com.docker.compose.oneoff=False -q | wc -l)"
migrate_state="$(docker inspect -f '{{.State.Status}} exit={{.State.ExitCode}} restarts={{.RestartCount}}' "$(cid migrate)")"
migrate_out="$(compose -f "$MULTI" logs --no-color migrate 2>/dev/null | grep -c '"migrated":true' || true)"
check "migrate ran once ($migrate_runs container, $migrate_state, printed migrated $migrate_out time(s))" \
  test "$migrate_runs/$migrate_state/$migrate_out" = "1/exited exit=0 restarts=0/1"

psql_count() {
  compose -f "$MULTI" exec -T postgres psql -U postgres -d switchboard -Atc "$1" | tr -d '\r'
}
migrations_applied="$(psql_count "SELECT count(*) FROM _sqlx_migrations")"
migrations_files="$(find migrations -name '*.sql' | wc -l)"
check "each migration applied exactly once ($migrations_applied rows for $migrations_files files)" \
  test "$migrations_applied" = "$migrations_files"

# 2. Demo data (the same command dev-up uses), a webhook, a socket event.
compose -f "$MULTI" run --rm --no-deps -T -e APP_ENV=development -e DEMO_MODE=true migrate admin seed-demo >"$work/seed.json" 2>"$work/seed.log" ||
  { cat "$work/seed.log" >&2; die "seed-demo failed"; }
compose -f "$MULTI" run --rm --no-deps -T -e APP_ENV=development -e DEMO_MODE=true migrate admin seed-demo >"$work/seed2.json" 2>>"$work/seed.log"
check "seed-demo in a container is idempotent (same JSON twice)" cmp -s "$work/seed.json" "$work/seed2.json"
org="$(json_leaves <"$work/seed.json" | sed -n 's/^org_id=//p')"
messages_before="$(psql_count "SELECT count(*) FROM messages WHERE org_id = '$org'")"
if sock="$(smoke webhook-socket)"; then
  ok "a signed Slack webhook is accepted and a Socket.IO client through the load balancer gets message_created: $sock"
else
  not_ok "webhook + socket event: $sock"
fi
wait_count() { # wait_count SQL WANT SECONDS
  local deadline=$((SECONDS + $3)) n=""
  while [ "$SECONDS" -lt "$deadline" ]; do
    n="$(psql_count "$1")"
    [ "$n" -ge "$2" ] 2>/dev/null && return 0
    sleep 0.5
  done
  echo "got $n" >&2
  return 1
}
check "the webhook became a message row" \
  wait_count "SELECT count(*) FROM messages WHERE org_id = '$org'" "$((messages_before + 1))" 30

# 3. A pod crashes. Not with `docker kill`: Docker records a killed container as stopped by
# hand and then never applies the restart policy (docs/OPERATIONS.md, "Docker"). A crash is
# the pod's process dying under Docker, here by a SIGKILL from outside as the OOM killer
# would send it.
pod1="$(cid pod-1)"
load_start 20 12 "$work/kill-load.json"
sleep 3
pid1="$(docker inspect -f '{{.State.Pid}}' "$pod1")"
log "Crashing pod-1 (SIGKILL to its process, pid $pid1 on this host)"
date +%s%3N >"$SMOKE_KILL_FILE"
kill -KILL "$pid1"
wait "$load_pid" || true
kill_load="$(cat "$work/kill-load.json")"
rm -f "$SMOKE_KILL_FILE"
# Only the webhooks in flight on the pod when it died may fail (never acknowledged, so the
# provider retries them); every other one must be accepted.
check "webhooks keep being accepted while a pod is down: $kill_load" \
  grep -q '"ok":true' "$work/kill-load.json"
restarts=""
for _ in $(seq 100); do
  restarts="$(docker inspect -f '{{.RestartCount}} {{.State.Status}}' "$pod1")"
  [ "$restarts" = "1 running" ] && break
  sleep 0.2
done
check "the restart policy brought pod-1 back ($restarts)" test "$restarts" = "1 running"
check "the load balancer uses pod-1 again" both_in_rotation 60

# 4. Rolling restart under load: each pod drains on SIGTERM (/ready turns 503, the load
# balancer takes it out, in-flight work finishes), exits 0, starts again and is ready.
# At most 120 s; stopped as soon as both pods are back.
load_start "$RATE" 120 "$work/roll-load.json"
sleep 3
grace="$(docker inspect -f '{{.Config.StopTimeout}}' "$pod1")"
stop_times=()
ready_times=()
for pod in pod-1 pod-2; do
  c="$(cid "$pod")"
  port="$([ "$pod" = pod-1 ] && echo "$SB_POD1_PORT" || echo "$SB_POD2_PORT")"
  s=$(date +%s%N)
  docker stop -t "${grace:-130}" "$c" >/dev/null
  stop_ms=$((($(date +%s%N) - s) / 1000000))
  exit_code="$(docker inspect -f '{{.State.ExitCode}}' "$c")"
  check "$pod stopped on SIGTERM in ${stop_ms} ms (stop_grace_period ${grace} s), exit code $exit_code" \
    test "$exit_code" = 0 -a "$stop_ms" -lt "$((${grace:-130} * 1000))"
  stop_times+=("$stop_ms")
  s=$(date +%s%N)
  docker start "$c" >/dev/null
  until curl -fsS -m 1 -o /dev/null "http://127.0.0.1:$port/ready" 2>/dev/null; do
    [ $((($(date +%s%N) - s) / 1000000)) -lt 30000 ] || break
    sleep 0.02
  done
  ready_at=$(date +%s%N)
  # From the container's own start (Docker's StartedAt), so the engine's set-up time on a
  # busy host is not counted as the image's; the whole `docker start` time is shown too.
  started_ns=$(date -d "$(docker inspect -f '{{.State.StartedAt}}' "$c")" +%s%N)
  ready_ms=$(((ready_at - started_ns) / 1000000))
  total_ms=$(((ready_at - s) / 1000000))
  ready_times+=("$ready_ms")
  check "$pod ready ${ready_ms} ms after its process started (under 1 s; ${total_ms} ms after docker start)" \
    test "$ready_ms" -lt 1000
  both_in_rotation 60 || not_ok "$pod back in rotation"
done
kill -TERM "$load_pid" 2>/dev/null || true
wait "$load_pid" || true
roll_load="$(cat "$work/roll-load.json")"
check "rolling restart of both pods at $RATE webhooks/s: no 5xx, no error: $roll_load" \
  grep -q '"ok":true' "$work/roll-load.json"

# 5. Down.
compose -f "$MULTI" down -v --remove-orphans >/dev/null 2>&1
COMPOSE_FILE_UP=""
left="$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" | wc -l) containers, $(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT" | wc -l) networks, $(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT" | wc -l) volumes"
check "down leaves nothing of the two-pod stack ($left)" test "$left" = "0 containers, 0 networks, 0 volumes"

# --- the one-pod stack ------------------------------------------------------------------------

step=$SECONDS
if up "$SINGLE" && wait_http "http://127.0.0.1:$SB_PORT/ready" 60; then
  ok "docker-compose.yml: one pod ready on :$SB_PORT ($(elapsed "$step"))"
else
  compose -f "$SINGLE" logs --no-color --tail 30 >&2 || true
  not_ok "docker-compose.yml did not come up"
fi
compose -f "$SINGLE" down -v --remove-orphans >/dev/null 2>&1
COMPOSE_FILE_UP=""
left="$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" | wc -l)"
check "down leaves no container of the one-pod stack" test "$left" = 0

# --- dev-up from a clone in a 0700 directory (native stack, the image's binary) -------------

step=$SECONDS
c="$(docker create "$IMAGE")"
docker cp "$c:/usr/local/bin/switchboard" "$work/switchboard" >/dev/null
docker rm "$c" >/dev/null
if SB_DEV_BIN="$work/switchboard" scripts/test-dev-up-private.sh >"$work/private.log" 2>&1; then
  ok "dev-up from a clone in a 0700 directory ($(elapsed "$step")): $(tail -n 1 "$work/private.log")"
else
  cat "$work/private.log"
  not_ok "dev-up from a clone in a 0700 directory"
fi

printf '\nimage %s: %s MB; build %s s; ready after start %s ms; SIGTERM stop %s ms; whole run %s s\n' \
  "$IMAGE" "$size_mb" "$build_secs" "${ready_times[*]}" "${stop_times[*]}" "$((SECONDS - t0))"
printf 'docker: %d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
