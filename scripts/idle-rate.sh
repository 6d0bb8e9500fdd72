#!/usr/bin/env bash
# The API requests and CPU of a kubelet at rest, kubelet-rs beside the Go kubelet v1.20.2
# (issue #18: "the API request rate at idle no higher than the Go kubelet's").
#
#   scripts/idle-rate.sh [SECONDS] [PODS] [KINDS]   defaults: 300, 110, "go-kubelet kubelet-rs"
#
# Each kubelet in turn is the node of the conformance cluster of its own (scripts/conformance.sh:
# a second control plane, the containerd instance "conf", its own ports and cgroup root; the
# shared default ones are never touched): PODS pause pods are bound to it (each with its service
# account token, as every pod has), it settles for a minute once all run, then rests SECONDS.
# Both kubelets get a cluster DNS address, as a configured node has (without one the Go kubelet
# emits two MissingClusterDNS events at every pod sync: ~120 event PATCHes a minute at 110
# pods; kubelet-rs falls back to the host's DNS silently).
# Printed per kubelet: the apiserver's audit log of its requests over the rest, per minute by
# verb and resource (`scripts/control-plane.sh audit-rate`), and its CPU over the rest
# (utime+stime of /proc/PID/stat). kubelet-rs is the release build
# (KUBELET_RS_CONFORMANCE_PROFILE=debug for the debug one). Results in $STATE/idle-rate.
set -euo pipefail
# cluster_up / cluster_down, the cluster's settings and kubectl ($BIN_DIR) come from there.
# shellcheck source=conformance.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/conformance.sh"

IDLE=${1:-300}
PODS=${2:-110}
KINDS=${3:-go-kubelet kubelet-rs}
SETTLE=60
export KUBELET_RS_CONFORMANCE_KUBELET_ARGS="--cluster-dns=10.96.0.10 --cluster-domain=cluster.local"
NS=idle-rate
OUT="$STATE/idle-rate"
[[ "$IDLE" =~ ^[0-9]+$ && "$IDLE" -ge 60 ]] || die "SECONDS must be a number >= 60: $IDLE"
[[ "$PODS" =~ ^[0-9]+$ && "$PODS" -le 110 ]] || die "PODS must be a number <= 110 (maxPods): $PODS"

kubectl() { "$BIN_DIR/kubectl" "$@"; }

pods_yaml() {
  local i
  for i in $(seq 1 "$PODS"); do
    cat <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: idle-$i, namespace: $NS}
spec:
  nodeName: $NODE_NAME
  terminationGracePeriodSeconds: 1
  containers: [{name: pause, image: "k8s.gcr.io/pause:3.2", imagePullPolicy: IfNotPresent}]
EOF
  done
}

# cpu_ticks PID: utime + stime of the process.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

running() { kubectl -n "$NS" get pods --field-selector=status.phase=Running -o name | grep -c . || true; }

measure() {
  local kind=$1 i pid t0 ticks0 ticks1 hz
  cluster_up "$kind"
  kubectl create namespace "$NS" >/dev/null
  for i in $(seq 1 60); do
    kubectl -n "$NS" get serviceaccount default >/dev/null 2>&1 && break
    sleep 1
  done
  t0=$SECONDS
  pods_yaml | kubectl apply -f - >/dev/null
  until [ "$(running)" -ge "$PODS" ]; do
    [ $((SECONDS - t0)) -lt 600 ] || die "$kind: $(running)/$PODS pods Running after 600 s"
    sleep 2
  done
  log "$kind: $PODS pods Running after $((SECONDS - t0)) s; settling ${SETTLE} s, then ${IDLE} s at rest"
  sleep "$SETTLE"
  pid=$(kubelet_pid) || die "$kind: the kubelet is not running"
  hz=$(getconf CLK_TCK)
  ticks0=$(cpu_ticks "$pid")
  sleep "$IDLE"
  ticks1=$(cpu_ticks "$pid")
  {
    echo "== $kind: $PODS pods, ${IDLE} s at rest"
    awk -v t=$((ticks1 - ticks0)) -v hz="$hz" -v s="$IDLE" \
      'BEGIN { printf "kubelet CPU at rest: %.2f s = %.4f cores\n", t / hz, t / hz / s }'
    (cp_env && bash "$SCRIPT_DIR/control-plane.sh" audit-rate "system:node:$NODE_NAME" "$IDLE")
    echo "events by reason (count, the whole run):"
    kubectl get events -A -o jsonpath='{range .items[*]}{.count} {.reason}{"\n"}{end}' |
      awk '{ n[$2] += $1 } END { for (r in n) printf "%8d  %s\n", n[r], r }' | sort -rn
  } | tee "$OUT/$kind.txt"
  kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  cluster_down
}

need_root
command -v jq >/dev/null 2>&1 || install_missing jq
one_run_at_a_time "$STATE" "idle-rate"
cmd_build
mkdir -p "$OUT"
trap cluster_down EXIT
for kind in $KINDS; do measure "$kind"; done
trap - EXIT
for kind in $KINDS; do head -n 3 "$OUT/$kind.txt"; done
