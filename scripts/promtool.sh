#!/usr/bin/env bash
# Prints the path of a promtool for `promtool check metrics` (tests/e2e/test_operability.py).
#
# Debian has no promtool package of its own: it ships only inside `prometheus`, the whole
# server (about 96 MB installed, with its web assets and a system user), which needs root. So
# unless a promtool is already on PATH (or KQ_PROMTOOL names one), this builds just promtool
# from its Go module, pinned below, with the Go 1.26 toolchain the real-cluster tier uses
# already (scripts/kube-build.sh), through the Go module proxy: no root, and only promtool.
# The binary is cached per version in the machine's cache (like scripts/kube-build.sh), so
# the first run builds (a few minutes, module downloads in the Go module cache) and every
# later run prints the cached path at once. Fails (exit 1) when no promtool can be had.
set -euo pipefail

# promtool of Prometheus 3.x: its Go module is tagged v0.3MM.P for release 3.MM.P.
PROMTOOL_MODULE=github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_VERSION=v0.316.0

works() { [ -x "$1" ] && "$1" --version >/dev/null 2>&1; }

if [ -n "${KQ_PROMTOOL:-}" ]; then
  works "$KQ_PROMTOOL" || { echo "promtool.sh: KQ_PROMTOOL=$KQ_PROMTOOL does not run" >&2; exit 1; }
  echo "$KQ_PROMTOOL"; exit 0
fi
p=$(command -v promtool 2>/dev/null || true)
if [ -n "$p" ] && works "$p"; then echo "$p"; exit 0; fi

cache=${KQ_PROMTOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubequota/promtool}/$PROMTOOL_VERSION
if works "$cache/promtool"; then echo "$cache/promtool"; exit 0; fi
command -v go >/dev/null || { echo "promtool.sh: no promtool on PATH and no go to build one (Go 1.26)" >&2; exit 1; }
echo "promtool.sh: building $PROMTOOL_MODULE@$PROMTOOL_VERSION into $cache (once)" >&2
mkdir -p "$cache"
GOBIN="$cache" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false" \
  go install "$PROMTOOL_MODULE@$PROMTOOL_VERSION" >&2 ||
  { echo "promtool.sh: building promtool failed" >&2; exit 1; }
works "$cache/promtool" || { echo "promtool.sh: the built promtool does not run" >&2; exit 1; }
echo "$cache/promtool"
