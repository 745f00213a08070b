#!/usr/bin/env bash
# `make run`: kubequota on this machine, end to end, in one command.
#
#   1. throwaway dev certificates in build/dev-certs (made once; never committed)
#   2. the local Kubernetes API simulator (tests/e2e/apisim.py) on 127.0.0.1 over HTTPS with
#      a few nodes -- or a real cluster when KQ_KUBECONFIG names a kubeconfig
#   3. bin/kubequota serve with a copy of examples/queues.yaml on 127.0.0.1:8443 (KQ_LISTEN),
#      with the admission gate on, as the chart runs it (KQ_GATE=0: off)
#   4. a sample workload scheduled through kubequota like kube-scheduler would (simulator
#      only): pods created behind the gate, released in fair order, the rest waiting in line
#   5. the usage view, the URLs, a kubectl plugin line and a curl example; then serves until
#      Ctrl-C, which stops everything it started and exits 0
#
# Environment: KQ_LISTEN (127.0.0.1:8443), KQ_CONFIG (default: a fresh copy of
# examples/queues.yaml in the run directory), KQ_KUBECONFIG, KQ_BINARY (bin/kubequota),
# KQ_SCHEDULER_NAME (kubequota-scheduler), KQ_LOG_LEVEL (info), KQ_GATE (1), KQ_RUN_DIR
# (build/run: logs, kubeconfigs, tokens), KQ_SAMPLE_USERS (see tests/e2e/sample_workload.py).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
py=${PYTHON:-/usr/bin/python3}
bin=${KQ_BINARY:-bin/kubequota}
listen=${KQ_LISTEN:-127.0.0.1:8443}
sched=${KQ_SCHEDULER_NAME:-kubequota-scheduler}
certs=build/dev-certs
run=${KQ_RUN_DIR:-build/run}
mkdir -p "$run"
run=$(cd "$run" && pwd)
# The configuration kubequota follows: a copy, so that trying an edit never touches a
# tracked file (made afresh by every make run; KQ_CONFIG names your own).
if [ -n "${KQ_CONFIG:-}" ]; then
  config=$KQ_CONFIG
else
  config=$run/queues.yaml
  cp examples/queues.yaml "$config"
fi
gate_flag=()
[ "${KQ_GATE:-1}" = 0 ] || gate_flag=(--admission-gate)

[ -x "$bin" ] || { echo "run: $bin not built (make)" >&2; exit 1; }
bin_abs=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -r "$config" ] || { echo "run: $config not readable" >&2; exit 1; }
if [ ! -f "$certs/server.crt" ] || [ ! -f "$certs/server.key" ] || [ ! -f "$certs/apiserver.key" ]; then
  bash certs/gen-certs.sh "$certs"
fi

sim_pid=""
kq_pid=""
cleanup() {
  trap - EXIT
  trap "" INT TERM # a second Ctrl-C does not leave kubequota or the simulator behind
  echo
  if [ -n "$kq_pid" ] && kill -0 "$kq_pid" 2>/dev/null; then
    echo "run: stopping kubequota (pid $kq_pid)"
    kill -TERM "$kq_pid" 2>/dev/null || true
    wait "$kq_pid" 2>/dev/null || true
  fi
  if [ -n "$sim_pid" ] && kill -0 "$sim_pid" 2>/dev/null; then
    echo "run: stopping the API simulator (pid $sim_pid)"
    kill -TERM "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
  fi
  local j
  for j in $(jobs -p); do # the wait loop's sleep, a readiness probe
    kill -TERM "$j" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  echo "run: stopped"
}
trap cleanup EXIT
trap "exit 0" INT TERM

host=${listen%:*}
port=${listen##*:}
case "$host" in ""|0.0.0.0|"[::]") chost=127.0.0.1 ;; *) chost=$host ;; esac
kq_url="https://$chost:$port"

if [ -n "${KQ_KUBECONFIG:-}" ]; then
  kubeconfig=$KQ_KUBECONFIG
  echo "run: using the cluster in $kubeconfig (no simulator, no sample workload)"
else
  token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  rm -f "$run/apisim.port"
  "$py" tests/e2e/apisim.py --host 127.0.0.1 --port 0 --cert "$certs/apiserver.crt" \
    --key "$certs/apiserver.key" --token "$token" --nodes 3 --port-file "$run/apisim.port" \
    >"$run/apisim.log" 2>&1 &
  sim_pid=$!
  for _ in $(seq 100); do
    [ -s "$run/apisim.port" ] && break
    kill -0 "$sim_pid" 2>/dev/null || { cat "$run/apisim.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -s "$run/apisim.port" ] || { echo "run: the simulator did not start" >&2; exit 1; }
  sim_url="https://127.0.0.1:$(cat "$run/apisim.port")"
  kubeconfig=$run/kubeconfig
  umask 077
  cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: apisim
clusters:
  - name: apisim
    cluster:
      server: "$sim_url"
      certificate-authority: "$top/$certs/ca.crt"
users:
  - name: kubequota
    user:
      token: "$token"
contexts:
  - name: apisim
    context:
      cluster: apisim
      user: kubequota
      namespace: default
EOF
  umask 022
  echo "run: API simulator on $sim_url (3 nodes; log $run/apisim.log)"
fi

# The usage view only answers callers it can authenticate: here a bearer token from a file.
rest_token_file=$run/rest-token
if [ ! -s "$rest_token_file" ]; then
  (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$rest_token_file")
fi
rest_token=$(cat "$rest_token_file")

# The allocator tuning the image ships (see the Dockerfile), unless the caller set one.
GLIBC_TUNABLES=${GLIBC_TUNABLES-glibc.malloc.tcache_count=256} \
"$bin" serve --config "$config" --kubeconfig "$kubeconfig" --listen "$listen" \
  --rest-token-file "$rest_token_file" "${gate_flag[@]}" \
  --tls-cert "$certs/server.crt" --tls-key "$certs/server.key" --scheduler-name "$sched" \
  --log-level "${KQ_LOG_LEVEL:-info}" >"$run/kubequota.log" 2>&1 &
kq_pid=$!
echo "run: kubequota starting on $kq_url (log $run/kubequota.log)"

ready=0
for _ in $(seq 300); do
  if ! kill -0 "$kq_pid" 2>/dev/null; then
    echo "run: kubequota exited:" >&2
    tail -n 30 "$run/kubequota.log" >&2
    exit 1
  fi
  if curl -fsS --cacert "$certs/ca.crt" "$kq_url/readyz" >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.1
done
if [ $ready = 0 ]; then
  echo "run: kubequota not ready after 30s:" >&2
  tail -n 30 "$run/kubequota.log" >&2
  exit 1
fi
echo "run: kubequota is ready"
echo

# The kubectl plugin through the API server's service proxy, as on a cluster: the simulator
# proxies kubequota-system/kubequota:443 (the chart's Service) to this kubequota and takes
# the usage view's token as a user's; the plugin's kubeconfig carries that token.
plugin_line=""
if [ -n "$sim_pid" ]; then
  curl -fsS --cacert "$certs/ca.crt" -H "Authorization: Bearer $token" -H "Content-Type: application/json" \
    -d "{\"proxy_services\": {\"kubequota-system/kubequota:443\": \"$chost:$port\"},
         \"review_tokens\": {\"$rest_token\": {\"username\": \"demo\"}}}" \
    "$sim_url/_sim/config" >/dev/null
  (umask 077; sed "s/token: \"$token\"/token: \"$rest_token\"/" "$kubeconfig" >"$run/plugin-kubeconfig")
  mkdir -p "$run/bin"
  ln -sf "$bin_abs" "$run/bin/kubectl-kubequota"
  plugin_line="KUBECONFIG=$run/plugin-kubeconfig $bin_abs kubectl usage"
fi

if [ -n "$sim_pid" ]; then
  gate_arg=()
  [ ${#gate_flag[@]} = 0 ] || gate_arg=(--gate)
  KQ_SCHEDULER_NAME=$sched "$py" -u tests/e2e/sample_workload.py --api "$sim_url" --token "$token" \
    --ca "$certs/ca.crt" --kubequota "$kq_url" --rest-token-file "$rest_token_file" "${gate_arg[@]}"
else
  "$py" -u tests/e2e/sample_workload.py --show --ca "$certs/ca.crt" --kubequota "$kq_url" \
    --rest-token-file "$rest_token_file"
fi

cat <<EOF

kubequota is serving on $kq_url
  usage view   $kq_url/ws/v1/partition/default/usage/users
               $kq_url/ws/v1/partition/default/usage/groups
               $kq_url/ws/v1/partition/default/queues
  dashboard    $kq_url/ui/  (Token button: paste the token in $rest_token_file)
  metrics      $kq_url/metrics
  health       $kq_url/healthz  $kq_url/readyz
EOF
if [ -n "$sim_pid" ]; then
  echo "  simulator    $sim_url (bearer token in $run/kubeconfig; state: $sim_url/_sim/state)"
fi
if [ -n "$plugin_line" ]; then
  cat <<EOF

The kubectl plugin (kubectl kubequota usage | waiting | why POD | what-if -f FILE):
  $plugin_line
  with kubectl installed:
  PATH=$run/bin:\$PATH KUBECONFIG=$run/plugin-kubeconfig kubectl kubequota waiting
EOF
fi
cat <<EOF

Try:
  curl --cacert $certs/ca.crt -H "Authorization: Bearer \$(cat $rest_token_file)" \\
       $kq_url/ws/v1/partition/default/usage/user/alice
  $py tests/e2e/sample_workload.py --show --ca $certs/ca.crt --kubequota $kq_url --rest-token-file $rest_token_file

Edit $config and kubequota reloads it$([ -n "${KQ_CONFIG:-}" ] || echo " (a copy of examples/queues.yaml, made afresh by each make run)"). Press Ctrl-C to stop.
EOF

# Ctrl-C reaches kubequota and the simulator too (one process group), and either may stop
# before this shell runs its INT trap: one that stopped cleanly (exit 0, as both do on
# SIGINT and SIGTERM) is a stop, not a failure.
sim_gone=""
while kill -0 "$kq_pid" 2>/dev/null; do
  if [ -n "$sim_pid" ] && ! kill -0 "$sim_pid" 2>/dev/null; then
    sim_gone=1
    break
  fi
  sleep 1 &
  wait $! || true
done
if [ -n "$sim_gone" ]; then
  sim_rc=0
  wait "$sim_pid" 2>/dev/null || sim_rc=$?
  sim_pid=""
  [ "$sim_rc" -eq 0 ] && exit 0
  echo "run: the API simulator stopped ($sim_rc); its log: $run/apisim.log" >&2
  exit 1
fi
kq_rc=0
wait "$kq_pid" 2>/dev/null || kq_rc=$?
kq_pid=""
[ "$kq_rc" -eq 0 ] && exit 0
echo "run: kubequota exited ($kq_rc); last log lines:" >&2
tail -n 20 "$run/kubequota.log" >&2
exit 1
