#!/usr/bin/env bash
# Generates throwaway development certificates for kubequota (never for production, never
# committed: the .gitignore ignores *.key, *.pem and certs/dev/).
#
#   certs/gen-certs.sh OUTDIR [DNS-or-IP ...]
#
# Writes into OUTDIR (created if needed):
#   ca.crt ca.key                 a self-signed CA that signs everything below
#   server.crt server.key         kubequota's serving certificate; SANs: localhost, 127.0.0.1, ::1,
#                                 kubequota, kubequota.<ns>.svc, kubequota.<ns>.svc.cluster.local
#                                 and every extra name given (IP addresses become IP SANs)
#   client.crt client.key         a client certificate, CN kube-scheduler (for --client-ca)
#   apiserver.crt apiserver.key   the local API simulator's serving certificate (localhost, 127.0.0.1)
#
# Keys are ECDSA P-256, signatures SHA-256, validity KQ_CERT_DAYS days (default 30).
# <ns> is KQ_NAMESPACE (default kube-system). Private keys are written mode 0600.
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: $0 OUTDIR [DNS-or-IP ...]" >&2
  exit 2
fi

out=$1; shift
ns=${KQ_NAMESPACE:-kube-system}
days=${KQ_CERT_DAYS:-30}
command -v openssl >/dev/null 2>&1 || { echo "gen-certs: openssl not found" >&2; exit 1; }

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 077

newkey() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

# san_line NAME... -> "DNS:a,IP:1.2.3.4,..."
san_line() {
  local s="" n
  for n in "$@"; do
    if [[ $n =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || [[ $n == *:* ]]; then
      s+="IP:$n,"
    else
      s+="DNS:$n,"
    fi
  done
  printf '%s' "${s%,}"
}

# sign NAME CN EXTFILE: key NAME.key, CSR, certificate NAME.crt signed by the CA
sign() {
  local name=$1 cn=$2 ext=$3
  newkey "$work/$name.key"
  openssl req -new -key "$work/$name.key" -subj "/O=kubequota-dev/CN=$cn" -sha256 \
    -out "$work/$name.csr" 2>/dev/null
  openssl x509 -req -in "$work/$name.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
    -CAcreateserial -days "$days" -sha256 -extfile "$ext" -out "$work/$name.crt" 2>/dev/null
}

# CA
newkey "$work/ca.key"
openssl req -x509 -new -key "$work/ca.key" -sha256 -days "$days" \
  -subj "/O=kubequota-dev/CN=kubequota-dev-ca" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -addext "subjectKeyIdentifier=hash" \
  -out "$work/ca.crt" 2>/dev/null

# kubequota serving certificate
server_names=(localhost 127.0.0.1 ::1 kubequota "kubequota.$ns.svc" "kubequota.$ns.svc.cluster.local" "$@")
cat >"$work/server.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName=$(san_line "${server_names[@]}")
EOF
sign server kubequota "$work/server.ext"

# client certificate for the extender's client (kube-scheduler)
cat >"$work/client.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
EOF
sign client kube-scheduler "$work/client.ext"

# API simulator serving certificate
cat >"$work/apiserver.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName=$(san_line localhost 127.0.0.1 ::1)
EOF
sign apiserver kube-apiserver-sim "$work/apiserver.ext"

for f in ca server client apiserver; do
  install -m 0644 "$work/$f.crt" "$out/$f.crt"
  install -m 0600 "$work/$f.key" "$out/$f.key"
done
echo "gen-certs: wrote CA, server, client and apiserver certificates to $out (valid $days days)"
