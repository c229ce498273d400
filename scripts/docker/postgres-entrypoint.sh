#!/bin/sh
# Entry point of the postgres stand-in (postgres.Dockerfile): initialises an empty PGDATA
# from POSTGRES_* the way the official image does, then runs the server as `postgres`.
set -eu
if [ "${1#-}" != "$1" ]; then set -- postgres "$@"; fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  find "$PGDATA" /var/run/postgresql \! -user postgres -exec chown postgres:postgres {} +
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
  if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
    echo "Error: the database is uninitialized and the superuser password is not specified." >&2
    echo "       Set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)." >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a word list, as in the official image
  initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" --auth-local=trust \
    --auth-host="$auth" ${POSTGRES_INITDB_ARGS:-} >/dev/null
  rm -f "$pwfile"
  printf 'host all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\"" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
  echo "PostgreSQL init process complete; ready for start up."
fi

exec "$@"
