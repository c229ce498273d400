#!/usr/bin/env bash
# The binary embeds console/dist (crates/api/src/console.rs), so `cargo build` never needs
# Node. This script keeps dist/ honest: it type-checks the sources, builds them into a
# temporary folder and fails if that differs from the committed dist/.
#
#   console/check.sh          check (what scripts/test-browser.sh runs)
#   console/check.sh --write  rebuild dist/ in place (then commit it)
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null 2>&1; then
  echo "console/check.sh: npm is missing; installing nodejs and npm" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >&2
fi

# The exact versions of package-lock.json, installed again only when the lock changed.
stamp=node_modules/.lock-sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
  echo "$want" >"$stamp"
fi

npx --no-install tsc --noEmit

if [ "${1:-}" = --write ]; then
  npx --no-install vite build --logLevel warn
  echo "console/dist rebuilt; commit it with the sources"
  exit 0
fi

out="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-console.XXXXXX")"
trap 'rm -rf "$out"' EXIT
npx --no-install vite build --logLevel warn --outDir "$out" --emptyOutDir
if ! diff -r dist "$out" >/dev/null; then
  diff -r dist "$out" | head -n 20 >&2 || true
  echo "console/check.sh: console/dist does not match console/src; run console/check.sh --write and commit dist/" >&2
  exit 1
fi
echo "console/dist matches its sources"
