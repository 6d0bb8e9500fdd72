#!/usr/bin/env bash
# Pod start-up latency through the API server, kubelet-rs beside the Go kubelet v1.20.2
# (issue #38: the kubelet's SLI, create -> Ready seen by a watch).
#
#   scripts/startup-latency.sh [KINDS] [RUNS]   defaults: "go-kubelet kubelet-rs", 1
#
# Each kubelet in turn is the node of the conformance cluster of its own (scripts/conformance.sh:
# a second control plane, the containerd instance "conf", its own ports and cgroup root; the
# shared default ones are never touched), with a cluster DNS address as a configured node has.
# Before the kubelet starts, `cargo xtask startup-latency raw` measures the raw CRI floor of the
# benchmark's pod on that containerd; then `startup-latency api` runs the scenarios (pods one at
# a time, bursts, pods with configMap/secret/projected volumes; see xtask/src/startup_latency).
# RUNS > 1 alternates the kubelets RUNS times. At the end `startup-latency report` prints each
# run's table: the first kind is the reference of the ratios and the targets.
# KUBELET_RS_STARTUP_BURST (30) is the size of a burst, of the raw floor's and of the scenario's;
# KUBELET_RS_STARTUP_ARGS adds flags to `startup-latency api` (e.g. "--sequential 20").
# KUBELET_RS_STARTUP_SPANS=1: kubelet-rs exports every span to a collector `startup-latency api`
# serves on 127.0.0.1:$KUBELET_RS_STARTUP_OTLP_PORT (4327), and the report adds where each
# scenario's time went (intake, the sync's CRI calls and own time, after; the export costs some
# CPU: compare latencies of runs without it).
# kubelet-rs is the shipped build, `--profile ship` (KUBELET_RS_CONFORMANCE_PROFILE=release for
# the release one, as in conformance.sh).
# Results in $STATE/startup-latency/<run>/.
set -euo pipefail
# cluster_prepare / start_kubelet / cluster_down, the cluster's settings and kubectl come from
# there.
# shellcheck source=conformance.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/conformance.sh"

KINDS=${1:-go-kubelet kubelet-rs}
RUNS=${2:-1}
export KUBELET_RS_CONFORMANCE_PROFILE=${KUBELET_RS_CONFORMANCE_PROFILE:-ship}
# The kubelet's cluster DNS; the raw floor's pod gets the same DNS settings.
CLUSTER_DNS=(--cluster-dns=10.96.0.10 --cluster-domain=cluster.local)
export KUBELET_RS_CONFORMANCE_KUBELET_ARGS="${CLUSTER_DNS[*]}"
OUT="$STATE/startup-latency"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number: $RUNS"
BURST=${KUBELET_RS_STARTUP_BURST:-30}
[[ "$BURST" =~ ^[1-9][0-9]*$ ]] || die "KUBELET_RS_STARTUP_BURST must be a positive number: $BURST"
read -r -a API_ARGS <<<"${KUBELET_RS_STARTUP_ARGS:-}"
SPANS=${KUBELET_RS_STARTUP_SPANS:-0}
OTLP="127.0.0.1:${KUBELET_RS_STARTUP_OTLP_PORT:-4327}"

xtask() {
  (cd "$REPO" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target} \
    cargo run -q --release -p xtask -- startup-latency "$@")
}

measure() {
  local kind=$1 dir=$2 bin
  bin=$(kubelet_binary "$kind")
  [ -x "$bin" ] || die "no kubelet binary at $bin"
  cluster_prepare
  log "$kind: the raw CRI floor on ${KUBELET_RS_CRI_ENDPOINT}"
  xtask raw --endpoint "$KUBELET_RS_CRI_ENDPOINT" --burst "$BURST" "${CLUSTER_DNS[@]}" \
    --out "$dir/$kind.raw.json"
  local spans=()
  if [ "$SPANS" = 1 ] && [ "$kind" = kubelet-rs ]; then
    spans=(--otlp "$OTLP")
    KUBELET_RS_CONFORMANCE_OTLP=$OTLP start_kubelet "$kind" "$bin"
  else
    start_kubelet "$kind" "$bin"
  fi
  log "$kind: the scenarios through the API server"
  xtask api --kubeconfig "$KUBECONFIG" --node "$NODE_NAME" --kubelet "$kind" \
    --burst "$BURST" --out "$dir/$kind.api.json" "${spans[@]}" "${API_ARGS[@]}"
  # The kubelet's memory after the scenarios (their pods deleted): a cluster node's resident
  # code is more than a standalone one's (the API client, the watches, the volumes).
  local pid
  if pid=$(kubelet_pid); then
    grep -E '^(VmRSS|VmHWM|RssAnon|RssFile):' "/proc/$pid/status" | tee "$dir/$kind.memory.txt" |
      tr -s ' \t' ' ' | paste -sd' ' | sed "s/^/[startup-latency] $kind memory after the scenarios: /" >&2
    # Its connections to the API server then: one per watch, and the requests' (one HTTP/2
    # connection for kubelet-rs's api and events clients, one per request in flight before).
    ss -Htnp state established "( dport = :${KUBELET_RS_APISERVER_PORT:-16443} )" 2>/dev/null |
      grep -c "pid=$pid," | tee "$dir/$kind.connections.txt" |
      sed "s/^/[startup-latency] $kind connections to the API server after the scenarios: /" >&2 || true
  fi
  cluster_down
}

# The whole file is read before anything runs (main and exit are one compound command on the
# last line), so editing the script during a run cannot change it.
main() {
  need_root
  one_run_at_a_time "$STATE" "startup-latency"
  cmd_build
  # Built before the first cluster starts (cargo would otherwise build in the first timing).
  (cd "$REPO" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target} \
    cargo build -q --release -p xtask)
  trap cluster_down EXIT
  runs=()
  for r in $(seq 1 "$RUNS"); do
    dir="$OUT/$(date +%Y%m%d-%H%M%S)-$r"
    mkdir -p "$dir"
    runs+=("$dir")
    for kind in $KINDS; do measure "$kind" "$dir"; done
  done
  trap - EXIT
  for dir in "${runs[@]}"; do
    echo "== $dir"
    # shellcheck disable=SC2086
    xtask report --dir "$dir" $KINDS | tee "$dir/report.txt"
  done
}
main "$@"; exit
