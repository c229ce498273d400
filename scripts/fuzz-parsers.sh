#!/usr/bin/env bash
# Runs the parser property tests (issue 24, item 8) long: the Slack, Twilio, Telegram and
# email webhook parsers, the email HTML-to-text conversion, Twilio's form decoding and the
# Socket.IO handshake's auth, each fed arbitrary bytes and edits of valid payloads, and
# required never to panic and to answer each input within a time bound. `cargo test` runs
# the same properties with 64 cases from a fixed seed; this runs a release build with many
# more cases from a fresh seed each time. No Postgres or Redis is needed.
#
# Usage: scripts/fuzz-parsers.sh [extra `cargo test` arguments, e.g. -- --nocapture]
#   PROPTEST_CASES     cases per property (default 20000)
#   PROPTEST_RNG_SEED  the seed (default: a random one). The seed is printed first; running
#                      again with it and the same PROPTEST_CASES replays the same inputs,
#                      and a failing property prints its input, shrunk.
set -euo pipefail
cd "$(dirname "$0")/.."

cases="${PROPTEST_CASES:-20000}"
seed="${PROPTEST_RNG_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
replay="PROPTEST_CASES=$cases PROPTEST_RNG_SEED=$seed scripts/fuzz-parsers.sh"
echo "fuzz-parsers: $cases cases per property, seed $seed"
trap 'echo "fuzz-parsers: FAILED; replay with: $replay" >&2' ERR

started=$SECONDS
PROPTEST_CASES="$cases" PROPTEST_RNG_SEED="$seed" \
    cargo test --release -p switchboard-channels -p switchboard-realtime proptest "$@"
echo "fuzz-parsers: passed in $((SECONDS - started)) s ($replay)"
