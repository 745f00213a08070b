#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium for the dashboard's browser test
# (tests/e2e/test_ui.py), installing Debian's `chromium` package when it is missing.
# Not part of scripts/deps.sh: only the test path needs it (`make e2e` runs this first).
# Idempotent: with chromium present nothing is installed. KQ_CHROMIUM=/path skips the
# lookup and uses that binary. Fails (exit 1) when no browser can be had: the browser test
# must not be skipped silently.
set -euo pipefail

works() { [ -x "$1" ] && "$1" --version >/dev/null 2>&1; }

if [ -n "${KQ_CHROMIUM:-}" ]; then
  works "$KQ_CHROMIUM" || { echo "chromium.sh: KQ_CHROMIUM=$KQ_CHROMIUM does not run" >&2; exit 1; }
  echo "$KQ_CHROMIUM"
  exit 0
fi

for c in chromium chromium-browser; do
  p=$(command -v "$c" 2>/dev/null || true)
  if [ -n "$p" ] && works "$p"; then echo "$p"; exit 0; fi
done

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else echo "chromium.sh: need root to run: $*" >&2; exit 1
  fi
}

echo "chromium.sh: installing Debian's chromium package (the dashboard's browser test)" >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2 || {
  as_root apt-get update -q >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
}
p=$(command -v chromium 2>/dev/null || true)
[ -n "$p" ] && works "$p" || { echo "chromium.sh: chromium installed but does not run" >&2; exit 1; }
echo "$p"
