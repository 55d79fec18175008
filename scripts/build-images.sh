#!/usr/bin/env bash
# Builds every image Tidepool needs, skipping whatever is already current:
#   tidepool/debian:bookworm        docker/debian/build-debian.sh
#   tidepool/envd-runtime:<hash>    the assembled /opt/tidepool (docker/envd-runtime)
#   tidepool/base:<hash> + :latest  the `base` template (docker/base/Dockerfile)
#   tidepool/code-interpreter:<hash> + :latest
#                                   the `code-interpreter-v1` template (docker/code-interpreter/Dockerfile:
#                                   base + Debian's ipykernel/numpy/pandas/matplotlib + apps/code-interpreter);
#                                   skipped with TIDEPOOL_SKIP_CODE_INTERPRETER=1 (`npm start` skips it: the API
#                                   builds it after it listens, through scripts/build-builtin-image.sh);
#                                   tagged TIDEPOOL_CODE_INTERPRETER_TAG instead of :latest when that is set
# Prints the base image reference (tidepool/base:latest) as the last line of stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGES_FORMAT=1 # bump to force a rebuild of the base image when this script changes meaning
export DOCKER_BUILDKIT=0 # the classic builder is what docker.io 20.10 and a buildx-less CLI share

log() { printf '[build-images] %s\n' "$*" >&2; }
die() { printf '[build-images] ERROR: %s\n' "$*" >&2; exit 1; }
label() { docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }
now() { date +%s; }

# Builds run one at a time per machine: tests, scripts and the CLI may all ask at once.
LOCK_FILE="${TIDEPOOL_BUILD_LOCK:-/tmp/tidepool-build-images.lock}"
exec 9>"$LOCK_FILE"
if ! flock -n 9; then
  log "another image build is running; waiting for it"
  flock 9
fi

start=$(now)
bash "$ROOT/scripts/ensure-docker.sh"
bash "$ROOT/docker/debian/build-debian.sh"

# -- envd runtime ------------------------------------------------------------------------------
RUNTIME_HASH="$(bash "$ROOT/docker/envd-runtime/build-runtime.sh" | tail -n 1)"
[[ -n "$RUNTIME_HASH" ]] || die "build-runtime.sh printed no hash"
RUNTIME_DIR="$ROOT/.build/envd-runtime/$RUNTIME_HASH"
ENVD_VERSION="$(cat "$RUNTIME_DIR/opt/tidepool/VERSION")"
RUNTIME_IMAGE="tidepool/envd-runtime:$RUNTIME_HASH"
if [[ "$(label "$RUNTIME_IMAGE" dev.tidepool.runtime-hash)" == "$RUNTIME_HASH" ]]; then
  log "$RUNTIME_IMAGE is up to date"
else
  log "building $RUNTIME_IMAGE"
  docker build -q -f "$ROOT/docker/envd-runtime/Dockerfile" \
    --build-arg "RUNTIME_HASH=$RUNTIME_HASH" --build-arg "ENVD_VERSION=$ENVD_VERSION" \
    -t "$RUNTIME_IMAGE" "$RUNTIME_DIR" >/dev/null || die "building $RUNTIME_IMAGE failed"
  # The runtime must need nothing from an image: start envd in the carrier image, which holds
  # /opt/tidepool and nothing else (no libc, no shell, no /etc).
  got="$(docker run --rm --entrypoint /opt/tidepool/bin/envd "$RUNTIME_IMAGE" -version 2>&1)" || true
  if [[ "$got" != "$ENVD_VERSION" ]]; then
    docker rmi "$RUNTIME_IMAGE" >/dev/null 2>&1 || true
    die "envd does not start from $RUNTIME_IMAGE alone: $got"
  fi
fi
docker tag "$RUNTIME_IMAGE" tidepool/envd-runtime:latest

# -- base template -----------------------------------------------------------------------------
DEBIAN_ID="$(docker image inspect --format '{{.Id}}' tidepool/debian:bookworm)"
IMAGE_HASH="$( { printf 'format=%s debian=%s runtime=%s\n' "$IMAGES_FORMAT" "$DEBIAN_ID" "$RUNTIME_HASH"; cat "$ROOT/docker/base/Dockerfile"; } | sha256sum | cut -c1-16)"
BASE_IMAGE="tidepool/base:$IMAGE_HASH"
if [[ "$(label "$BASE_IMAGE" dev.tidepool.image-hash)" == "$IMAGE_HASH" ]]; then
  log "$BASE_IMAGE is up to date"
else
  log "building $BASE_IMAGE (the apt layer takes a few minutes the first time, then it is cached)"
  docker build -f "$ROOT/docker/base/Dockerfile" \
    --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" \
    --build-arg "ENVD_VERSION=$ENVD_VERSION" \
    --build-arg "RUNTIME_HASH=$RUNTIME_HASH" \
    --build-arg "IMAGE_HASH=$IMAGE_HASH" \
    -t "$BASE_IMAGE" "$ROOT/docker/base" >&2 || die "building $BASE_IMAGE failed"
  # Smoke test: envd loads its native addons at startup, so a glibc/ABI mismatch shows up here.
  got="$(docker run --rm --entrypoint /opt/tidepool/bin/envd "$BASE_IMAGE" -version 2>&1)" || true
  if [[ "$got" != "$ENVD_VERSION" ]]; then
    docker rmi "$BASE_IMAGE" >/dev/null 2>&1 || true
    die "envd does not start inside $BASE_IMAGE: $got"
  fi
fi
if [[ "$(docker image inspect --format '{{.Id}}' tidepool/base:latest 2>/dev/null || true)" != "$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE")" ]]; then
  docker tag "$BASE_IMAGE" tidepool/base:latest
fi

# -- code-interpreter template ------------------------------------------------------------------
CI_HASH=""
if [[ "${TIDEPOOL_SKIP_CODE_INTERPRETER:-0}" != 1 ]]; then
  CI_CONTEXT="$ROOT/.build/code-interpreter"
  rm -rf "$CI_CONTEXT" && mkdir -p "$CI_CONTEXT"
  node "$ROOT/apps/code-interpreter/scripts/bundle.mjs" --outdir "$CI_CONTEXT/server" 2>/dev/null || die "bundling apps/code-interpreter failed (run: node apps/code-interpreter/scripts/bundle.mjs)"
  cp "$ROOT/docker/code-interpreter/Dockerfile" "$CI_CONTEXT/Dockerfile"
  BASE_ID="$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE")"
  CI_HASH="$( { printf 'format=%s base=%s\n' "$IMAGES_FORMAT" "$BASE_ID"; (cd "$CI_CONTEXT" && find . -type f | LC_ALL=C sort | xargs sha256sum); } | sha256sum | cut -c1-16)"
  CI_IMAGE="tidepool/code-interpreter:$CI_HASH"
  if [[ "$(label "$CI_IMAGE" dev.tidepool.image-hash)" == "$CI_HASH" ]]; then
    log "$CI_IMAGE is up to date"
  else
    log "building $CI_IMAGE (the Python packages take a few minutes the first time after a base image change)"
    docker build -f "$CI_CONTEXT/Dockerfile" \
      --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      --build-arg "SERVER_HASH=$CI_HASH" \
      --build-arg "IMAGE_HASH=$CI_HASH" \
      -t "$CI_IMAGE" "$CI_CONTEXT" >&2 || die "building $CI_IMAGE failed"
    # Smoke test: the server's bundle loads on the runtime's Node and the kernel's packages import.
    got="$(docker run --rm --entrypoint /opt/tidepool/bin/node "$CI_IMAGE" -e "import('/opt/tidepool-code-interpreter/js-worker.mjs').then(() => process.exit(0))" 2>&1 </dev/null)" || {
      docker rmi "$CI_IMAGE" >/dev/null 2>&1 || true
      die "the code-interpreter worker does not load inside $CI_IMAGE: $got"
    }
  fi
  docker tag "$CI_IMAGE" "${TIDEPOOL_CODE_INTERPRETER_TAG:-tidepool/code-interpreter:latest}"
fi

# Old hash tags only hold disk space; untag them (images in use by containers stay). The code-interpreter's only
# when it was built here and tagged :latest (skipped, or tagged elsewhere, the other hash tags are not ours to judge).
PRUNE=(tidepool/envd-runtime tidepool/base)
[[ -n "$CI_HASH" && -z "${TIDEPOOL_CODE_INTERPRETER_TAG:-}" ]] && PRUNE+=(tidepool/code-interpreter)
for repo in "${PRUNE[@]}"; do
  keep="$RUNTIME_HASH"; [[ "$repo" == tidepool/base ]] && keep="$IMAGE_HASH"; [[ "$repo" == tidepool/code-interpreter ]] && keep="$CI_HASH"
  for tag in $(docker image ls --format '{{.Tag}}' "$repo"); do
    [[ "$tag" == latest || "$tag" == "$keep" ]] || docker rmi "$repo:$tag" >/dev/null 2>&1 || true
  done
done
log "tidepool/base:latest = $BASE_IMAGE (envd $ENVD_VERSION, runtime $RUNTIME_HASH) in $(( $(now) - start )) s"
echo "tidepool/base:latest"
