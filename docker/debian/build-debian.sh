#!/usr/bin/env bash
# Produces the local Debian base image tidepool/debian:bookworm.
#
# Order of preference: the image already exists -> nothing to do; a cached rootfs tarball ->
# docker import; a registry answers -> pull debian:bookworm-slim and tag it; otherwise
# debootstrap a minbase bookworm from the Debian mirror, cache the tarball, docker import.
#
# Environment: TIDEPOOL_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#              TIDEPOOL_CACHE_DIR (default /var/cache/tidepool, else ~/.cache/tidepool).
set -euo pipefail

IMAGE="${TIDEPOOL_DEBIAN_IMAGE:-tidepool/debian:bookworm}" # override only to test the script
MIRROR="${TIDEPOOL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { printf '[debian] %s\n' "$*" >&2; }
die() { printf '[debian] ERROR: %s\n' "$*" >&2; exit 1; }

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE exists"
  exit 0
fi

if [[ -n "${TIDEPOOL_CACHE_DIR:-}" ]]; then CACHE_DIR="$TIDEPOOL_CACHE_DIR"
elif mkdir -p /var/cache/tidepool 2>/dev/null && [[ -w /var/cache/tidepool ]]; then CACHE_DIR=/var/cache/tidepool
else CACHE_DIR="$HOME/.cache/tidepool"; fi
TARBALL="$CACHE_DIR/debian-bookworm-minbase.tar.gz"
mkdir -p "$CACHE_DIR"

import_tarball() {
  log "importing $TARBALL as $IMAGE"
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["bash"]' \
    --message "tidepool debootstrap bookworm minbase" \
    "$TARBALL" "$IMAGE" >/dev/null
}

if [[ -s "$TARBALL" ]]; then
  import_tarball
  exit 0
fi

if timeout 120 docker pull debian:bookworm-slim >/dev/null 2>&1; then
  log "pulled debian:bookworm-slim from a registry"
  docker tag debian:bookworm-slim "$IMAGE"
  exit 0
fi
log "no registry answers; building the rootfs with debootstrap from $MIRROR (a few minutes)"

[[ $EUID -eq 0 ]] || die "debootstrap needs root (or pre-build $IMAGE on this machine)"
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
    || die "apt-get install debootstrap failed"
fi

ROOTFS="$(mktemp -d "$CACHE_DIR/rootfs-build.XXXXXX")"
trap 'rm -rf "$ROOTFS" "$TARBALL.part"' EXIT
debootstrap --variant=minbase --include=ca-certificates bookworm "$ROOTFS" "$MIRROR" >&2 \
  || die "debootstrap failed (see the output above); is $MIRROR reachable?"
# Keep the image lean and free of host-specific state.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/*.log
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
  "$MIRROR" "$MIRROR" >"$ROOTFS/etc/apt/sources.list"
: >"$ROOTFS/etc/hostname"
tar --numeric-owner --xattrs -C "$ROOTFS" -czf "$TARBALL.part" .
mv "$TARBALL.part" "$TARBALL"
import_tarball
log "$IMAGE built from debootstrap (tarball cached at $TARBALL)"
