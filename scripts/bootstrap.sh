#!/usr/bin/env bash
# Makes a fresh machine ready to run Tidepool: build tools for the native modules, pnpm, the
# workspace's dependencies (only when missing or out of date) and a Docker engine that answers.
# Sourced or run by scripts/start-platform.sh and scripts/run-tests.sh; every step is a no-op when done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PNPM_VERSION=10.34.8
log() { printf '[bootstrap] %s\n' "$*" >&2; }

# Installs Debian packages that one part of the platform or of its tests needs, when root with apt; otherwise, or when
# the install fails, says what is missing and what will not work. $1: what they are for; $2: what fails without them.
install_optional() {
  local purpose=$1 without=$2
  shift 2
  if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing $* ($purpose)"
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } \
      || log "could not install $*: $without"
  else
    log "missing $*: $without (sudo apt-get install -y $*)"
  fi
}

missing=()
for tool in make g++ python3; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]} > 0)); then
  [[ $EUID -eq 0 ]] || { log "missing build tools (${missing[*]}): sudo apt-get install -y build-essential python3"; exit 1; }
  log "installing build tools: ${missing[*]}"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential python3 >/dev/null
fi

# Sandbox isolation and egress rules (iptables, iptables-restore); the network tests' stand-in hosts
# (ip netns) and their TLS certificate (openssl).
net_missing=()
for pair in iptables:iptables iptables-restore:iptables ip:iproute2 openssl:openssl; do
  command -v "${pair%%:*}" >/dev/null || net_missing+=("${pair#*:}")
done
if ((${#net_missing[@]} > 0)); then
  if [[ $EUID -eq 0 ]]; then
    log "installing network tools: ${net_missing[*]}"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${net_missing[@]}" >/dev/null
  else
    log "missing ${net_missing[*]}: sandboxes will run WITHOUT network isolation (sudo apt-get install -y ${net_missing[*]})"
  fi
fi

# The local cluster (pnpm cluster:local, packages/testkit/src/local-cluster.ts) and the registry pull tests: Debian's
# docker-registry with htpasswd (apache2-utils); node engines are entered with nsenter (util-linux).
cluster_missing=()
for pair in /usr/bin/docker-registry:docker-registry /usr/bin/htpasswd:apache2-utils nsenter:util-linux; do
  if [[ "${pair%%:*}" == /* ]]; then [[ -x "${pair%%:*}" ]] || cluster_missing+=("${pair#*:}"); else command -v "${pair%%:*}" >/dev/null || cluster_missing+=("${pair#*:}"); fi
done
if ((${#cluster_missing[@]} > 0)); then
  install_optional "local-cluster tools" "the local cluster and the registry pull tests will not work" "${cluster_missing[@]}"
fi

# Sandbox URLs on the default domain (https://<port>-<id>.tidepool.localhost, TIDEPOOL_TLS): browsers resolve
# *.localhost to loopback themselves; getaddrinfo (Node, curl) does only through the nss myhostname module.
if ! getent hosts probe.tidepool.localhost >/dev/null 2>&1; then
  if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing libnss-myhostname (*.localhost names resolve to loopback)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnss-myhostname >/dev/null
    getent hosts probe.tidepool.localhost >/dev/null 2>&1 || log "*.localhost still does not resolve: add myhostname to the hosts line of /etc/nsswitch.conf"
  else
    log "*.localhost does not resolve: sandbox URLs on tidepool.localhost need it (sudo apt-get install -y libnss-myhostname)"
  fi
fi

# PostgreSQL for the store suites' throwaway clusters (packages/testkit/src/postgres-server.ts; TIDEPOOL_DATABASE_URL).
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && ! command -v initdb >/dev/null; then
  install_optional "the store suites run against a throwaway cluster" "the PostgreSQL store suites will fail" postgresql
fi

# lxcfs: sandboxes see their own memory, cpus and uptime in /proc (the platform starts one lxcfs at
# TIDEPOOL_LXCFS_DIR and binds its files into each sandbox); without it they see the host's figures.
if ! command -v lxcfs >/dev/null; then
  install_optional "sandboxes' own /proc figures" "sandboxes will see the host's memory and cpus in /proc" lxcfs
fi

# crun: an OCI runtime sandboxes may start under (TIDEPOOL_CONTAINER_RUNTIME=auto; scripts/ensure-docker.sh registers it
# with the engine; the runtimes bench compares it with runc). By default sandboxes run under the engine's runtime.
if ! command -v crun >/dev/null; then
  install_optional "an optional sandbox runtime" "TIDEPOOL_CONTAINER_RUNTIME=auto and the runtimes bench fall back to the engine's runtime" crun
fi

if ! command -v pnpm >/dev/null || [[ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]]; then
  log "installing pnpm $PNPM_VERSION"
  npm install -g --silent "pnpm@$PNPM_VERSION" >/dev/null 2>&1 || { corepack enable && corepack prepare "pnpm@$PNPM_VERSION" --activate; }
fi

# Install when node_modules is missing or older than the lockfile.
if [[ ! -f node_modules/.modules.yaml || pnpm-lock.yaml -nt node_modules/.modules.yaml ]]; then
  log "installing dependencies"
  if [[ "${CI:-}" == "true" ]]; then pnpm install --frozen-lockfile; else pnpm install; fi
fi

bash scripts/ensure-docker.sh

# Compose, for docker-compose.yml and the suite that proves it (apps/api/test/compose-install.test.ts): the v2
# plugin when present, else Debian's docker-compose (1.29; the compose file is written for both).
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
  install_optional "the compose suite" "the compose suite will be skipped" docker-compose
fi
