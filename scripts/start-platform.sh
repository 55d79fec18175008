#!/usr/bin/env bash
# `npm start` / `pnpm start`: the whole Tidepool platform on this machine.
#   1. build tools, pnpm, dependencies and a Docker engine (scripts/bootstrap.sh; may start dockerd),
#   2. the images every sandbox needs, built only when out of date (scripts/build-images.sh), and the dashboard
#      (apps/dashboard); the code-interpreter image is built by the API once it listens,
#   3. the platform API in the foreground: REST API and sandbox proxy on one port. It prints the
#      URL, the API key (generated on first start) and the SDK variables to export.
# Ctrl-C stops the API; sandboxes keep running and are adopted by the next start.
# Settings come from TIDEPOOL_* variables (apps/api/src/config.ts); here the API binds to
# 127.0.0.1:3000 unless TIDEPOOL_HOST / TIDEPOOL_PORT say otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh
printf '[start] building images (no-op when current)\n' >&2
# Only what every sandbox needs is built before the API starts; the code-interpreter image is built by the API
# after it listens (TIDEPOOL_BUILTIN_IMAGE_BUILDER), and creates of `code-interpreter-v1` wait for it.
TIDEPOOL_SKIP_CODE_INTERPRETER=1 bash scripts/build-images.sh >/dev/null
export TIDEPOOL_BUILTIN_IMAGE_BUILDER="${TIDEPOOL_BUILTIN_IMAGE_BUILDER-$PWD/scripts/build-builtin-image.sh}"
printf '[start] building the dashboard (/dashboard)\n' >&2
node apps/dashboard/scripts/build.mjs >/dev/null
export TIDEPOOL_HOST="${TIDEPOOL_HOST:-127.0.0.1}"
export TIDEPOOL_PORT="${TIDEPOOL_PORT:-3000}"
export TIDEPOOL_DATA_DIR="${TIDEPOOL_DATA_DIR:-$PWD/.data}"
exec node --import tsx apps/api/src/main.ts
