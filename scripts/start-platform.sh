#!/usr/bin/env bash
# `pnpm start`: the whole Tidepool platform on this machine.
#   1. a Docker engine that answers (scripts/ensure-docker.sh, may start dockerd),
#   2. the images, built only when out of date (scripts/build-images.sh),
#   3. the platform API in the foreground (REST API and sandbox proxy on one port).
# Ctrl-C stops the API; sandboxes are containers and are handled by the API's own shutdown.
#
# Environment (passed through to the API): TIDEPOOL_HOST (default 127.0.0.1), TIDEPOOL_PORT
# (default 3000) and whatever else apps/api reads (see apps/api/src/config.ts).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[start] %s\n' "$*" >&2; }

log "checking the Docker engine"
bash scripts/ensure-docker.sh
log "building images (no-op when current)"
bash scripts/build-images.sh >/dev/null

export TIDEPOOL_HOST="${TIDEPOOL_HOST:-127.0.0.1}"
export TIDEPOOL_PORT="${TIDEPOOL_PORT:-3000}"
client_host="$TIDEPOOL_HOST"
case "$client_host" in 0.0.0.0 | '::' | '') client_host=127.0.0.1 ;; esac
url="http://$client_host:$TIDEPOOL_PORT"

cat >&2 <<BANNER

  Tidepool API and sandbox proxy: $url

  Point the e2b SDK at it (the API key is printed by the API below on its first start):

    export E2B_API_URL=$url
    export E2B_SANDBOX_URL=$url
    export E2B_API_KEY=<the key printed below>

BANNER

exec pnpm --silent --filter @tidepool/api start
