#!/usr/bin/env bash
# The expand/contract lint of migrations/ (docs/OPERATIONS.md, "Schema changes during a
# rolling deploy"); the rules are in scripts/check-migrations.py.
#
# Usage:
#   scripts/check-migrations.sh              the migrations new since the previous release
#                                            (scripts/lib-release.sh; SB_PREV_RELEASE=REV
#                                            overrides), and no edit to the ones it has
#   scripts/check-migrations.sh --base REV   the same against REV
#   scripts/check-migrations.sh --all        every migration: which ones would have needed an
#                                            allowance (the shipped ones are grandfathered)
#   scripts/check-migrations.sh --self-test  the lint's own tests (SQL that must pass or fail)
# Exits 1 when a migration needs an allowance it does not have, 2 when it cannot tell.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib-release.sh
. scripts/lib-release.sh

case "${1:-}" in
  --all | --self-test) exec python3 scripts/check-migrations.py "$1" ;;
  --base)
    [ -n "${2:-}" ] || {
      echo "usage: $0 [--base REV | --all | --self-test]" >&2
      exit 2
    }
    base=$(git rev-parse --verify "$2^{commit}") || exit 2
    ;;
  "") base=$(sb_prev_release) || exit 2 ;;
  *)
    echo "usage: $0 [--base REV | --all | --self-test]" >&2
    exit 2
    ;;
esac
exec python3 scripts/check-migrations.py --base "$base"
