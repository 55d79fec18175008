#!/usr/bin/env bash
# `pnpm sdk:latest [version]`: installs the newest published `e2b` (or the version given) into a temporary directory
# with npm and runs the SDK version suite (apps/api/test/sdk-versions.test.ts) against it alone, so a new SDK
# release is checked against Tidepool in minutes. Needs the npm registry; not part of CI (`npm test` runs the
# pinned versions only).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
wanted=${1:-latest}
if ! [[ $wanted =~ ^(latest|[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z.]+)?)$ ]]; then
  echo "sdk-latest: '$wanted' is not a version (use latest or x.y.z)" >&2
  exit 2
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/tidepool-sdk-latest-XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo '{ "name": "tidepool-sdk-latest", "private": true, "type": "module" }' >"$dir/package.json"
echo "[sdk-latest] npm install e2b@$wanted in $dir"
(cd "$dir" && npm install --no-audit --no-fund --no-package-lock --loglevel=error "e2b@$wanted" >/dev/null)
version=$(cd "$dir" && node -p "require('./node_modules/e2b/package.json').version")
entry=$(cd "$dir" && node --input-type=module -e "process.stdout.write(import.meta.resolve('e2b'))")
echo "[sdk-latest] e2b $version ($entry)"

cd "$root"
if ! log=$(bash scripts/build-images.sh 2>&1); then
  echo "$log" >&2
  exit 1
fi
TIDEPOOL_SDK_UNDER_TEST="$entry" TIDEPOOL_SDK_VERSION_UNDER_TEST="$version" node_modules/.bin/vitest run apps/api/test/sdk-versions.test.ts
