#!/usr/bin/env bash
# Installs what one part of the work needs from Debian's packages, and nothing else:
#
#   scripts/deps.sh [build]   `make`: the compiler, the libraries kubequota links, and
#                             civetweb's Debian source package (never committed) into
#                             build/third_party
#   scripts/deps.sh test      `make unit`/`make e2e`/`make test`: build, plus cmocka and
#                             Python 3 with python3-yaml, iproute2 and promtool
#                             (`promtool check metrics` in the e2e suite), which Debian ships
#                             only inside `prometheus` (the whole server, ~96 MB; installed for
#                             the tests only, never for `make`; where systemd runs, its service
#                             may start: `systemctl disable --now prometheus`). Building
#                             just promtool from its Go module (scripts/promtool.sh, used when
#                             a promtool is neither on PATH nor installable) pulls in the AWS
#                             and Azure SDKs: over 25 minutes on 2 shared cores, measured
#   scripts/deps.sh fuzz      `make fuzz`: build, plus clang (libFuzzer)
#
# Idempotent: with everything present nothing is installed and root is never asked for. apt
# uses the machine's own sources; a deb-src entry for civetweb is made from them
# (scripts/apt-source.sh), so this works behind whatever mirror the machine uses.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
third="$top/build/third_party"
what=${1:-build}
build_pkgs=(build-essential pkg-config libjansson-dev libyaml-dev libcurl4-openssl-dev libssl-dev
            uthash-dev dpkg-dev openssl xxd)
case $what in
  build) pkgs=("${build_pkgs[@]}") ;;
  # iproute2: the real-cluster tier's network namespace; prometheus: promtool (below)
  test)  pkgs=("${build_pkgs[@]}" libcmocka-dev python3 python3-yaml iproute2 prometheus) ;;
  fuzz)  pkgs=("${build_pkgs[@]}" clang libclang-rt-dev) ;;  # libFuzzer and the sanitizer runtimes
  *) echo "usage: $0 [build|test|fuzz]" >&2; exit 2 ;;
esac

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else echo "deps: need root to run: $*" >&2; exit 1
  fi
}

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# civetweb must be built from source against OpenSSL 3 (Debian's libcivetweb1 uses the
# OpenSSL 1.1 API through dlopen and crashes on the first TLS connection). apt-get source
# needs a deb-src entry for the same suites as the binary packages.
need_src=0
[ -f "$third/civetweb/src/civetweb.c" ] || need_src=1

if [ ${#missing[@]} -gt 0 ] || [ $need_src = 1 ]; then
  srcfile=/etc/apt/sources.list.d/kubequota-deb-src.sources
  if [ $need_src = 1 ] && ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    stanzas=$(bash "$top/scripts/apt-source.sh" deb-src)
    echo "deps: adding deb-src entries for this machine's own archive ($srcfile) to fetch civetweb's source package"
    printf '%s\n' "$stanzas" | as_root tee "$srcfile" >/dev/null
  fi
  as_root apt-get update -q
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ $need_src = 1 ]; then
  rm -rf "$third/civetweb" "$third/dl"
  mkdir -p "$third/dl"
  (cd "$third/dl" && apt-get source -q civetweb)
  dir=$(find "$third/dl" -maxdepth 1 -type d -name 'civetweb-*' | head -n 1)
  [ -n "$dir" ] && [ -f "$dir/src/civetweb.c" ] || { echo "deps: civetweb source not found after apt-get source" >&2; exit 1; }
  mv "$dir" "$third/civetweb"
  rm -rf "$third/dl"
  echo "deps: civetweb source ready in $third/civetweb"
fi
