#!/usr/bin/env bash
# Where the dev stack's Postgres spends its time, per processed event: statement execution,
# WAL and buffer pages from pg_stat_statements, and WAL totals from pg_stat_wal.
#
# Usage: scripts/bench-statements.sh reset     (before a benchmark run)
#        scripts/bench-statements.sh report N  (after it; N = the events it processed)
# pg_stat_statements must be loaded (shared_preload_libraries, then a Postgres restart);
# the script says so when it is not.
set -euo pipefail
# shellcheck source=scripts/dev-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/dev-lib.sh"

psql_dev() { PGOPTIONS="-c client_min_messages=warning" psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d switchboard -v ON_ERROR_STOP=1 "$@"; }
loaded=$(psql_dev -Atc "SELECT 'pg_stat_statements' = ANY(string_to_array(current_setting('shared_preload_libraries'), ', '))")
[ "$loaded" = t ] || die "pg_stat_statements is not loaded: ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements', restart Postgres"
psql_dev -Atqc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"

case "${1:-}" in
  reset)
    psql_dev -Atqc "SELECT pg_stat_statements_reset(); SELECT pg_stat_reset_shared('wal')" >/dev/null
    ;;
  report)
    n="${2:?the number of events processed}"
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number of events"
    psql_dev -v n="$n" <<'SQL'
SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 60) AS statement, calls,
       round((total_exec_time / :n * 1000)::numeric) AS exec_us_per_event,
       round(rows::numeric / calls, 1) AS rows_per_call,
       round(wal_records::numeric / :n, 1) AS wal_records_per_event,
       round(wal_bytes::numeric / :n) AS wal_bytes_per_event,
       round((shared_blks_hit + shared_blks_read)::numeric / :n, 1) AS pages_per_event
FROM pg_stat_statements WHERE total_exec_time > 200
ORDER BY total_exec_time DESC LIMIT 14;
SELECT round(wal_records::numeric / :n, 1) AS wal_records_per_event,
       round(wal_bytes::numeric / :n) AS wal_bytes_per_event,
       round(wal_fpi::numeric / :n, 2) AS full_pages_per_event, wal_sync, wal_write
FROM pg_stat_wal;
SQL
    ;;
  *) die "usage: scripts/bench-statements.sh reset | report N" ;;
esac
