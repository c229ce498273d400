# shellcheck shell=bash
# Helpers for the test topologies beyond one plain Postgres and one plain Redis
# (SB_TOPOLOGY=tls-pooler in scripts/test.sh): a throwaway certificate authority, PgBouncer in
# front of Postgres, a TLS-only Redis, and a restart script for the test Postgres. Needs
# scripts/lib-services.sh sourced first.

# sb_make_tls DIR: writes a CA (ca.key, ca.pem), a server key and certificate signed by it
# (server.key, server.pem) valid for 127.0.0.1 and localhost, and a second, unrelated CA
# (other-ca.pem) for tests that check a wrong CA is refused. Certificates live for two days:
# long enough for any test run, short enough that a leaked one is worthless.
sb_make_tls() {
  local dir=$1 ca_ext server_ext
  mkdir -p "$dir"
  # rustls (webpki) wants a real v3 CA and a leaf that says it is one; OpenSSL's defaults
  # depend on the local openssl.cnf, so every extension is spelled out.
  ca_ext=(-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign")
  server_ext="$dir/server.ext"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$server_ext"
  # P-256 keys: quick to generate, and every client and server here speaks them.
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=Switchboard test CA" "${ca_ext[@]}" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=Switchboard unrelated test CA" "${ca_ext[@]}" \
    -keyout "$dir/other-ca.key" -out "$dir/other-ca.pem" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days 2 -extfile "$server_ext" \
    -out "$dir/server.pem" 2>/dev/null
  rm -f "$dir/server.csr" "$server_ext"
  chmod 644 "$dir"/*.pem
  # Postgres refuses a key that others can read or that belongs to another user; Postgres and
  # PgBouncer run as the Postgres user when we are root (Redis runs as root and reads anything).
  chmod 600 "$dir"/*.key
  if [ "$(id -u)" -eq 0 ]; then
    id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown -R postgres "$dir"
  fi
}

# sb_pg_tls_opts DIR: the server options that turn TLS on with sb_make_tls's certificate.
# Authentication stays trust: the tests are about the transport, not passwords.
sb_pg_tls_opts() {
  echo "-c ssl=on -c ssl_cert_file=$1/server.pem -c ssl_key_file=$1/server.key"
}

# sb_write_pg_restart SCRIPT DATADIR PORT LOGFILE: writes an executable that restarts the
# cluster sb_start_postgres started (as the Postgres user, with the same options and log), so
# a test can take the database away under running pods without knowing how it was started.
# Call it with the same SB_PG_OPTS as sb_start_postgres.
sb_write_pg_restart() {
  local script=$1 datadir=$2 port=$3 log=$4 bindir as_user=""
  bindir=$(sb_pg_bindir)
  [ "$(id -u)" -eq 0 ] && as_user="runuser -u postgres --"
  {
    echo '#!/usr/bin/env bash'
    echo '# Restarts the test PostgreSQL; written by scripts/test.sh (scripts/lib-topology.sh).'
    # -l: the restarted server must log to the file, not inherit the caller's stdout (a test
    # harness waiting for that pipe to close would wait for as long as Postgres runs).
    printf 'exec %s %q -D %q -l %q -m fast -w -t 60 -o %q restart\n' "$as_user" \
      "$bindir/pg_ctl" "$datadir" "$log" "$(sb_pg_opts "$datadir" "$port")"
  } >"$script"
  chmod 755 "$script"
}

# sb_start_pgbouncer WORKDIR PORT PG_PORT TLSDIR: PgBouncer in transaction pooling mode on
# 127.0.0.1:PORT in front of the Postgres on PG_PORT, TLS on both sides; config, log and
# pidfile in WORKDIR. Returns once it accepts connections.
sb_start_pgbouncer() {
  local work=$1 port=$2 pg_port=$3 tls=$4 ini i
  command -v pgbouncer >/dev/null 2>&1 || sb_apt_install pgbouncer >/dev/null
  ini="$work/pgbouncer.ini"
  cat >"$ini" <<EOF
[databases]
; Wildcard: every test database created later is reachable without a reload. No user=
; here: a forced user is a separate user per database, which max_user_connections would
; then count per database instead of in total.
* = host=127.0.0.1 port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
; No Unix socket: the default (/var/run/postgresql) is not ours to touch.
unix_socket_dir =
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid

; Like Postgres' trust, for the users in auth_file (only postgres, whom the tests use).
auth_type = trust
auth_file = $work/pgbouncer-users.txt
pool_mode = transaction
; sqlx sends it at startup; PgBouncer would refuse the connection otherwise.
ignore_startup_parameters = extra_float_digits

; Tests create a database each and run many pods in parallel: lots of clients, and a
; pool per database. The Postgres behind allows 400 connections; 300 for PgBouncer leaves
; room for the direct connections (creating databases, restarts, assertions). When the cap
; is reached PgBouncer closes idle connections of other pools to make room.
max_client_conn = 2000
default_pool_size = 40
max_user_connections = 300
; Connections to dropped test databases go away soon instead of piling up.
server_idle_timeout = 10
; After a Postgres restart, retry within a second rather than the default 15 s.
server_login_retry = 1
EOF
  # TLS on both sides unless no certificate folder is given (bench-pooler.sh measures the
  # pooler alone).
  if [ -n "$tls" ]; then
    cat >>"$ini" <<EOF
client_tls_sslmode = require
client_tls_cert_file = $tls/server.pem
client_tls_key_file = $tls/server.key
server_tls_sslmode = verify-full
server_tls_ca_file = $tls/ca.pem
EOF
  fi
  echo '"postgres" ""' >"$work/pgbouncer-users.txt"
  # PgBouncer refuses to run as root, so it runs as the Postgres user, who must be able to
  # write its log and pidfile here.
  [ "$(id -u)" -eq 0 ] && chown postgres "$work"
  # -q: its log goes to the logfile only, which is shown when it fails. The open-files limit
  # first: runuser's PAM session sets it to 1024, below what max_client_conn needs.
  # shellcheck disable=SC2016 # $1 is the inner shell's
  if sb_as_pg_user bash -c 'ulimit -S -n 4096 2>/dev/null; exec pgbouncer -d -q "$1"' pgbouncer "$ini"; then
    # -d returns once daemonised, which can be before the port listens (or before it
    # finds the port taken and exits): wait for both the process and the port.
    for ((i = 0; i < 100; i++)); do
      if kill -0 "$(cat "$work/pgbouncer.pid" 2>/dev/null)" 2>/dev/null &&
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        return 0
      fi
      sleep 0.1
    done
  fi
  echo "pgbouncer did not start on port $port:" >&2
  tail -n 20 "$work/pgbouncer.log" >&2 2>/dev/null || true
  return 1
}

# sb_stop_pgbouncer PIDFILE: immediate shutdown (SIGTERM), waiting until it is gone.
sb_stop_pgbouncer() {
  local pid i
  pid=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# sb_start_redis_tls WORKDIR PORT TLSDIR: a Redis that speaks TLS only (the plain port is
# off), without client certificates; data, log and pidfile in WORKDIR. Returns once it answers.
sb_start_redis_tls() {
  local work=$1 port=$2 tls=$3 i
  redis-server --port 0 --tls-port "$port" --tls-cert-file "$tls/server.pem" \
    --tls-key-file "$tls/server.key" --tls-ca-cert-file "$tls/ca.pem" --tls-auth-clients no \
    --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize yes --dir "$work" --logfile "$work/redis.log" --pidfile "$work/redis.pid"
  for ((i = 0; i < 100; i++)); do
    if redis-cli --tls --cacert "$tls/ca.pem" -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  echo "redis did not start with TLS on port $port:" >&2
  tail -n 20 "$work/redis.log" >&2 2>/dev/null || true
  return 1
}

# sb_stop_redis_tls PORT CAFILE PIDFILE: shuts the TLS Redis down; by its pidfile when the
# command cannot reach it (e.g. the CA is already gone).
sb_stop_redis_tls() {
  local pid
  redis-cli --tls --cacert "$2" -h 127.0.0.1 -p "$1" shutdown nosave >/dev/null 2>&1 && return 0
  pid=$(cat "$3" 2>/dev/null) || return 0
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
  return 0
}
