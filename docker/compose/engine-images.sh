#!/usr/bin/env bash
# The compose stack's one-shot `setup` service (docker/compose/Dockerfile, target `setup`): makes the images the
# platform starts containers from, on the Docker engine itself, and prepares the volumes directory.
#
#   $TIDEPOOL_RUNTIME_IMAGE  the envd runtime carrier: /runtime/opt/tidepool (assembled in the image build by
#                            docker/envd-runtime/build-runtime.sh) with docker/envd-runtime/Dockerfile; labelled
#                            dev.tidepool.runtime-hash, which the template builder compares with template images
#   $TIDEPOOL_BASE_IMAGE     the `base` template: docker/base/Dockerfile on $TIDEPOOL_DEBIAN_IMAGE and that runtime
#   $VOLUMES_DIR             owned by uid 1000 (the API's and the sandbox user's), mode 0711
#
# Each image is built only when its label says it is not current (like scripts/build-images.sh), so a restart of
# the stack costs seconds. It talks to the Engine API on the socket with curl: no Docker CLI in the image.
set -euo pipefail

SOCKET="${DOCKER_SOCKET:-/var/run/docker.sock}"
RUNTIME_DIR=/runtime
SRC=/src
IMAGES_FORMAT=1

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
for name in TIDEPOOL_RUNTIME_IMAGE TIDEPOOL_BASE_IMAGE TIDEPOOL_DEBIAN_IMAGE; do
  [[ -n "${!name:-}" ]] || die "$name is not set (docker-compose.yml sets it)"
done
[[ -S "$SOCKET" ]] || die "no Docker socket at $SOCKET (mount /var/run/docker.sock)"

engine() { # <method> <path> [curl args...]: the response body on stdout; fails on HTTP >= 400
  local method="$1" path="$2"; shift 2
  curl -sS --fail-with-body --unix-socket "$SOCKET" -X "$method" "http://engine/v1.41$path" "$@"
}
uri() { jq -rn --arg v "$1" '$v|@uri'; }
label() { # <image> <label>: its value, empty when the image or the label is missing
  engine GET "/images/$(uri "$1")/json" 2>/dev/null | jq -r --arg l "$2" '.Config.Labels[$l] // empty' 2>/dev/null || true
}

build() { # <tag> <build args JSON> <tar command...>: the context comes from the tar command's stdout
  local tag="$1" args="$2" out; shift 2
  out="$(mktemp)"
  "$@" | engine POST "/build?t=$(uri "$tag")&buildargs=$(uri "$args")&rm=1&forcerm=1" \
    -H 'Content-Type: application/x-tar' --data-binary @- >"$out" || { cat "$out" >&2; die "building $tag failed"; }
  # The engine streams JSON lines: the build's output, and an `error` when a step failed.
  jq -rj '.stream // empty' <"$out"
  if jq -e 'select(.error != null)' <"$out" >/dev/null; then
    jq -r 'select(.error != null) | .error' <"$out" >&2
    die "building $tag failed"
  fi
  rm -f "$out"
}

smoke_test() { # <image> <expected envd version>: envd starts from the image, its native addons load
  local image="$1" expected="$2" id got
  id="$(engine POST /containers/create -H 'Content-Type: application/json' \
    -d "$(jq -n --arg i "$image" '{Image: $i, Entrypoint: ["/opt/tidepool/bin/envd"], Cmd: ["-version"], Labels: {"dev.tidepool.setup": "smoke-test"}, HostConfig: {NetworkMode: "none"}}')" | jq -r .Id)"
  engine POST "/containers/$id/start" >/dev/null
  engine POST "/containers/$id/wait" >/dev/null
  # Logs come multiplexed (8-byte frame headers); the version is the only output line.
  got="$(engine GET "/containers/$id/logs?stdout=1&stderr=1" | tr -d '\000-\010\016-\037' | tr -d '\r' | tail -n 1)"
  engine DELETE "/containers/$id?force=1" >/dev/null || true
  [[ "$got" == *"$expected" ]] || die "envd does not start from $image: ${got:-no output}"
}

RUNTIME_HASH="$(cat "$RUNTIME_DIR/opt/tidepool/RUNTIME_HASH")"
ENVD_VERSION="$(cat "$RUNTIME_DIR/opt/tidepool/VERSION")"

if [[ "$(label "$TIDEPOOL_RUNTIME_IMAGE" dev.tidepool.runtime-hash)" == "$RUNTIME_HASH" ]]; then
  log "$TIDEPOOL_RUNTIME_IMAGE is up to date (runtime $RUNTIME_HASH)"
else
  log "building $TIDEPOOL_RUNTIME_IMAGE (runtime $RUNTIME_HASH, envd $ENVD_VERSION)"
  build "$TIDEPOOL_RUNTIME_IMAGE" "$(jq -cn --arg h "$RUNTIME_HASH" --arg v "$ENVD_VERSION" '{RUNTIME_HASH: $h, ENVD_VERSION: $v}')" \
    tar -c -C "$SRC/docker/envd-runtime" Dockerfile -C "$RUNTIME_DIR" opt
  smoke_test "$TIDEPOOL_RUNTIME_IMAGE" "$ENVD_VERSION"
fi

DEBIAN_ID="$(engine GET "/images/$(uri "$TIDEPOOL_DEBIAN_IMAGE")/json" | jq -r .Id)" || die "$TIDEPOOL_DEBIAN_IMAGE is not on the engine (the image build of this service pulls it)"
IMAGE_HASH="$( { printf 'format=%s debian=%s runtime=%s\n' "$IMAGES_FORMAT" "$DEBIAN_ID" "$RUNTIME_HASH"; cat "$SRC/docker/base/Dockerfile"; } | sha256sum | cut -c1-16)"
if [[ "$(label "$TIDEPOOL_BASE_IMAGE" dev.tidepool.image-hash)" == "$IMAGE_HASH" ]]; then
  log "$TIDEPOOL_BASE_IMAGE is up to date"
else
  log "building $TIDEPOOL_BASE_IMAGE from $TIDEPOOL_DEBIAN_IMAGE (the apt layer takes a few minutes the first time)"
  build "$TIDEPOOL_BASE_IMAGE" "$(jq -cn --arg d "$TIDEPOOL_DEBIAN_IMAGE" --arg r "$TIDEPOOL_RUNTIME_IMAGE" --arg h "$RUNTIME_HASH" --arg v "$ENVD_VERSION" --arg i "$IMAGE_HASH" \
    '{DEBIAN_IMAGE: $d, RUNTIME_IMAGE: $r, RUNTIME_HASH: $h, ENVD_VERSION: $v, IMAGE_HASH: $i}')" \
    tar -c -C "$SRC/docker/base" Dockerfile
  smoke_test "$TIDEPOOL_BASE_IMAGE" "$ENVD_VERSION"
fi

if [[ -n "${VOLUMES_DIR:-}" ]]; then
  chown 1000:0 "$VOLUMES_DIR" && chmod 0710 "$VOLUMES_DIR" || die "cannot prepare $VOLUMES_DIR"
  log "volumes directory ready (uid 1000, group root, 0710: no other host user reaches setuid files a sandbox made)"
fi
log "done: $TIDEPOOL_BASE_IMAGE (envd $ENVD_VERSION, runtime $RUNTIME_HASH)"
