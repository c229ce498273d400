# shellcheck shell=bash
# A Redis watched by Sentinel (SB_TOPOLOGY=sentinel): a master, a replica and three sentinels,
# every one TLS only (replication, and the sentinels' links to the nodes and to each other,
# included), on 127.0.0.1. Sourced after lib-services.sh and lib-topology.sh (it uses
# sb_wait_until, sb_rc_quote and sb_rc_cli); scripts/redis-sentinel-ctl runs these functions
# from outside, for tests that fail the master over.
#
# A set lives in one folder: sentinel.env (the CA, the data nodes' and the sentinels' ports,
# the master's name) and, per process, a folder named by its port with its configuration,
# log, pidfile and data. Sentinels rewrite their own sentinel.conf, and the nodes' redis.conf
# (`replicaof`) when they move the master: each file is the process's own.

# The name the sentinels monitor the master under (REDIS_SENTINEL_MASTER).
SB_SENTINEL_MASTER=switchboard

# sb_rs_configure DIR TLSDIR NODE_PORT NODE_PORT SENTINEL_PORT SENTINEL_PORT SENTINEL_PORT:
# writes the set's files; the first node starts as the master, the second as its replica.
sb_rs_configure() {
  local dir=$1 tls=$2 master=$3 replica=$4 port conf
  shift 4
  mkdir -p "$dir"
  for port in "$master" "$replica"; do
    mkdir -p "$dir/$port"
    conf="$dir/$port/redis.conf"
    {
      echo "# Written by scripts/lib-sentinel.sh (sb_rs_configure); Sentinel rewrites replicaof."
      sb_rs_tls_conf "$port" "$tls"
      echo "repl-diskless-sync-delay 0"
      echo "save \"\""
      echo "appendonly no"
      sb_rs_process_conf "$dir/$port"
      [ "$port" = "$master" ] || echo "replicaof 127.0.0.1 $master"
    } >"$conf"
  done
  for port in "$@"; do
    mkdir -p "$dir/$port"
    {
      echo "# Written by scripts/lib-sentinel.sh (sb_rs_configure); the sentinel rewrites it."
      sb_rs_tls_conf "$port" "$tls"
      sb_rs_process_conf "$dir/$port"
      echo "sentinel monitor $SB_SENTINEL_MASTER 127.0.0.1 $master 2"
      echo "sentinel down-after-milliseconds $SB_SENTINEL_MASTER 1000"
      echo "sentinel failover-timeout $SB_SENTINEL_MASTER 2000"
      echo "sentinel parallel-syncs $SB_SENTINEL_MASTER 1"
    } >"$dir/$port/sentinel.conf"
  done
  {
    echo "# The Redis Sentinel set in this folder (scripts/lib-sentinel.sh)."
    printf 'SB_RC_CA=%q\n' "$tls/ca.pem"
    printf 'SB_RS_NODES=(%s)\n' "$master $replica"
    printf 'SB_RS_SENTINELS=(%s)\n' "$*"
  } >"$dir/sentinel.env"
}

# TLS only on PORT; clients (replicas and sentinels included) show no certificate, as with a
# managed Redis; replication and the sentinels' own links use TLS too.
sb_rs_tls_conf() {
  local port=$1 tls=$2
  cat <<EOC
bind 127.0.0.1
port 0
tls-port $port
tls-cert-file $(sb_rc_quote "$tls/server.pem")
tls-key-file $(sb_rc_quote "$tls/server.key")
tls-ca-cert-file $(sb_rc_quote "$tls/ca.pem")
tls-auth-clients no
tls-replication yes
EOC
}

sb_rs_process_conf() {
  local at=$1
  cat <<EOC
dir $(sb_rc_quote "$at")
logfile $(sb_rc_quote "$at/redis.log")
pidfile $(sb_rc_quote "$at/redis.pid")
daemonize yes
EOC
}

# sb_rs_load DIR: reads DIR/sentinel.env into SB_RC_CA, SB_RS_NODES and SB_RS_SENTINELS.
sb_rs_load() {
  if [ ! -f "$1/sentinel.env" ]; then
    echo "no Redis Sentinel set is configured in $1" >&2
    return 1
  fi
  # shellcheck source=/dev/null
  . "$1/sentinel.env"
}

# sb_rs_alive DIR PORT: the process of PORT (by its pidfile) runs.
sb_rs_alive() {
  local pid
  pid=$(cat "$1/$2/redis.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# sb_rs_master DIR: the port the sentinels name as the master now (the first that answers).
sb_rs_master() {
  local s out
  # shellcheck disable=SC2154 # from sentinel.env
  for s in "${SB_RS_SENTINELS[@]}"; do
    out=$(sb_rc_cli "$s" SENTINEL GET-MASTER-ADDR-BY-NAME "$SB_SENTINEL_MASTER" 2>/dev/null) || continue
    out=$(sed -n 2p <<<"$out")
    [ -n "$out" ] && {
      echo "$out"
      return 0
    }
  done
  return 1
}

# sb_rs_field NAME: the value after the line NAME in a SENTINEL MASTER reply on stdin.
sb_rs_field() {
  awk -v want="$1" 'found { print; exit } $0 == want { found = 1 }'
}

# sb_rs_whole DIR MASTER: every live node follows MASTER in sync, and every sentinel knows it
# as the master with the live replicas and the other two sentinels.
sb_rs_whole() {
  local dir=$1 master=$2 port live=0 s out
  for port in "${SB_RS_NODES[@]}"; do
    sb_rs_alive "$dir" "$port" || continue
    live=$((live + 1))
    [ "$port" = "$master" ] && continue
    out=$(sb_rc_cli "$port" INFO replication 2>/dev/null) || return 1
    grep -qx "master_port:$master" <<<"$out" && grep -qx 'master_link_status:up' <<<"$out" || return 1
  done
  for s in "${SB_RS_SENTINELS[@]}"; do
    out=$(sb_rc_cli "$s" SENTINEL MASTER "$SB_SENTINEL_MASTER" 2>/dev/null) || return 1
    [ "$(sb_rs_field port <<<"$out")" = "$master" ] &&
      [ "$(sb_rs_field num-slaves <<<"$out")" = $((live - 1)) ] &&
      [ "$(sb_rs_field num-other-sentinels <<<"$out")" = $((${#SB_RS_SENTINELS[@]} - 1)) ] &&
      [ "$(sb_rs_field flags <<<"$out")" = master ] || return 1
  done
}

# sb_rs_settled DIR: the set is whole around the master the sentinels name.
sb_rs_settled() {
  local master
  master=$(sb_rs_master "$1") || return 1
  sb_rs_whole "$1" "$master"
}

# sb_rs_report DIR: what the set looks like, for a failure message.
sb_rs_report() {
  local port
  for port in "${SB_RS_NODES[@]}"; do
    echo "node $port:" >&2
    sb_rc_cli "$port" ROLE 2>&1 | head -n 3 >&2 || true
    tail -n 5 "$1/$port/redis.log" >&2 2>/dev/null || true
  done
  for port in "${SB_RS_SENTINELS[@]}"; do
    echo "sentinel $port:" >&2
    tail -n 8 "$1/$port/redis.log" >&2 2>/dev/null || true
  done
}

# sb_redis_sentinel_start DIR: starts what is down (the nodes, then the sentinels) and waits
# until the set is whole (30 s at most).
sb_redis_sentinel_start() {
  local dir=$1 port
  sb_rs_load "$dir" || return 1
  for port in "${SB_RS_NODES[@]}"; do
    sb_rs_alive "$dir" "$port" || redis-server "$dir/$port/redis.conf"
  done
  for port in "${SB_RS_SENTINELS[@]}"; do
    sb_rs_alive "$dir" "$port" || redis-server "$dir/$port/sentinel.conf" --sentinel
  done
  sb_wait_until 30 0.2 sb_rs_settled "$dir" && return 0
  echo "the Redis Sentinel set in $dir did not settle:" >&2
  sb_rs_report "$dir"
  return 1
}

# sb_rs_promoted DIR OLD: a node other than OLD is named master and says it is one; its port.
sb_rs_promoted() {
  local master
  master=$(sb_rs_master "$1") || return 1
  [ "$master" != "$2" ] || return 1
  sb_rc_cli "$master" ROLE 2>/dev/null | head -n 1 | grep -qx master || return 1
  echo "$master"
}

# sb_redis_sentinel_failover DIR: SENTINEL FAILOVER; returns once the replica is promoted and
# the old master follows it in sync, printing the new master's port.
sb_redis_sentinel_failover() {
  local dir=$1 old s
  sb_rs_load "$dir" || return 1
  old=$(sb_rs_master "$dir") || return 1
  s=${SB_RS_SENTINELS[0]}
  # Right after a previous failover the sentinels refuse another for a while: ask again.
  if ! sb_wait_until 30 0.5 sb_rs_failover_started "$s"; then
    echo "SENTINEL FAILOVER did not start" >&2
    return 1
  fi
  sb_rs_wait_promoted "$dir" "$old" || return 1
}

# sb_rs_failover_started SENTINEL: asks SENTINEL to fail the master over; whether it started.
sb_rs_failover_started() {
  [ "$(sb_rc_cli "$1" SENTINEL FAILOVER "$SB_SENTINEL_MASTER" 2>/dev/null)" = OK ]
}

# sb_rs_wait_promoted DIR OLD [alone]: waits (30 s at most) for a master in place of OLD and for the
# set to be whole around it (not with `alone`: a killed master is not back to follow it);
# prints its port.
sb_rs_wait_promoted() {
  local dir=$1 old=$2 new=""
  if sb_wait_until 30 0.2 sb_rs_promoted "$dir" "$old" >/dev/null; then
    new=$(sb_rs_promoted "$dir" "$old")
  fi
  if [ -z "$new" ]; then
    echo "the sentinels promoted no replica in place of $old:" >&2
    sb_rs_report "$dir"
    return 1
  fi
  if [ "${3:-whole}" = whole ] && ! sb_wait_until 30 0.2 sb_rs_whole "$dir" "$new"; then
    echo "the set did not settle around the new master $new:" >&2
    sb_rs_report "$dir"
    return 1
  fi
  echo "$new"
}

# sb_redis_sentinel_kill_master DIR: SIGKILLs the master, returns once the sentinels promoted
# its replica and it writes; prints the killed port (for restart).
sb_redis_sentinel_kill_master() {
  local dir=$1 old pid
  sb_rs_load "$dir" || return 1
  old=$(sb_rs_master "$dir") || return 1
  pid=$(cat "$dir/$old/redis.pid")
  kill -KILL "$pid"
  sb_wait_until 5 0.1 sb_gone "$pid" || return 1
  rm -f "$dir/$old/redis.pid"
  sb_rs_wait_promoted "$dir" "$old" alone >/dev/null || return 1
  echo "$old"
}

# sb_redis_sentinel_restart DIR PORT: starts a killed node again; the sentinels make it a
# replica of the current master. Returns once the set is whole.
sb_redis_sentinel_restart() {
  local dir=$1 port=$2
  sb_rs_load "$dir" || return 1
  sb_rs_alive "$dir" "$port" || redis-server "$dir/$port/redis.conf"
  sb_wait_until 30 0.2 sb_rs_settled "$dir" && return 0
  echo "node $port did not rejoin the set:" >&2
  sb_rs_report "$dir"
  return 1
}

# sb_redis_sentinel_stop DIR: stops every process of the set, by pidfile.
sb_redis_sentinel_stop() {
  local dir=$1 port pid
  sb_rs_load "$dir" 2>/dev/null || return 0
  for port in "${SB_RS_SENTINELS[@]}" "${SB_RS_NODES[@]}"; do
    pid=$(cat "$dir/$port/redis.pid" 2>/dev/null) || continue
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
  done
  for port in "${SB_RS_SENTINELS[@]}" "${SB_RS_NODES[@]}"; do
    pid=$(cat "$dir/$port/redis.pid" 2>/dev/null) || continue
    sb_wait_until 10 0.1 sb_gone "$pid" || kill -KILL "$pid" 2>/dev/null
  done
  return 0
}

# sb_write_redis_sentinel_ctl SCRIPT DIR: writes an executable that controls the set in DIR
# (scripts/redis-sentinel-ctl DIR ...), what tests get as SB_TEST_REDIS_SENTINEL_CTL.
sb_write_redis_sentinel_ctl() {
  local script=$1 dir ctl
  dir=$(cd "$2" && pwd)
  ctl="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/redis-sentinel-ctl"
  {
    echo '#!/usr/bin/env bash'
    echo '# Controls the test Redis Sentinel set; written by scripts/lib-sentinel.sh.'
    # shellcheck disable=SC2016 # "$@" is the written script's
    printf 'exec %q %q "$@"\n' "$ctl" "$dir"
  } >"$script"
  chmod 755 "$script"
}
