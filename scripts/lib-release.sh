# shellcheck shell=bash
# The previous release, for the expand/contract checks (scripts/check-migrations.sh,
# scripts/test-expand-contract.sh): the code that runs on the new schema during a rolling
# deploy. Run from the checkout's root.
#
# SB_PREV_RELEASE=REV names it (a release tag, origin/main, …). Otherwise it is the commit
# before the newest migration arrived: the parent of the commit that added the newest file in
# migrations/, or HEAD when that file is not committed yet. Every migration the working tree
# has and that commit lacks is "new". Without release tags this is the closest thing to a
# release: the last code that ran without the newest schema change. A branch that adds
# migrations in several commits sees only the last one as new; give SB_PREV_RELEASE (e.g. the
# branch's merge base) to check them all.

# sb_newest_migration: the newest migrations/*.sql in the working tree (by name: the
# timestamp), or nothing.
sb_newest_migration() {
  local f newest=""
  for f in migrations/*.sql; do
    [ -e "$f" ] && newest=$f
  done
  printf '%s\n' "$newest"
}

# sb_prev_release: prints the previous release's full commit id; fails with a reason on stderr
# when there is none (no migration, a newest migration added by the root commit, a history too
# shallow to find it).
sb_prev_release() {
  local newest added
  if [ -n "${SB_PREV_RELEASE:-}" ]; then
    git rev-parse --verify -q "${SB_PREV_RELEASE}^{commit}" || {
      echo "SB_PREV_RELEASE=$SB_PREV_RELEASE is no commit here" >&2
      return 1
    }
    return 0
  fi
  newest=$(sb_newest_migration)
  if [ -z "$newest" ]; then
    echo "no migration in migrations/" >&2
    return 1
  fi
  if ! git cat-file -e "HEAD:$newest" 2>/dev/null; then
    # Not committed yet: everything committed is what runs before it.
    git rev-parse --verify HEAD
    return 0
  fi
  added=$(git log -1 --diff-filter=A --format=%H HEAD -- "$newest")
  if [ -z "$added" ]; then
    echo "cannot find the commit that added $newest" >&2
    return 1
  fi
  if ! git rev-parse --verify -q "$added^" 2>/dev/null; then
    if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
      echo "$newest came with $added, the oldest commit of a shallow clone: fetch more" \
        "history (git fetch --deepen=50) or set SB_PREV_RELEASE" >&2
    else
      echo "$newest came with the first commit ($added): there is no previous release" >&2
    fi
    return 1
  fi
}
