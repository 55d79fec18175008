#!/usr/bin/env bash
# Builds the cluster-mode images on the local engine, with no container registry reachable (everything from the
# npm registry and the Debian mirror, as docker-compose.yml's build does):
#
#   <prefix>/api:<tag>         an API replica (`tidepool api`)         docker/cluster/tidepool/Dockerfile, stage api
#   <prefix>/node-agent:<tag>  the node agent (`tidepool node`)        docker/cluster/tidepool/Dockerfile, stage node-agent
#   <prefix>/postgres:<tag>    PostgreSQL 15 (Debian's package)        docker/cluster/postgres/Dockerfile
#   <prefix>/registry:<tag>    the image registry (docker-registry)    docker/cluster/registry/Dockerfile
#
# Settings (environment):
#   TIDEPOOL_IMAGE_PREFIX   registry and path the images are named under, e.g. registry.example.com:5000/tidepool
#                           (default tidepool-cluster: local names; push-images.sh retags them for a registry)
#   TIDEPOOL_IMAGE_TAG      default latest
#   TIDEPOOL_DEBIAN_IMAGE   the Debian image everything starts from (default tidepool/debian:bookworm, which
#                           scripts/build-images.sh makes; debian:bookworm where a registry is reachable)
#   TIDEPOOL_CA_CERTIFICATES  PEM of extra certificate authorities for the build's downloads; unset: the .crt
#                           files of /usr/local/share/ca-certificates (a TLS-intercepting proxy on this machine)
#   TIDEPOOL_IMAGE_ARCH     amd64 or arm64 (default: the engine's): the API and node-agent images are built for it
#                           (`--platform linux/<arch>`, TARGETARCH); another architecture than the engine's needs an
#                           engine that runs its binaries (binfmt/qemu). PostgreSQL and the registry are built for
#                           the engine's architecture from TIDEPOOL_DEBIAN_IMAGE as it is.
# Prints the four image names, one a line, on stdout (progress goes to stderr).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="${TIDEPOOL_IMAGE_PREFIX:-tidepool-cluster}"
tag="${TIDEPOOL_IMAGE_TAG:-latest}"
debian="${TIDEPOOL_DEBIAN_IMAGE:-tidepool/debian:bookworm}"
if [[ ! "$prefix" =~ ^[a-z0-9]([a-z0-9._:-]*[a-z0-9])?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*$ ]]; then
  echo "TIDEPOOL_IMAGE_PREFIX '$prefix' is not an image name prefix (registry[:port]/path, lower case)" >&2
  exit 2
fi
if [[ ! "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "TIDEPOOL_IMAGE_TAG '$tag' is not a valid tag" >&2
  exit 2
fi
engine_arch="$(docker version --format '{{.Server.Arch}}')"
arch="${TIDEPOOL_IMAGE_ARCH:-$engine_arch}"
if [[ "$arch" != amd64 && "$arch" != arm64 ]]; then
  echo "TIDEPOOL_IMAGE_ARCH '$arch' is not an architecture the images are built for (amd64, arm64)" >&2
  exit 2
fi
platform_args=(--build-arg "TARGETARCH=$arch")
[[ "$arch" == "$engine_arch" ]] || platform_args+=(--platform "linux/$arch")
if ! docker image inspect "$debian" >/dev/null 2>&1 && [[ "$debian" == tidepool/debian:* ]]; then
  echo "building $debian (scripts/build-images.sh)" >&2
  bash "$root/scripts/build-images.sh" >&2
fi
if [[ -z "${TIDEPOOL_CA_CERTIFICATES+set}" ]]; then
  TIDEPOOL_CA_CERTIFICATES="$(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)"
fi
# The classic builder: what docker.io 20.10 without buildx offers.
export DOCKER_BUILDKIT=0
build() { # <image> <dockerfile> [extra docker build args]
  local image="$1" file="$2"
  shift 2
  echo "building $image" >&2
  docker build -q -f "$root/$file" --build-arg "DEBIAN_IMAGE=$debian" "$@" -t "$image" "$root" >&2
}
build "$prefix/api:$tag" docker/cluster/tidepool/Dockerfile --target api "${platform_args[@]}" --build-arg "CA_CERTIFICATES=$TIDEPOOL_CA_CERTIFICATES"
build "$prefix/node-agent:$tag" docker/cluster/tidepool/Dockerfile --target node-agent "${platform_args[@]}" --build-arg "CA_CERTIFICATES=$TIDEPOOL_CA_CERTIFICATES"
build "$prefix/postgres:$tag" docker/cluster/postgres/Dockerfile
build "$prefix/registry:$tag" docker/cluster/registry/Dockerfile
for name in api node-agent postgres registry; do echo "$prefix/$name:$tag"; done
