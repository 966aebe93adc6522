#!/usr/bin/env bash
# `make demo`: on the local control plane (started by `make cluster-up`), apply
# the samples and run reconcile passes until converged, narrating each step.
# Where the real node runs (`make demo REAL_NODE=1`), a Redis on it then
# answers a real `redis-cli PING` with the sample's password.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KUBECONFIG="$PWD/.cluster/kubeconfig"
export PATH="$PWD/.venv/bin:$PATH"
state=.cluster/demo-state.json
rm -f "$state"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "kubectl create secret generic redis-sample-auth (the sample Redis's password)"
password="$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')"
kubectl create secret generic redis-sample-auth --from-literal=password="$password" \
  --dry-run=client -o yaml | kubectl apply -f -

say "kubectl apply -k config/samples"
kubectl apply -k config/samples

converge() {  # passes until one plans nothing
  for pass in 1 2 3 4 5 6 7 8 9 10; do
    say "pass $pass: reconciler sync --state-file $state"
    summary="$(reconciler sync --state-file "$state" -o json)"
    python3 -c 'import json,sys; s=json.load(sys.stdin); print("actions:", s["actions"] or "none", "| errors:", len(s["errors"]), "| API requests:", s["api_requests"])' <<<"$summary"
    if python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s["planned"] == 0 else 1)' <<<"$summary"; then
      return 0
    fi
    # Give the nodes a moment to move the new pods to Ready before the next pass.
    kubectl wait --for=condition=Ready pod -l app.kubernetes.io/managed-by=reconciler --timeout=60s >/dev/null
  done
  echo "demo: did not converge in 10 passes" >&2
  exit 1
}
converge

say "kubectl get redis,xca,pods"
kubectl get redis,xca,pods -o wide

say "kubectl describe redis redis-sample (events)"
kubectl describe redis redis-sample | sed -n '/^Events:/,$p'

running=$(kubectl get pods -l app.kubernetes.io/instance=redis-sample \
  -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Running$' || true)
[[ "$running" == 3 ]] || { echo "demo: expected 3 Running pods, found $running" >&2; exit 1; }

say "converged: 3 redis pods Running, Xca active; the last pass made no writes"

# kwok's nodes run no container; the real node, where there is one, does.
if real="$(python3 -m hack.demo_real redis-real redis-sample-auth 2>&1)"; then
  say "kubectl apply: Redis redis-real on the real node real-0 (a real redis-server)"
  kubectl apply -f - <<<"$real"
  converge
  ip="$(kubectl get pod redis-real-0 -o jsonpath='{.status.podIP}')"
  say "redis-cli -h $ip PING, with the sample's password (REDISCLI_AUTH)"
  pong="$(REDISCLI_AUTH="$password" redis-cli -h "$ip" PING)"
  echo "$pong"
  [[ "$pong" == PONG ]] || { echo "demo: redis-real-0 answered '$pong', not PONG" >&2; exit 1; }
else
  say "$real; real containers need a real node: make cluster-down && make demo REAL_NODE=1 (as root: it installs containerd, runc and the CNI plugins, and changes the host until make cluster-down; CONTRIBUTING.md, The real node)"
fi
unset password
cat <<MSG
Try next (in a new shell, from this directory):
  eval "\$(python3 hack/cluster/cluster.py env)"   # KUBECONFIG, and .venv/bin on PATH
  kubectl patch redis redis-sample --type=merge -p '{"spec":{"num":2}}' && reconciler sync
  reconciler plan                 # what the next pass would do
  reconciler run --interval 5     # the daemon (Ctrl-C to stop)
Stop the local cluster with:  make cluster-down
MSG
