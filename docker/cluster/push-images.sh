#!/usr/bin/env bash
# Pushes the cluster-mode images (docker/cluster/build-images.sh) to a registry, so that every engine of a
# Swarm or Kubernetes cluster can pull them.
#
#   TIDEPOOL_IMAGE_PREFIX      where they go: <registry host[:port]>/<path>, e.g. registry.example.com:5000/tidepool
#   TIDEPOOL_BUILT_PREFIX      the prefix they were built under (default: TIDEPOOL_IMAGE_PREFIX; build-images.sh's
#                              default is tidepool-cluster); they are tagged under TIDEPOOL_IMAGE_PREFIX first
#   TIDEPOOL_IMAGE_TAG         default latest
#   TIDEPOOL_REGISTRY_USERNAME, TIDEPOOL_REGISTRY_PASSWORD   log in first (with a throwaway Docker config, so
#                              yours is left alone; the password is passed on stdin, never on a command line)
# Prints the pushed names, one a line.
set -euo pipefail
prefix="${TIDEPOOL_IMAGE_PREFIX:?set TIDEPOOL_IMAGE_PREFIX to <registry host[:port]>/<path>, e.g. registry.example.com:5000/tidepool}"
built="${TIDEPOOL_BUILT_PREFIX:-$prefix}"
tag="${TIDEPOOL_IMAGE_TAG:-latest}"
registry="${prefix%%/*}"
if [[ "$prefix" != */* || ! "$registry" =~ [.:] && "$registry" != localhost ]]; then
  echo "TIDEPOOL_IMAGE_PREFIX '$prefix' names no registry host (it must start with host[:port]/, e.g. 127.0.0.1:5000/tidepool)" >&2
  exit 2
fi
config_args=()
if [[ -n "${TIDEPOOL_REGISTRY_USERNAME:-}" ]]; then
  config="$(mktemp -d)"
  trap 'rm -rf "$config"' EXIT
  config_args=(--config "$config")
  printf '%s' "${TIDEPOOL_REGISTRY_PASSWORD:-}" | docker "${config_args[@]}" login "$registry" -u "$TIDEPOOL_REGISTRY_USERNAME" --password-stdin >&2
fi
for name in api node-agent postgres registry; do
  source_image="$built/$name:$tag"
  target="$prefix/$name:$tag"
  if ! docker image inspect "$source_image" >/dev/null 2>&1; then
    echo "$source_image is not on this engine: build it first (bash docker/cluster/build-images.sh)" >&2
    exit 1
  fi
  [[ "$source_image" == "$target" ]] || docker tag "$source_image" "$target"
  echo "pushing $target" >&2
  docker "${config_args[@]}" push "$target" >/dev/null
  echo "$target"
done
