#!/bin/sh
# Entry point of the haproxy stand-in (haproxy.Dockerfile), as in the official image.
set -e
if [ "${1#-}" != "$1" ]; then set -- haproxy "$@"; fi
if [ "$1" = haproxy ]; then
  shift
  set -- haproxy -W -db "$@"
fi
exec "$@"
