#!/usr/bin/env bash
# Puts a CA into the caBundle of every admission webhook of rendered manifests, so that
# none is left without one (a webhook with failurePolicy Fail and no caBundle refuses
# everything it matches).
#
#   certs/inject-ca.sh CA_CRT [FILE ...]      (no FILE, or -: standard input)
#
# Writes the manifests to standard output, unchanged except that every clientConfig of every
# MutatingWebhookConfiguration and ValidatingWebhookConfiguration gets
# `caBundle: <base64 of CA_CRT>` (an existing caBundle there is replaced). Fails, writing
# nothing, when CA_CRT is not a PEM certificate or the input holds no webhook. Typical use
# (certs/README.md):
#
#   certs/inject-ca.sh /secure/place/kubequota-certs/ca.crt manifests/02-kubequota.yaml | kubectl apply -f -
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: $0 CA_CRT [FILE ...]" >&2
  exit 2
fi
ca=$1; shift
[ -r "$ca" ] || { echo "inject-ca: cannot read $ca" >&2; exit 1; }
if ! openssl x509 -in "$ca" -noout 2>/dev/null; then
  echo "inject-ca: $ca is not a PEM certificate (give the CA's ca.crt, not a key or a bundle in another format)" >&2
  exit 1
fi
if [ "$(openssl x509 -in "$ca" -noout -ext basicConstraints 2>/dev/null | grep -c 'CA:TRUE')" = 0 ]; then
  echo "inject-ca: $ca is not a CA certificate (basicConstraints CA:TRUE): give ca.crt, not server.crt" >&2
  exit 1
fi
b64=$(base64 -w0 <"$ca")
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# One YAML document at a time: inside a webhook configuration, after each `clientConfig:`
# line, write caBundle at the indentation of clientConfig's own keys and drop an old one.
awk -v b64="$b64" '
  function indent_of(s) { match(s, /^ */); return RLENGTH }
  /^---/ { kind = ""; incc = 0; print; next }
  /^kind: / { kind = $2 }
  {
    if (incc) {
      if ($0 ~ /^ *$/) { print; next }
      ind = indent_of($0)
      if (ind < ccind) incc = 0
      else if (ind == ccind && $0 ~ /^ *caBundle:/) next
    }
    if (kind ~ /^(Mutating|Validating)WebhookConfiguration$/ && $0 ~ /^ *(- )?clientConfig: *$/) {
      print
      ccind = indent_of($0) + ($0 ~ /^ *- / ? 2 : 0) + 2
      printf "%*scaBundle: %s\n", ccind, "", b64
      incc = 1; n++
      next
    }
    print
  }
  END { if (n == 0) exit 3 }
' "${@:--}" >"$out" || {
  rc=$?
  [ $rc = 3 ] && echo "inject-ca: no admission webhook (clientConfig of a Mutating/ValidatingWebhookConfiguration) in the input" >&2
  exit 1
}
cat "$out"
