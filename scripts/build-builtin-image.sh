#!/usr/bin/env bash
# The builder `npm start` gives the API (TIDEPOOL_BUILTIN_IMAGE_BUILDER): `build-builtin-image.sh <target> <image>`
# builds the image of one built-in template through scripts/build-images.sh (a no-op when it is current) and tags
# it <image>. The API runs it after it listens; its output becomes the template's build log.
#   code-interpreter   the `code-interpreter-v1` template (docker/code-interpreter)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { printf '[build-builtin-image] ERROR: %s\n' "$*" >&2; exit 2; }

target="${1:-}"
image="${2:-}"
[[ $# -eq 2 && -n "$image" ]] || die "usage: build-builtin-image.sh <target> <image>"
[[ "$image" =~ ^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_.-]+)?$ ]] || die "'$image' is not an image name"
tag="$image"; [[ "$tag" == *:* ]] || tag="$tag:latest"

case "$target" in
  code-interpreter)
    # The default tag is build-images.sh's own (it then also prunes the repository's old hash tags).
    [[ "$tag" == tidepool/code-interpreter:latest ]] && tag=""
    TIDEPOOL_SKIP_CODE_INTERPRETER=0 TIDEPOOL_CODE_INTERPRETER_TAG="$tag" bash "$ROOT/scripts/build-images.sh" >&2
    ;;
  *) die "unknown target '$target' (known: code-interpreter)" ;;
esac
