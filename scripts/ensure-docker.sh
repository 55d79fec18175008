#!/usr/bin/env bash
# Makes sure a Docker engine answers. If none does: installs docker.io with apt when dockerd is
# missing (needs root), starts dockerd in the background and waits up to 60 s for it.
# Log of a dockerd started here: ${TIDEPOOL_DOCKERD_LOG:-/var/log/tidepool-dockerd.log}.
# When crun is installed (scripts/bootstrap.sh installs Debian's), it is registered with the engine as runtime
# `crun` (/etc/docker/daemon.json "runtimes"; a running engine reloads it on SIGHUP, its containers untouched):
# sandboxes start under it by default (TIDEPOOL_CONTAINER_RUNTIME=auto).
set -euo pipefail

log() { printf '[ensure-docker] %s\n' "$*" >&2; }
die() { printf '[ensure-docker] ERROR: %s\n' "$*" >&2; exit 1; }

# Adds runtime `crun` to /etc/docker/daemon.json; succeeds (prints "added") only when the file changed.
register_crun() {
  local crun
  crun="$(command -v crun)" || return 1
  mkdir -p /etc/docker
  node - "$crun" <<'EOF_NODE'
const fs = require('node:fs');
const file = '/etc/docker/daemon.json';
let config = {};
if (fs.existsSync(file)) {
  const text = fs.readFileSync(file, 'utf8').trim();
  try { config = text ? JSON.parse(text) : {}; } catch (error) { console.error(`${file} is not valid JSON: ${error.message}`); process.exit(1); }
}
if (config.runtimes?.crun?.path === process.argv[2]) process.exit(0);
config.runtimes = { ...(config.runtimes ?? {}), crun: { path: process.argv[2] } };
fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
console.log('added');
EOF_NODE
}

# Root with crun installed and node to edit the file: register it; a running engine reloads its runtimes on SIGHUP.
maybe_register_crun() {
  [[ $EUID -eq 0 ]] && command -v crun >/dev/null && command -v node >/dev/null || return 0
  local changed
  changed="$(register_crun)" || { log "could not register crun in /etc/docker/daemon.json; sandboxes use the engine's default runtime"; return 0; }
  [[ "$changed" == added ]] || return 0
  log "registered crun in /etc/docker/daemon.json"
  local pid
  pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
  # A stale pid file may name another process by now: only a dockerd is signalled.
  [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == dockerd ]] || pid="$(pgrep -xo dockerd || true)"
  if [[ -n "$pid" ]]; then
    kill -HUP "$pid" || log "could not signal dockerd: reload it yourself (kill -HUP <dockerd pid>) to use crun"
    for _ in $(seq 1 20); do
      docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' 2>/dev/null | grep -qw crun && return 0
      sleep 0.25
    done
    log "dockerd did not pick up crun after SIGHUP; sandboxes use the engine's default runtime until it restarts"
  fi
}

# crun refuses every container on a host with cgroups in hybrid mode (v1 hierarchies plus cgroup2 at
# /sys/fs/cgroup/unified) while the v2 hierarchy holds a controller ("drop all controllers from cgroupv2"): on such
# hosts a controller no v1 hierarchy has (often hugetlb) sits in v2 unused. Mounting it as a v1 hierarchy of its own
# (what runc then uses too) empties v2; only done when nothing in v2 enables a controller (subtree_control empty).
hybrid_cgroups_for_crun() {
  [[ $EUID -eq 0 ]] && command -v crun >/dev/null || return 0
  [[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" == tmpfs && "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" == cgroup2fs ]] || return 0
  local controllers
  controllers="$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null || true)"
  [[ -n "$controllers" ]] || return 0
  if [[ -n "$(cat /sys/fs/cgroup/unified/cgroup.subtree_control 2>/dev/null || true)" ]]; then
    log "cgroups in hybrid mode with controllers in use in v2 ($controllers): crun cannot run here; sandboxes use runc"
    return 0
  fi
  local controller
  for controller in $controllers; do
    mkdir -p "/sys/fs/cgroup/$controller" && mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller" \
      && log "mounted the $controller cgroup controller as a v1 hierarchy (crun refuses hybrid cgroups with controllers in v2)" \
      || log "could not mount the $controller cgroup controller as v1: crun cannot run here; sandboxes use runc"
  done
}

maybe_register_crun
hybrid_cgroups_for_crun

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
