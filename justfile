# Everyday recipes. Each is a thin call into scripts/ (or cargo), so `just` is optional:
# run the script directly to get the same result.

# Recipe arguments reach the scripts as "$@", spaces intact.
set positional-arguments

# List the recipes.
default:
    @just --list

# Postgres, Redis, two pods and HAProxy on http://localhost:8080, seeded with a demo org.
up *args:
    scripts/dev-up.sh "$@"

# Stop the local stack (`just down --purge` also deletes .dev/).
down *args:
    scripts/dev-down.sh "$@"

# The whole test suite against its own throwaway Postgres and Redis.
test *args:
    scripts/test.sh "$@"

# Formatting and clippy, as CI runs them.
lint:
    cargo fmt --all -- --check && cargo clippy --workspace --all-targets -- -D warnings

# Webhook ingest benchmark.
bench *args:
    scripts/bench-ingest.sh "$@"

# The whole product (accept and process) against the Node peer, alternating rounds.
bench-e2e:
    scripts/bench-e2e.sh

# The Postgres floor: a processed event's rows with the fewest statements.
bench-floor:
    scripts/bench-floor.sh

# Backlog drain benchmark.
bench-drain:
    scripts/bench-drain.sh

# Release (F3) benchmark: release latency and release -> socket on the other pod.
bench-release:
    scripts/bench-release.sh

# Outbound dispatch benchmark: release -> provider call, against a fake provider.
bench-outbound:
    scripts/bench-outbound.sh
