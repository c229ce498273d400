#!/usr/bin/env bash
# dev-up from a clone in a directory that the postgres user cannot enter (a clone in root's
# home, which is 0700 on Debian): clones this checkout into a fresh 0700 directory, lays the
# work tree's uncommitted changes over it, runs scripts/dev-up.sh there natively on free
# ports, checks what a newcomer would (the summary, a login through the load balancer, a
# second run changing nothing), then scripts/dev-down.sh --purge.
#
# Building the binary in the clone would cost a cold release build, so it uses SB_DEV_BIN
# (a built switchboard binary, e.g. the one scripts/test-docker.sh takes out of the image)
# when set, else this checkout's own build (CARGO_TARGET_DIR=target, incremental).
# Called by scripts/test-docker.sh; runs on its own too. Not part of scripts/test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/lib-services.sh
. scripts/lib-services.sh

passed=0
failed=0
ok() {
  passed=$((passed + 1))
  printf 'ok: %s\n' "$*"
}
not_ok() {
  failed=$((failed + 1))
  printf 'FAILED: %s\n' "$*"
}

private="$(mktemp -d "${TMPDIR:-/tmp}/sb-private.XXXXXX")"
chmod 700 "$private"
clone="$private/switchboard"
cleanup() {
  local rc=$?
  set +e
  [ ! -x "$clone/scripts/dev-down.sh" ] || "$clone/scripts/dev-down.sh" --purge >/dev/null 2>&1
  rm -rf "$private"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

git clone --quiet "$ROOT" "$clone"
# What is not committed yet: modified and new files (not ignored ones), and deletions.
git ls-files -z --modified --others --exclude-standard |
  tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$clone" -xf -
git ls-files -z --deleted | (cd "$clone" && xargs -0 -r rm -f)

if [ "$(id -u)" -eq 0 ] && id postgres >/dev/null 2>&1; then
  if runuser -u postgres -- test -x "$private"; then
    not_ok "the postgres user can enter $private: this run proves nothing"
  else
    ok "the clone sits where the postgres user cannot enter ($private, 0700)"
  fi
fi

env_vars=(SB_NATIVE=1 SB_PG_PORT="$(sb_free_port)" SB_REDIS_PORT="$(sb_free_port)"
  SB_LB_PORT="$(sb_free_port)" SB_POD1_PORT="$(sb_free_port)" SB_POD2_PORT="$(sb_free_port)")
if [ -n "${SB_DEV_BIN:-}" ]; then
  mkdir -p "$private/target/release"
  cp "$SB_DEV_BIN" "$private/target/release/switchboard"
  env_vars+=(CARGO_TARGET_DIR="$private/target" SB_SKIP_BUILD=1)
else
  env_vars+=(CARGO_TARGET_DIR="$ROOT/target")
fi
lb_port="$(printf '%s\n' "${env_vars[@]}" | sed -n 's/^SB_LB_PORT=//p')"

if env "${env_vars[@]}" "$clone/scripts/dev-up.sh" >"$private/up.log" 2>&1; then
  ok "dev-up.sh runs from a clone in a 0700 directory"
else
  tail -n 30 "$private/up.log" >&2
  not_ok "dev-up.sh failed from a clone in a 0700 directory"
fi
summary="$(sed -n '/^Switchboard dev stack is up/,$p' "$private/up.log")"
printf '%s\n' "$summary" | sed 's/^/    /'
if printf '%s\n' "$summary" | grep -q 'webhooks/slack/'; then
  ok "it prints the load balancer, the pods, the demo users and each channel's webhook URL and secrets"
else
  not_ok "no summary"
fi

email="$(printf '%s\n' "$summary" | sed -n 's|^  admin  *\([^ ]*\) / .*|\1|p')"
password="$(printf '%s\n' "$summary" | sed -n 's|^  admin  *[^ ]* / \(.*\)|\1|p')"
status="$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$lb_port/auth/login" \
  -H 'content-type: application/json' \
  --data-binary "{\"email\":\"$email\",\"password\":\"$password\"}" || true)"
if [ "$status" = 200 ]; then
  ok "the printed admin logs in through the load balancer"
else
  not_ok "login as $email through the load balancer answered $status"
fi

# The cluster lives outside the checkout, where its user can reach it.
data="$(grep -o 'Initialising a Postgres cluster in [^ ]*' "$private/up.log" | sed 's/.* in //')"
case "$data" in
"$private"/* | "") not_ok "the Postgres cluster is inside the checkout (${data:-not said})" ;;
*) ok "the Postgres cluster lives outside the checkout ($data)" ;;
esac

if env "${env_vars[@]}" "$clone/scripts/dev-up.sh" >"$private/up2.log" 2>&1 &&
  [ "$(sed -n '/^Switchboard dev stack is up/,$p' "$private/up2.log")" = "$summary" ]; then
  ok "a second dev-up.sh starts nothing new and prints the same"
else
  tail -n 30 "$private/up2.log" >&2
  not_ok "a second dev-up.sh failed or printed something else"
fi

if "$clone/scripts/dev-down.sh" --purge >"$private/down.log" 2>&1 && [ ! -e "${data%/pg}" ]; then
  ok "dev-down.sh --purge stops the stack and deletes its cluster"
else
  cat "$private/down.log" >&2
  not_ok "dev-down.sh --purge"
fi

printf 'dev-up-private: %d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
