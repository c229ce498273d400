#!/bin/sh
# Run inside a fresh `debootstrap --variant=minbase` tree (chroot) by
# scripts/docker-base-images.sh: the steps that turn it into a "slim" image the way Debian's
# official images are made (debuerreotype's slimify and docker tweaks), with the same
# sources. $1: the Debian mirror, $2: the security mirror ("" for none).
set -eu
mirror=$1
security=${2:-}

# dpkg leaves out documentation, man pages and translations from now on...
cat >/etc/dpkg/dpkg.cfg.d/docker <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
# ...and apt keeps no caches or translations in the image.
cat >/etc/apt/apt.conf.d/docker-clean <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
echo 'Acquire::Languages "none";' >/etc/apt/apt.conf.d/docker-no-languages
echo 'Acquire::GzipIndexes "true";' >/etc/apt/apt.conf.d/docker-gzip-indexes
echo 'Apt::AutoRemove::SuggestsImportant "false";' >/etc/apt/apt.conf.d/docker-autoremove-suggests

# What debootstrap already installed of the excluded paths.
find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
rm -rf /usr/share/man/* /usr/share/groff/* /usr/share/info/* /usr/share/lintian/* \
  /usr/share/linda/*
find /usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +

rm -f /etc/apt/sources.list
{
  printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\n' "$mirror"
  printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
  if [ -n "$security" ]; then
    printf '\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\n' "$security"
    printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
  fi
} >/etc/apt/sources.list.d/debian.sources

apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/lib/dpkg/*-old \
  /var/log/apt/* /var/log/dpkg.log /var/log/bootstrap.log /var/log/alternatives.log
# The image's identity comes from the container runtime.
: >/etc/hostname
: >/etc/resolv.conf
rm -f /etc/machine-id /var/lib/dbus/machine-id
: >/etc/machine-id
