#!/usr/bin/env bash
# Installs gVisor (`runsc`) from the distribution, registers it with the running Docker engine as
# runtime `runsc` and reloads the engine's configuration (SIGHUP: running containers are untouched).
# Then start the platform with TIDEPOOL_CONTAINER_RUNTIME=runsc.
#
# Debian bookworm ships runsc 20221219. That release decides "am I in the host's network namespace?"
# by looking for /proc/sys/net/core/rmem_default, which newer kernels show in every namespace, so it
# refuses every container with a network ("cannot run with network enabled in root network
# namespace"). When this kernel shows that file in a fresh network namespace, the engine is given a
# small launcher instead (/usr/local/lib/tidepool/runsc-launcher) that runs runsc in a private mount
# namespace with /proc/sys/net hidden; runsc's network stack does not read the host's sysctls.
set -euo pipefail

log() { printf '[install-gvisor] %s\n' "$*" >&2; }
die() { printf '[install-gvisor] ERROR: %s\n' "$*" >&2; exit 1; }

[[ $EUID -eq 0 ]] || die "run as root (it installs a package and edits /etc/docker/daemon.json)"
docker info >/dev/null 2>&1 || die "no Docker engine answers; start one first (bash scripts/ensure-docker.sh)"
command -v node >/dev/null || die "node is needed to edit /etc/docker/daemon.json"

if ! command -v runsc >/dev/null; then
  log "installing runsc with apt-get"
  apt-get update -qq >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null || die "apt-get install runsc failed"
fi
RUNSC="$(command -v runsc)"
RUNTIME_PATH="$RUNSC"

# Does a fresh network namespace show rmem_default? Then old runsc releases misjudge every sandbox.
if unshare -n test -e /proc/sys/net/core/rmem_default 2>/dev/null; then
  RUNTIME_PATH=/usr/local/lib/tidepool/runsc-launcher
  log "this kernel shows net.core sysctls in every network namespace: installing $RUNTIME_PATH"
  mkdir -p "$(dirname "$RUNTIME_PATH")"
  cat >"$RUNTIME_PATH" <<EOF
#!/bin/sh
# Written by tidepool scripts/install-gvisor.sh: runs runsc with /proc/sys/net hidden (see there why).
exec unshare -m --propagation private sh -c 'mount -t tmpfs -o size=4k,mode=0555 tidepool-hide-net-sysctls /proc/sys/net && exec "\$0" "\$@"' "$RUNSC" "\$@"
EOF
  chmod 0755 "$RUNTIME_PATH"
fi

mkdir -p /etc/docker
node - "$RUNTIME_PATH" <<'EOF'
const fs = require('node:fs');
const file = '/etc/docker/daemon.json';
let config = {};
if (fs.existsSync(file)) {
  const text = fs.readFileSync(file, 'utf8').trim();
  try { config = text ? JSON.parse(text) : {}; } catch (error) { console.error(`${file} is not valid JSON: ${error.message}`); process.exit(1); }
}
config.runtimes = { ...(config.runtimes ?? {}), runsc: { path: process.argv[2] } };
fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
EOF

pkill -HUP -x dockerd || die "could not signal dockerd to reload its configuration; restart the engine yourself"
for _ in $(seq 1 20); do
  if docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' 2>/dev/null | grep -qw runsc; then
    if docker run --rm --runtime=runsc --network=bridge "${TIDEPOOL_GVISOR_CHECK_IMAGE:-tidepool/debian:bookworm}" true >/dev/null 2>&1; then
      log "runsc is registered and runs a networked container; start the platform with TIDEPOOL_CONTAINER_RUNTIME=runsc"
    else
      log "runsc is registered, but a test container did not run (image ${TIDEPOOL_GVISOR_CHECK_IMAGE:-tidepool/debian:bookworm} missing? build the images first)"
    fi
    exit 0
  fi
  sleep 0.5
done
die "the engine did not pick up runsc from /etc/docker/daemon.json; restart dockerd"
