#!/usr/bin/env bash
# Makes sure every base image that the Dockerfile and the compose files name exists in the
# local Docker engine: already there, else pulled, else (no registry answers, as on our CI
# machines) built here as a stand-in under the official name, so the files run unchanged:
#
#   debian:bookworm-slim   debootstrap --variant=minbase, slimmed the way the official image is
#   rust:1-bookworm        that + gcc, this machine's own Rust toolchain (nothing downloaded)
#                          and the certificate authorities it adds to Debian's
#   postgres:*, redis:*, haproxy:*   that + Debian's packages, keeping the official images'
#                          contracts our files rely on (scripts/docker/*.Dockerfile say which)
#
# Stand-ins carry the label org.switchboard.stand-in. Debian packages come from the mirror
# this machine's apt uses. Usage: scripts/docker-base-images.sh [--stand-ins]
# (--stand-ins, or SB_STAND_INS=1: do not try the registry).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '==> %s\n' "$*"; }
die() {
  printf '%s: %s\n' "${0##*/}" "$*" >&2
  exit 1
}

try_registry=1
[ "${1:-}" != --stand-ins ] && [ "${SB_STAND_INS:-0}" != 1 ] || try_registry=0

# The base images our files name, debian first: the other stand-ins are built from it.
wanted() {
  {
    sed -n 's/^FROM \([^ ]*\).*/\1/p' Dockerfile
    sed -n 's/^ *image: *\([^ ]*\).*/\1/p' docker-compose.yml docker-compose.multi-pod.yml
  } | grep -v '^switchboard:' | sort -u |
    awk '/^debian:/ { print; next } { rest[++n] = $0 } END { for (i = 1; i <= n; i++) print rest[i] }'
}

present() { docker image inspect "$1" >/dev/null 2>&1; }

# The Debian (and security) mirror that this machine's apt uses, from `apt-cache policy`.
apt_mirror() {
  local suite=$1
  apt-cache policy 2>/dev/null |
    awk -v suite="$suite/main" '$3 == suite && $5 == "Packages" { print $2; exit }'
}

tmp="$(mktemp -d "${TMPDIR:-/tmp}/sb-base-images.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

stand_in_debian() {
  local name=$1 mirror security root="$tmp/rootfs"
  command -v debootstrap >/dev/null || {
    log "Installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  mirror="${SB_DEBIAN_MIRROR:-$(apt_mirror bookworm)}"
  [ -n "$mirror" ] || mirror="$(apt_mirror "$(. /etc/os-release && echo "$VERSION_CODENAME")")"
  [ -n "$mirror" ] || die "no Debian mirror in apt's sources (set SB_DEBIAN_MIRROR)"
  security="${SB_DEBIAN_SECURITY_MIRROR:-$(apt_mirror bookworm-security)}"
  log "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1 || {
    tail -n 20 "$tmp/debootstrap.log" >&2
    die "debootstrap failed"
  }
  cp scripts/docker/debian-slim.sh "$root/tmp/slim.sh"
  chroot "$root" /bin/sh /tmp/slim.sh "$mirror" "$security"
  rm -f "$root/tmp/slim.sh"
  tar --numeric-owner -C "$root" -c . |
    docker import --change 'CMD ["bash"]' \
      --change "LABEL org.switchboard.stand-in=$name" - "$name" >/dev/null
  rm -rf "$root"
}

stand_in_rust() {
  local name=$1 sysroot ctx="$tmp/rust"
  command -v rustc >/dev/null || die "rustc is not on PATH: the rust stand-in copies this machine's toolchain"
  sysroot="$(rustc --print sysroot)"
  mkdir -p "$ctx/toolchain"
  # The compiler, cargo and the standard library; not the documentation.
  cp -a "$sysroot/bin" "$sysroot/lib" "$ctx/toolchain/"
  [ ! -d "$sysroot/libexec" ] || cp -a "$sysroot/libexec" "$ctx/toolchain/"
  [ -x "$ctx/toolchain/bin/cargo" ] || die "no cargo in $sysroot/bin"
  mkdir -p "$ctx/extra-ca"
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$ctx/extra-ca/" \; 2>/dev/null || true
  cp scripts/docker/rust.Dockerfile "$ctx/Dockerfile"
  docker build -q -t "$name" "$ctx" >/dev/null
  rm -rf "$ctx"
}

stand_in_packaged() {
  local name=$1 kind=$2 ctx="$tmp/$2"
  mkdir -p "$ctx"
  cp "scripts/docker/$kind.Dockerfile" "$ctx/Dockerfile"
  cp "scripts/docker/$kind-entrypoint.sh" "$ctx/"
  docker build -q -t "$name" "$ctx" >/dev/null
}

for image in $(wanted); do
  if present "$image"; then
    log "$image: present"
    continue
  fi
  if [ "$try_registry" = 1 ]; then
    if timeout 120 docker pull -q "$image" >"$tmp/pull.log" 2>&1; then
      log "$image: pulled"
      continue
    fi
    log "$image: no registry answers ($(tail -n 1 "$tmp/pull.log")); building stand-ins"
    try_registry=0
  fi
  started=$SECONDS
  case "${image%%:*}" in
  debian) stand_in_debian "$image" ;;
  rust) stand_in_rust "$image" ;;
  postgres | redis | haproxy) stand_in_packaged "$image" "${image%%:*}" ;;
  *) die "no stand-in recipe for $image" ;;
  esac
  log "$image: stand-in built ($((SECONDS - started)) s, $(docker image inspect -f '{{.Size}}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
done
