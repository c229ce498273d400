#!/bin/sh
# Entry point of the redis stand-in (redis.Dockerfile), after the official image's.
set -eu
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then set -- redis-server "$@"; fi

if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
  find . \! -user redis -exec chown redis:redis {} +
  exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi

# Debian's build defaults to protected mode on; the official one to off.
if [ "$1" = redis-server ]; then
  case " $* " in
  *" --protected-mode "*) ;;
  *) set -- "$@" --protected-mode no ;;
  esac
fi
exec "$@"
