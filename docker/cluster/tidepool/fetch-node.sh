#!/bin/sh
# Fetches Node for the image's architecture from the npm registry (node-linux-<arch>, which also carries the
# headers node-gyp compiles the addons against) and unpacks bin/ and include/ into <dir>.
#
#   fetch-node.sh <dir>            download and unpack
#   fetch-node.sh --print-url      print the tarball's URL and exit (what the Dockerfile test checks per architecture)
#
# Environment: NODE_VERSION, NPM_REGISTRY; TARGETARCH (Docker's name: amd64, arm64), set by BuildKit and by
# build-images.sh; unset (the classic builder sets no platform arguments), the architecture of the build container.
set -eu
arch="${TARGETARCH:-}"
[ -n "$arch" ] || arch="$(dpkg --print-architecture)"
case "$arch" in
  amd64) node_arch=x64 ;;
  arm64) node_arch=arm64 ;;
  *) echo "fetch-node.sh: no Node build for architecture '$arch' (amd64 and arm64 are supported)" >&2; exit 2 ;;
esac
: "${NODE_VERSION:?set NODE_VERSION}"
url="${NPM_REGISTRY:-https://registry.npmjs.org}/node-linux-${node_arch}/-/node-linux-${node_arch}-${NODE_VERSION}.tgz"
if [ "${1:-}" = "--print-url" ]; then
  echo "$url"
  exit 0
fi
dir="${1:?usage: fetch-node.sh <dir> | --print-url}"
mkdir -p "$dir"
curl -fsSL "$url" | tar -xz -C "$dir" --strip-components=1 package/bin package/include
test "$("$dir/bin/node" --version)" = "v${NODE_VERSION}"
