#!/usr/bin/env bash
# `npm test` / `pnpm test`: bootstraps what is missing, builds the images (no-op when current) and
# runs every suite with vitest. Extra arguments go to vitest (e.g. `pnpm test apps/envd`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
bash scripts/build-images.sh >/dev/null
node apps/dashboard/scripts/build.mjs >/dev/null   # the dashboard the API serves at /dashboard
exec node_modules/.bin/vitest run "$@"
