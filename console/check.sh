#!/usr/bin/env bash
# The binary embeds console/dist (crates/api/src/console.rs), so `cargo build` never needs
# Node. This script keeps what is committed honest:
#
# - src/api-types.ts is generated (openapi-typescript) from openapi.json, the server's
#   OpenAPI document, which the Rust test
#   `operations::openapi::the_console_copy_of_the_document_is_current` keeps equal to what
#   /openapi.json serves (SB_WRITE_OPENAPI=1 rewrites it);
# - the sources type-check and their unit tests (vitest, src/*.test.ts) pass;
# - dist/ is what the sources build to.
#
#   console/check.sh          check (what scripts/test-browser.sh runs)
#   console/check.sh --write  regenerate src/api-types.ts and rebuild dist/ (then commit them)
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

out="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-console.XXXXXX")"
trap 'rm -rf "$out"' EXIT

generate() { npx --no-install openapi-typescript openapi.json --output "$1" >&2; }

if [ "${1:-}" = --write ]; then
  generate src/api-types.ts
  npx --no-install tsc --noEmit
  npx --no-install vitest run --silent
  npx --no-install vite build --logLevel warn
  echo "console/src/api-types.ts and console/dist rebuilt; commit them with the sources"
  exit 0
fi

generate "$out/api-types.ts"
if ! diff -u src/api-types.ts "$out/api-types.ts" >"$out/types.diff"; then
  head -n 20 "$out/types.diff" >&2
  echo "console/check.sh: console/src/api-types.ts does not match console/openapi.json; run console/check.sh --write and commit it" >&2
  exit 1
fi
npx --no-install tsc --noEmit
npx --no-install vitest run --silent
npx --no-install vite build --logLevel warn --outDir "$out/dist" --emptyOutDir
if ! diff -r dist "$out/dist" >/dev/null; then
  diff -r dist "$out/dist" | head -n 20 >&2 || true
  echo "console/check.sh: console/dist does not match console/src; run console/check.sh --write and commit dist/" >&2
  exit 1
fi
echo "console: api-types.ts matches openapi.json, tests pass, dist matches the sources"
