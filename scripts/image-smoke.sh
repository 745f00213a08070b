#!/usr/bin/env bash
# Builds the container image (scripts/image.sh) and smoke-tests it from the inside:
#   1. `kubequota --version` prints the Makefile's version;
#   2. `kubequota check-config` accepts examples/queues.yaml;
#   3. `kubequota serve` against the local API simulator (tests/e2e/apisim.py, on the host
#      network) becomes ready: GET /readyz answers 200 over TLS verified with the test CA.
# Everything runs as the image's unprivileged user (65532). The last line is
#   image-smoke: N passed, M failed
#
#   scripts/image-smoke.sh [IMAGE]      (default kubequota:smoke; removed afterwards unless
#                                        KQ_KEEP_IMAGE=1)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
image=${1:-kubequota:smoke}
py=${PYTHON:-/usr/bin/python3}
passed=0
failed=0
work=$(mktemp -d "${TMPDIR:-/tmp}/kq-image-smoke.XXXXXX")
pgids=()

builder=${KQ_IMAGE_BUILDER:-}
if [ -z "$builder" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then builder=docker
  else builder=buildah
  fi
fi
export KQ_IMAGE_BUILDER=$builder

cleanup() {
  set +e
  for g in "${pgids[@]}"; do kill -TERM -- "-$g" 2>/dev/null; done
  sleep 1
  for g in "${pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
  if [ "$builder" = buildah ]; then
    buildah --storage-driver vfs rm --all >/dev/null 2>&1
    [ "${KQ_KEEP_IMAGE:-0}" = 1 ] || buildah --storage-driver vfs rmi "$image" >/dev/null 2>&1
  else
    [ "${KQ_KEEP_IMAGE:-0}" = 1 ] || docker rmi "$image" >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

check() { # name, then the command; counts and reports
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "image-smoke: ok   $name"
  else
    failed=$((failed + 1))
    echo "image-smoke: FAIL $name"
  fi
}

# kubequota inside the image with ARGS, as the image's user, on the host network, with
# $work mounted read-only at /smoke.
in_image() {
  if [ "$builder" = docker ]; then
    docker run --rm --network host --user 65532:65532 -v "$work:/smoke:ro" "$image" "$@"
  else
    local ctr
    ctr=$(buildah --storage-driver vfs from --quiet "$image")
    buildah --storage-driver vfs run --isolation chroot --user 65532:65532 \
      -v "$work:/smoke:ro" "$ctr" -- /usr/local/bin/kubequota "$@"
    local rc=$?
    buildah --storage-driver vfs rm "$ctr" >/dev/null 2>&1 || true
    return $rc
  fi
}

t0=$(date +%s)
echo "image-smoke: building $image with $builder"
bash scripts/image.sh "$image" >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log"
  echo "image-smoke: the image did not build (full log above)"
  echo "image-smoke: 0 passed, 1 failed"
  exit 1
}
echo "image-smoke: built in $(( $(date +%s) - t0 ))s"

want_version=$(sed -n 's/^#define KQ_VERSION "\(.*\)"/\1/p' src/main.c | head -n 1)
version_ok() {
  local out
  out=$(in_image --version 2>&1) || { echo "$out"; return 1; }
  echo "image-smoke: --version: $(echo "$out" | head -n 1)"
  echo "$out" | head -n 1 | grep -q "^kubequota $want_version\b" || return 1
  # The image is built from a context without .git: the commit must still come through.
  local want_commit
  want_commit=$(git -C "$top" rev-parse --short=12 HEAD 2>/dev/null) || return 0
  echo "$out" | head -n 1 | grep -q "commit $want_commit"
}
check "--version prints $want_version and the commit" version_ok

cp examples/queues.yaml "$work/queues.yaml"
bash certs/gen-certs.sh "$work/certs" >/dev/null
chmod -R a+rX "$work"   # test keys only: the image's user must read them
config_ok() {
  local out
  out=$(in_image check-config /smoke/queues.yaml 2>&1) || { echo "$out"; return 1; }
  echo "image-smoke: check-config: $out"
}
check "check-config accepts examples/queues.yaml" config_ok

serve_ok() {
  local token port kq_port i
  token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  setsid "$py" tests/e2e/apisim.py --host 127.0.0.1 --port 0 --cert "$work/certs/apiserver.crt" \
    --key "$work/certs/apiserver.key" --token "$token" --nodes 3 --port-file "$work/apisim.port" \
    >"$work/apisim.log" 2>&1 &
  pgids+=($!)
  for i in $(seq 100); do [ -s "$work/apisim.port" ] && break; sleep 0.1; done
  [ -s "$work/apisim.port" ] || { cat "$work/apisim.log"; return 1; }
  port=$(cat "$work/apisim.port")
  cat >"$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: apisim
clusters:
  - name: apisim
    cluster:
      server: "https://127.0.0.1:$port"
      certificate-authority: /smoke/certs/ca.crt
users:
  - name: kubequota
    user:
      token: "$token"
contexts:
  - name: apisim
    context: {cluster: apisim, user: kubequota, namespace: default}
EOF
  chmod a+r "$work/kubeconfig"
  kq_port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  setsid bash -c "$(declare -f in_image); builder=$builder image=$image work=$work; \
    in_image serve --config /smoke/queues.yaml --kubeconfig /smoke/kubeconfig \
      --listen 127.0.0.1:$kq_port --tls-cert /smoke/certs/server.crt --tls-key /smoke/certs/server.key" \
    >"$work/serve.log" 2>&1 &
  pgids+=($!)
  for i in $(seq 600); do
    if curl -fsS --cacert "$work/certs/ca.crt" "https://127.0.0.1:$kq_port/readyz" >/dev/null 2>&1; then
      echo "image-smoke: serve in the image is ready after $((i / 10))s (/readyz 200)"
      return 0
    fi
    sleep 0.1
  done
  tail -n 30 "$work/serve.log"
  return 1
}
check "serve against the API simulator reaches /readyz" serve_ok

echo "image-smoke: $(( $(date +%s) - t0 ))s in all"
echo "image-smoke: $passed passed, $failed failed"
[ "$failed" = 0 ]
