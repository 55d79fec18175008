#!/bin/sh
# Builds the static exec-as-user helper used by envd to start processes as another user.
# Usage: build-exec-helper.sh <output-path>
set -eu
if [ "$#" -ne 1 ]; then
  echo "usage: $0 <output-path>" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$(dirname "$out")"
${CC:-gcc} -O2 -static -Wall -Wextra -o "$out.tmp.$$" "$here/exec-as-user.c" "$here/exec-as-user-server.c"
chmod 0755 "$out.tmp.$$"
mv -f "$out.tmp.$$" "$out"
