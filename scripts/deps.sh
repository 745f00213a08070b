#!/usr/bin/env bash
# Installs kubequota's build and test dependencies from Debian's packages, then
# fetches civetweb's Debian source package (never committed) into build/third_party.
# Idempotent: a second run with everything present changes nothing.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
third="$top/build/third_party"
pkgs=(build-essential pkg-config libjansson-dev libyaml-dev libcurl4-openssl-dev libssl-dev
      libcmocka-dev uthash-dev dpkg-dev openssl python3 python3-yaml clang
      prometheus)  # promtool: `promtool check metrics` in the e2e suite

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
    echo "deps: adding a deb-src entry ($srcfile) to fetch civetweb's source package"
    as_root tee "$srcfile" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
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
