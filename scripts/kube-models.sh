#!/usr/bin/env bash
# Installs the npm package kubernetes-models (the Kubernetes OpenAPI schemas as validators,
# one class per kind with validate()), plus the cert-manager and prometheus-operator models
# for the chart's optional objects, and @bufbuild/cel (a CEL evaluator, for the webhooks'
# matchConditions), and prints the folder holding their node_modules.
# Cached outside the repository, like scripts/helm.sh does for Helm:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/kubequota/kubernetes-models/<versions>/node_modules
#
# Idempotent: with the cached packages present, nothing is downloaded.
# KQ_KUBE_MODELS=/dir (holding node_modules/kubernetes-models) skips the install.
set -euo pipefail

# pinned: a new version may bring other schemas
pkgs=(kubernetes-models@5.1.0 @kubernetes-models/cert-manager@6.0.0
      @kubernetes-models/prometheus-operator@6.0.0 @bufbuild/cel@0.6.1)
key=km-5.1.0_cm-6.0.0_po-6.0.0_cel-0.6.1
dir=${KQ_KUBE_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubequota/kubernetes-models/$key}

complete() {
  [ -f "$1/node_modules/kubernetes-models/package.json" ] &&
  [ -f "$1/node_modules/@kubernetes-models/cert-manager/package.json" ] &&
  [ -f "$1/node_modules/@kubernetes-models/prometheus-operator/package.json" ] &&
  [ -f "$1/node_modules/@bufbuild/cel/package.json" ]
}

if ! complete "$dir"; then
  if [ -n "${KQ_KUBE_MODELS:-}" ]; then
    echo "kube-models.sh: KQ_KUBE_MODELS=$KQ_KUBE_MODELS has no kubernetes-models" >&2
    exit 1
  fi
  command -v npm >/dev/null 2>&1 || { echo "kube-models.sh: npm not found" >&2; exit 1; }
  parent=$(dirname "$dir")
  mkdir -p "$parent"
  work=$(mktemp -d "$parent/.install.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "kube-models.sh: installing ${pkgs[*]} with npm" >&2
  (cd "$work" && echo '{"private":true}' >package.json &&
     npm install --silent --no-audit --no-fund --no-save "${pkgs[@]}" >/dev/null)
  complete "$work" || { echo "kube-models.sh: npm install left the packages incomplete" >&2; exit 1; }
  rm -rf "$dir"
  mv "$work" "$dir"
  trap - EXIT
fi
echo "$dir"
