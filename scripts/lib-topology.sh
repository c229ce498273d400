# shellcheck shell=bash
# Helpers for the test topologies beyond one plain Postgres and one plain Redis
# (SB_TOPOLOGY=tls-pooler and managed in scripts/test.sh, managed in scripts/dev-up.sh): a
# throwaway certificate authority, PgBouncer in front of Postgres, a TLS-only Redis, a TLS-only
# Redis Cluster with the control script tests use to fail it over, and a restart script for the
# test Postgres. Needs scripts/lib-services.sh sourced first.

# sb_wait_until SECONDS INTERVAL COMMAND...: runs COMMAND every INTERVAL seconds until it
# succeeds, for SECONDS at most (whole seconds); fails when it never did. Every wait below
# goes through it, so a caller only says what it waits for and what to report when it fails.
sb_wait_until() {
  local deadline=$((SECONDS + $1)) every=$2
  shift 2
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep "$every"
  done
}

# sb_gone PID: no such process any more.
sb_gone() {
  ! kill -0 "$1" 2>/dev/null
}

# sb_make_tls DIR [DAYS]: writes a CA (ca.key, ca.pem), a server key and certificate signed by
# it (server.key, server.pem) valid for 127.0.0.1 and localhost, a client key and certificate
# signed by it (client.key, client.pem: Redis Cluster nodes show it to each other on the
# cluster bus, where a certificate is always asked for), and a second, unrelated CA
# (other-ca.pem) for tests that check a wrong CA is refused. Certificates live for DAYS days (2
# unless given): long enough for any test run, short enough that a leaked one is worthless (the
# dev stack, which runs for longer, asks for more).
sb_make_tls() {
  local dir=$1 days=${2:-2} ca_ext server_ext client_ext
  command -v openssl >/dev/null 2>&1 || sb_apt_install openssl >/dev/null
  mkdir -p "$dir"
  # rustls (webpki) wants a real v3 CA and a leaf that says it is one; OpenSSL's defaults
  # depend on the local openssl.cnf, so every extension is spelled out.
  ca_ext=(-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign")
  server_ext="$dir/server.ext"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$server_ext"
  # P-256 keys: quick to generate, and every client and server here speaks them.
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
    -subj "/CN=Switchboard test CA" "${ca_ext[@]}" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
    -subj "/CN=Switchboard unrelated test CA" "${ca_ext[@]}" \
    -keyout "$dir/other-ca.key" -out "$dir/other-ca.pem" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days "$days" -extfile "$server_ext" \
    -out "$dir/server.pem" 2>/dev/null
  client_ext="$dir/client.ext"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=clientAuth" >"$client_ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=Switchboard test client" -keyout "$dir/client.key" -out "$dir/client.csr" 2>/dev/null
  openssl x509 -req -in "$dir/client.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days "$days" -extfile "$client_ext" \
    -out "$dir/client.pem" 2>/dev/null
  rm -f "$dir/server.csr" "$server_ext" "$dir/client.csr" "$client_ext"
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
  # -d returns once daemonised, which can be before the port listens (or before it finds the
  # port taken and exits): wait for both the process and the port.
  if sb_as_pg_user bash -c 'ulimit -S -n 4096 2>/dev/null; exec pgbouncer -d -q "$1"' pgbouncer "$ini" &&
    sb_wait_until 10 0.1 sb_pgbouncer_listening "$work/pgbouncer.pid" "$port"; then
    return 0
  fi
  echo "pgbouncer did not start on port $port:" >&2
  tail -n 20 "$work/pgbouncer.log" >&2 2>/dev/null || true
  return 1
}

# sb_pgbouncer_listening PIDFILE PORT: the process runs and its port takes connections.
sb_pgbouncer_listening() {
  kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null
}

# sb_stop_pgbouncer PIDFILE: immediate shutdown (SIGTERM), waiting until it is gone.
sb_stop_pgbouncer() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  sb_wait_until 5 0.1 sb_gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
}

# sb_start_redis_tls WORKDIR PORT TLSDIR: a Redis that speaks TLS only (the plain port is
# off), without client certificates; data, log and pidfile in WORKDIR. Returns once it answers.
sb_start_redis_tls() {
  local work=$1 port=$2 tls=$3
  redis-server --port 0 --tls-port "$port" --tls-cert-file "$tls/server.pem" \
    --tls-key-file "$tls/server.key" --tls-ca-cert-file "$tls/ca.pem" --tls-auth-clients no \
    --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize yes --dir "$work" --logfile "$work/redis.log" --pidfile "$work/redis.pid"
  sb_wait_until 10 0.1 redis-cli --tls --cacert "$tls/ca.pem" -h 127.0.0.1 -p "$port" ping \
    >/dev/null 2>&1 && return 0
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

# --- Redis Cluster (SB_TOPOLOGY=managed) ------------------------------------------------------
# A cluster lives in one folder: cluster.env (the CA its certificate is signed by and its
# nodes' ports, for the functions below) and, per node, a folder named by its port with
# redis.conf, nodes.conf (the cluster as the node knows it, kept by Redis), log, pidfile and
# data. Every node speaks TLS only, the cluster bus and replication included, and announces
# 127.0.0.1: clients are sent there by MOVED and CLUSTER SLOTS, which is why the server
# certificate names that IP. scripts/redis-cluster-ctl runs these functions from outside.

# sb_free_ports N [TAKEN...]: N distinct free ports, none of them one of TAKEN, one a line
# (sb_free_port alone can hand out a port twice: nothing listens on it until it is used).
sb_free_ports() {
  local n=$1 port taken count=0
  shift
  taken=" $* "
  while [ "$count" -lt "$n" ]; do
    port=$(sb_free_port)
    case "$taken" in *" $port "*) continue ;; esac
    taken+="$port "
    echo "$port"
    count=$((count + 1))
  done
}

# A value for redis.conf, double-quoted so that a path with spaces stays one argument.
sb_rc_quote() {
  local s=${1//\\/\\\\}
  printf '"%s"' "${s//\"/\\\"}"
}

# sb_redis_cluster_configure DIR TLSDIR PORT:BUSPORT...: writes the configuration of one node
# per PORT, with its cluster bus on BUSPORT (given rather than Redis' PORT+10000, which is past
# 65535 for high ports and nobody checked was free), and DIR/cluster.env. TLSDIR is
# sb_make_tls's. SB_REDIS_CLUSTER_NODE_TIMEOUT (ms, 2000) is how long a master may be
# unreachable before its replica takes over; SB_REDIS_CLUSTER_AOF=yes keeps an append-only
# file (the dev stack), otherwise nothing is persisted (tests). Starts nothing.
sb_redis_cluster_configure() {
  local dir=$1 tls=$2 spec port bus node ports=()
  shift 2
  mkdir -p "$dir"
  for spec in "$@"; do
    port=${spec%%:*}
    bus=${spec#*:}
    node="$dir/$port"
    mkdir -p "$node"
    cat >"$node/redis.conf" <<EOC
# Written by scripts/lib-topology.sh (sb_redis_cluster_configure).
bind 127.0.0.1
port 0
tls-port $port
tls-cert-file $(sb_rc_quote "$tls/server.pem")
tls-key-file $(sb_rc_quote "$tls/server.key")
tls-ca-cert-file $(sb_rc_quote "$tls/ca.pem")
# Clients (replicas included) show no certificate, as with a managed Redis. On the cluster bus
# a node always asks for one, and the server certificate is for servers only: this one is.
tls-auth-clients no
tls-client-cert-file $(sb_rc_quote "$tls/client.pem")
tls-client-key-file $(sb_rc_quote "$tls/client.key")
tls-replication yes
tls-cluster yes
cluster-enabled yes
cluster-port $bus
cluster-config-file $(sb_rc_quote "$node/nodes.conf")
cluster-announce-ip 127.0.0.1
cluster-node-timeout ${SB_REDIS_CLUSTER_NODE_TIMEOUT:-2000}
# A replica takes over however long it was cut off from its master: a test that kills a
# master must get a failover, not a cluster that stays down.
cluster-replica-validity-factor 0
# A restarted node resyncs from its new master at once rather than after 5 s.
repl-diskless-sync-delay 0
dir $(sb_rc_quote "$node")
logfile $(sb_rc_quote "$node/redis.log")
pidfile $(sb_rc_quote "$node/redis.pid")
daemonize yes
save ""
appendonly ${SB_REDIS_CLUSTER_AOF:-no}
EOC
    ports+=("$port")
  done
  {
    echo "# The Redis Cluster in this folder (scripts/lib-topology.sh)."
    printf 'SB_RC_CA=%q\n' "$tls/ca.pem"
    printf 'SB_RC_PORTS=(%s)\n' "${ports[*]}"
  } >"$dir/cluster.env"
}

# sb_rc_load DIR: reads DIR/cluster.env into SB_RC_CA and SB_RC_PORTS for the helpers below.
sb_rc_load() {
  if [ ! -f "$1/cluster.env" ]; then
    echo "no Redis Cluster is configured in $1" >&2
    return 1
  fi
  # shellcheck source=/dev/null
  . "$1/cluster.env"
}

# sb_rc_cli PORT ARGS...: redis-cli over TLS to the node on PORT, its replies without \r.
# Bounded in time: a node that hangs must not hang the caller.
sb_rc_cli() {
  local port=$1
  shift
  # shellcheck disable=SC2154 # SB_RC_CA comes from cluster.env
  timeout 10 redis-cli --tls --cacert "$SB_RC_CA" -h 127.0.0.1 -p "$port" "$@" | tr -d '\r'
}

# sb_rc_up PORT: the node on PORT answers.
sb_rc_up() {
  [ "$(sb_rc_cli "$1" ping 2>/dev/null)" = PONG ]
}

# sb_rc_serving PORT: the node says cluster_state:ok with every slot served.
sb_rc_serving() {
  local info
  info=$(sb_rc_cli "$1" cluster info 2>/dev/null) || return 1
  grep -qx 'cluster_state:ok' <<<"$info" && grep -qx 'cluster_slots_ok:16384' <<<"$info"
}

# sb_rc_synced PORT: the node is a master, or a replica whose link to its master is up.
sb_rc_synced() {
  local repl
  repl=$(sb_rc_cli "$1" info replication 2>/dev/null) || return 1
  grep -qx 'role:master' <<<"$repl" || grep -qx 'master_link_status:up' <<<"$repl"
}

# sb_rc_view PORT: the cluster as the node on PORT sees it (CLUSTER NODES), one node a line as
# "port id flags master-id slot-ranges", flags comma-separated (myself,master / slave /
# master,fail / slave,fail? ...).
sb_rc_view() {
  local nodes
  nodes=$(sb_rc_cli "$1" cluster nodes 2>/dev/null) || return 1
  [ -n "$nodes" ] || return 1
  awk 'NF >= 8 { split($2, a, "[:@,]"); print a[2], $1, $3, $4, NF - 8 }' <<<"$nodes"
}

# sb_rc_agree PORT...: the nodes on the PORTs agree on which master serves which slots (as
# `redis-cli --cluster check` wants): a node back from the dead still claims its old slots
# until it hears of the failover.
sb_rc_agree() {
  local port sig first=""
  for port in "$@"; do
    sig=$(sb_rc_cli "$port" cluster nodes 2>/dev/null |
      awk '{ f = "," $3 "," } f ~ /,master,/ && f !~ /,fail,/ && NF > 8 {
        s = $1; for (i = 9; i <= NF; i++) s = s " " $i; print s }' | sort) || return 1
    [ -n "$sig" ] || return 1
    if [ -z "$first" ]; then
      first=$sig
    elif [ "$sig" != "$first" ]; then
      return 1
    fi
  done
}

# sb_rc_any_view: sb_rc_view of the first configured node that answers.
sb_rc_any_view() {
  local port
  # shellcheck disable=SC2154 # SB_RC_PORTS comes from cluster.env
  for port in "${SB_RC_PORTS[@]}"; do
    sb_rc_view "$port" && return 0
  done
  echo "no node of the Redis Cluster (ports ${SB_RC_PORTS[*]}) answers" >&2
  return 1
}

# The ports of the masters in a view (stdin) that serve slots and are not failing, by port.
sb_rc_masters_of() {
  awk '{ f = "," $3 "," } f ~ /,master,/ && f !~ /,(fail\??|handshake|noaddr),/ && $5 > 0 { print $1 }' |
    sort -n
}

# sb_rc_whole PORT: the node serves every slot, knows every configured node, sees none of them
# failing or half-met, and is in sync if it is a replica.
sb_rc_whole() {
  local known view
  sb_rc_serving "$1" && sb_rc_synced "$1" || return 1
  known=$(sb_rc_cli "$1" cluster info | sed -n 's/^cluster_known_nodes://p')
  [ "$known" = "${#SB_RC_PORTS[@]}" ] || return 1
  view=$(sb_rc_view "$1") || return 1
  ! awk '{ print "," $3 "," }' <<<"$view" | grep -qE ',(fail\??|handshake|noaddr),'
}

# sb_rc_pid_alive PID: a live process (a killed one can linger as a zombie until reaped).
sb_rc_pid_alive() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# sb_rc_all_gone PID...: none of the processes is alive.
sb_rc_all_gone() {
  local pid
  for pid in "$@"; do
    ! sb_rc_pid_alive "$pid" || return 1
  done
}

# The node a failed wait looked at last, whose view a caller reports.
SB_RC_LAST=""

# sb_rc_report WHAT: WHAT, then how node SB_RC_LAST sees the cluster, on stderr.
sb_rc_report() {
  echo "$1; node $SB_RC_LAST says:" >&2
  sb_rc_cli "$SB_RC_LAST" cluster info >&2 2>/dev/null || true
  sb_rc_cli "$SB_RC_LAST" cluster nodes >&2 2>/dev/null || true
}

# sb_rc_all_whole: every configured node is whole (sb_rc_whole) and they agree.
sb_rc_all_whole() {
  local port
  for port in "${SB_RC_PORTS[@]}"; do
    SB_RC_LAST=$port
    sb_rc_whole "$port" || return 1
  done
  sb_rc_agree "${SB_RC_PORTS[@]}"
}

# sb_rc_failed_over ID PORT...: every node on the PORTs serves every slot, sees node ID failed
# and left without slots, and they agree. Until the failure is agreed on the nodes still say
# cluster_state:ok: what tells the failover is done is the dead master marked failed.
sb_rc_failed_over() {
  local id=$1 p
  shift
  for p in "$@"; do
    SB_RC_LAST=$p
    sb_rc_serving "$p" &&
      sb_rc_view "$p" | awk -v id="$id" '$2 == id && ("," $3 ",") ~ /,fail,/ && $5 == 0 { found = 1 }
        END { exit !found }' || return 1
  done
  sb_rc_agree "$@"
}

# sb_rc_rejoined PORT: the node on PORT is up and in sync with its master, every node that
# runs serves every slot and sees it, none failing of it, and they agree.
sb_rc_rejoined() {
  local port=$1 id p alive=()
  SB_RC_LAST=$port
  sb_rc_up "$port" && id=$(sb_rc_cli "$port" cluster myid) && [ -n "$id" ] &&
    sb_rc_synced "$port" || return 1
  for p in "${SB_RC_PORTS[@]}"; do
    [ "$p" = "$port" ] || sb_rc_up "$p" || continue
    alive+=("$p")
    sb_rc_serving "$p" &&
      sb_rc_view "$p" | awk -v id="$id" '$2 == id && ("," $3 ",") !~ /,(fail\??|handshake|noaddr),/ { found = 1 }
        END { exit !found }' || return 1
  done
  sb_rc_agree "${alive[@]}"
}

# sb_rc_now: seconds since the epoch with milliseconds, to report how long things took.
sb_rc_now() {
  date +%s.%3N
}

sb_rc_since() {
  awk -v a="$1" -v b="$(sb_rc_now)" 'BEGIN { printf "%.1f", b - a }'
}

# sb_redis_cluster_start DIR: starts every configured node that is not running, makes them one
# cluster the first time (`redis-cli --cluster create`, a replica per master; nodes that met
# before find each other again from their nodes.conf), and returns once every node says
# cluster_state:ok with all 16384 slots served, knows every other node, sees none failing, and
# every replica is in sync: within SB_REDIS_CLUSTER_START_TIMEOUT s (60).
sb_redis_cluster_start() {
  local dir=$1 port fresh=0 nodes=() start
  sb_rc_load "$dir" || return 1
  start=$(sb_rc_now)
  for port in "${SB_RC_PORTS[@]}"; do
    sb_rc_up "$port" || redis-server "$dir/$port/redis.conf" || return 1
  done
  for port in "${SB_RC_PORTS[@]}"; do
    if ! sb_wait_until 10 0.1 sb_rc_up "$port"; then
      echo "redis cluster node 127.0.0.1:$port did not start with TLS:" >&2
      tail -n 20 "$dir/$port/redis.log" >&2 2>/dev/null || true
      return 1
    fi
    if [ "$(sb_rc_cli "$port" cluster info | sed -n 's/^cluster_known_nodes://p')" = 1 ] &&
      [ "$(sb_rc_cli "$port" cluster info | sed -n 's/^cluster_slots_assigned://p')" = 0 ]; then
      fresh=$((fresh + 1))
    fi
    nodes+=("127.0.0.1:$port")
  done
  if [ "$fresh" = "${#SB_RC_PORTS[@]}" ]; then
    # The first half of the nodes become the masters; each gets one of the rest as replica.
    # Bounded: when the nodes cannot reach each other it waits for them to join forever.
    if ! timeout 60 redis-cli --tls --cacert "$SB_RC_CA" --cluster create "${nodes[@]}" \
      --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1; then
      echo "redis-cli --cluster create failed:" >&2
      tail -n 20 "$dir/create.log" >&2
      return 1
    fi
  elif [ "$fresh" != 0 ]; then
    echo "the Redis Cluster in $dir is half made ($fresh of ${#SB_RC_PORTS[@]} nodes know no other" \
      "node): stop it and remove the folder" >&2
    return 1
  fi
  if ! sb_wait_until "${SB_REDIS_CLUSTER_START_TIMEOUT:-60}" 0.2 sb_rc_all_whole; then
    sb_rc_report "the Redis Cluster in $dir is not ok after ${SB_REDIS_CLUSTER_START_TIMEOUT:-60} s"
    return 1
  fi
  echo "redis cluster: ${#SB_RC_PORTS[@]} nodes ok in $(sb_rc_since "$start") s" >&2
}

# sb_redis_cluster_masters DIR: the ports of the current masters, one a line, by port.
sb_redis_cluster_masters() {
  local view
  sb_rc_load "$1" || return 1
  view=$(sb_rc_any_view) || return 1
  sb_rc_masters_of <<<"$view"
}

# sb_redis_cluster_nodes DIR: CLUSTER NODES as the first node that answers sees it.
sb_redis_cluster_nodes() {
  local port
  sb_rc_load "$1" || return 1
  for port in "${SB_RC_PORTS[@]}"; do
    sb_rc_cli "$port" cluster nodes 2>/dev/null && return 0
  done
  echo "no node of the Redis Cluster in $1 answers" >&2
  return 1
}

# sb_redis_cluster_kill_master DIR [PORT]: SIGKILLs the master on PORT (default: the first, by
# port, of the masters with a live replica), then waits until every node still running sees it
# failed with its slots taken over (by its replica) and says cluster_state:ok with every slot
# served: within SB_REDIS_CLUSTER_FAILOVER_TIMEOUT s (20). Prints the killed port; fails when
# PORT is no such master (nothing is killed then) or the failover did not happen in time.
sb_redis_cluster_kill_master() {
  local dir=$1 port=${2:-} view candidates id pid p start survivors=()
  sb_rc_load "$dir" || return 1
  view=$(sb_rc_any_view) || return 1
  # Masters serving slots, not failing, with a replica that is not failing either.
  candidates=$(awk '{ f[NR] = "," $3 ","; id[NR] = $2; pt[NR] = $1; sl[NR] = $5 }
    f[NR] ~ /,slave,/ && f[NR] !~ /,(fail\??|handshake|noaddr),/ { r[$4] = 1 }
    END {
      for (i = 1; i <= NR; i++)
        if (f[i] ~ /,master,/ && f[i] !~ /,(fail\??|handshake|noaddr),/ && sl[i] > 0 && r[id[i]])
          print pt[i]
    }' <<<"$view" | sort -n)
  if [ -z "$port" ]; then
    port=$(head -n 1 <<<"$candidates")
    if [ -z "$port" ]; then
      echo "no master of the Redis Cluster has a replica to take over:" >&2
      printf '%s\n' "$view" >&2
      return 1
    fi
  elif ! grep -qx "$port" <<<"$candidates"; then
    echo "127.0.0.1:$port is not a master with a replica to take over; masters:" \
      "$(sb_rc_masters_of <<<"$view" | tr '\n' ' ')" >&2
    return 1
  fi
  id=$(awk -v p="$port" '$1 == p { print $2 }' <<<"$view")
  pid=$(sb_rc_cli "$port" info server | sed -n 's/^process_id://p')
  if [[ ! "$pid" =~ ^[0-9]+$ ]]; then
    echo "cannot find the process of the master on 127.0.0.1:$port" >&2
    return 1
  fi
  start=$(sb_rc_now)
  kill -KILL "$pid"
  sb_wait_until 5 0.1 sb_rc_all_gone "$pid" || true
  # Its pidfile would otherwise name a process that is gone, or later someone else's.
  rm -f "$dir/$port/redis.pid"
  for p in "${SB_RC_PORTS[@]}"; do
    [ "$p" = "$port" ] || ! sb_rc_up "$p" || survivors+=("$p")
  done
  if ! sb_wait_until "${SB_REDIS_CLUSTER_FAILOVER_TIMEOUT:-20}" 0.2 \
    sb_rc_failed_over "$id" "${survivors[@]}"; then
    sb_rc_report "no failover of 127.0.0.1:$port within ${SB_REDIS_CLUSTER_FAILOVER_TIMEOUT:-20} s"
    return 1
  fi
  echo "redis cluster: killed master 127.0.0.1:$port, failed over in $(sb_rc_since "$start") s;" \
    "masters now $(sb_redis_cluster_masters "$dir" | tr '\n' ' ')" >&2
  echo "$port"
}

# sb_redis_cluster_restart DIR PORT: starts the node on PORT again with its configuration and
# folder. From its nodes.conf it rejoins the cluster, as a replica of whoever took its slots.
# Returns once it is in sync with its master, every node that runs sees it and none failing
# of it, and all say cluster_state:ok: within SB_REDIS_CLUSTER_START_TIMEOUT s (60).
sb_redis_cluster_restart() {
  local dir=$1 port=$2 start
  sb_rc_load "$dir" || return 1
  if [ ! -f "$dir/$port/redis.conf" ]; then
    echo "no node 127.0.0.1:$port in the Redis Cluster in $dir" >&2
    return 1
  fi
  start=$(sb_rc_now)
  sb_rc_up "$port" || redis-server "$dir/$port/redis.conf" || return 1
  if ! sb_wait_until "${SB_REDIS_CLUSTER_START_TIMEOUT:-60}" 0.2 sb_rc_rejoined "$port"; then
    echo "127.0.0.1:$port did not rejoin the Redis Cluster within" \
      "${SB_REDIS_CLUSTER_START_TIMEOUT:-60} s:" >&2
    tail -n 20 "$dir/$port/redis.log" >&2 2>/dev/null || true
    return 1
  fi
  echo "redis cluster: 127.0.0.1:$port rejoined as $(sb_rc_cli "$port" info replication |
    sed -n 's/^role://p') in $(sb_rc_since "$start") s" >&2
}

# sb_redis_cluster_stop DIR: stops every node that runs, by its pidfile (SIGTERM: it flushes
# its append-only file, if any, and exits; SIGKILL for one still there after 10 s). Needs
# neither the CA nor cluster.env, and is quiet when there is nothing to stop.
sb_redis_cluster_stop() {
  local pidfile pid pids=()
  for pidfile in "$1"/*/redis.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null) || continue
    [[ "$pid" =~ ^[0-9]+$ ]] || continue
    # A stale pidfile's number may belong to another process by now.
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ] || continue
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  done
  sb_wait_until 10 0.1 sb_rc_all_gone "${pids[@]}" && return 0
  for pid in "${pids[@]}"; do
    ! sb_rc_pid_alive "$pid" || kill -KILL "$pid" 2>/dev/null || true
  done
  return 0
}

# sb_write_redis_cluster_ctl SCRIPT DIR: writes an executable that controls the cluster in DIR
# (scripts/redis-cluster-ctl DIR ...), so a test can fail it over without knowing where it
# lives: SCRIPT masters | kill-master [PORT] | restart PORT | stop (and start, nodes).
sb_write_redis_cluster_ctl() {
  local script=$1 dir ctl
  dir=$(cd "$2" && pwd)
  ctl="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/redis-cluster-ctl"
  {
    echo '#!/usr/bin/env bash'
    echo '# Controls the test Redis Cluster; written by scripts/test.sh (scripts/lib-topology.sh).'
    # shellcheck disable=SC2016 # "$@" is the written script's
    printf 'exec %q %q "$@"\n' "$ctl" "$dir"
  } >"$script"
  chmod 755 "$script"
}
