#!/usr/bin/env bash
# Makes sure a Docker engine answers. If none does: installs docker.io with apt when dockerd is
# missing (needs root), starts dockerd in the background and waits up to 60 s for it.
# Log of a dockerd started here: ${TIDEPOOL_DOCKERD_LOG:-/var/log/tidepool-dockerd.log}.
set -euo pipefail

log() { printf '[ensure-docker] %s\n' "$*" >&2; }
die() { printf '[ensure-docker] ERROR: %s\n' "$*" >&2; exit 1; }

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  if command -v docker >/dev/null; then
    die "docker does not answer and this is not root; start the engine (sudo systemctl start docker) or add $(id -un) to the docker group"
  fi
  die "no docker here and not root; install it: sudo apt-get install -y docker.io"
fi

if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
  command -v apt-get >/dev/null || die "dockerd is missing and apt-get is not available; install a Docker engine yourself"
  log "installing docker.io with apt-get"
  apt-get update -qq >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null || die "apt-get install docker.io failed"
fi

if pgrep -x dockerd >/dev/null; then
  log "dockerd is running but does not answer yet; waiting"
else
  LOG_FILE="${TIDEPOOL_DOCKERD_LOG:-/var/log/tidepool-dockerd.log}"
  log "starting dockerd (log: $LOG_FILE)"
  # setsid: the engine must outlive this script and the shell that called it.
  setsid nohup dockerd >>"$LOG_FILE" 2>&1 </dev/null &
fi

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    log "docker engine is up ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
    exit 0
  fi
  sleep 1
done
die "dockerd did not answer within 60 s; last lines of ${TIDEPOOL_DOCKERD_LOG:-/var/log/tidepool-dockerd.log}:
$(tail -n 20 "${TIDEPOOL_DOCKERD_LOG:-/var/log/tidepool-dockerd.log}" 2>/dev/null)"
