#!/usr/bin/env bash
# kubelet-rs quickstart: a standalone kubelet running the example static pods on a real containerd.
#
#   scripts/quickstart.sh          prepare the node (installs what is missing), build, start, show the pods
#                                  (KUBELET_RS_PGO=1: the PGO-optimised build, scripts/pgo-build.sh)
#   scripts/quickstart.sh status   show the pods again
#   scripts/quickstart.sh stop     stop the kubelet (its pods keep running, as with the Go kubelet)
#   scripts/quickstart.sh down     stop the kubelet, remove every pod and stop the node's containerd
#
# Runs as root on Debian. The build cache lives outside the clone ($CARGO_TARGET_DIR,
# default /var/cache/kubelet-rs/target) so a second run is fast.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target}
STATE=${KUBELET_RS_QUICKSTART_DIR:-/var/lib/kubelet-rs/quickstart}
ENDPOINT=unix:///run/kubelet-rs/containerd/containerd.sock
CGROUP_ROOT=kubelet-rs
PID_FILE="$STATE/kubelet.pid"
LOG_FILE="$STATE/kubelet.log"
READ_ONLY_PORT=${KUBELET_RS_READ_ONLY_PORT:-10255}

log() { printf '[quickstart] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

kubelet_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid=$(cat "$PID_FILE")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q kubelet "/proc/$pid/comm" || return 1
  echo "$pid"
}

stop_kubelet() {
  local pid i
  if pid=$(kubelet_pid); then
    log "stopping kubelet (pid $pid); its pods keep running"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  fi
  rm -f "$PID_FILE"
}

show() {
  cargo run -q --release -p xtask -- pods --addr "127.0.0.1:$READ_ONLY_PORT" "$@"
}

up() {
  [ "$(id -u)" = 0 ] || die "run as root (the kubelet manages cgroups and containerd)"
  command -v cargo >/dev/null || die "cargo is missing: install a Rust toolchain (rustup) first"
  log "preparing the node (containerd, runc, CNI, local images)"
  bash "$REPO/scripts/node-env.sh" up
  # The `ship` profile (fat LTO, one codegen unit: fewer resident code pages; a longer first
  # build), or with KUBELET_RS_PGO=1 the binary to deploy: `ship` optimised with a training
  # run's profile (scripts/pgo-build.sh: two such builds and a training run). The tests build
  # `release` and `debug`.
  local kubelet="$CARGO_TARGET_DIR/ship/kubelet"
  if [ "${KUBELET_RS_PGO:-0}" = 1 ]; then
    log "building kubelet-rs with PGO (scripts/pgo-build.sh; the first build takes a long while)"
    kubelet=$(bash "$REPO/scripts/pgo-build.sh" | tail -n 1)
  else
    log "building kubelet-rs (profile ship; cache in $CARGO_TARGET_DIR; the first build takes a while)"
    cargo build -q --profile ship -p kubelet-bin
  fi
  cargo build -q --release -p xtask
  cargo run -q --release -p xtask -- cri-ready --endpoint "$ENDPOINT" --timeout 60
  # The kubelet's cgroup root must exist in every hierarchy (as with the Go kubelet).
  for h in /sys/fs/cgroup/*/; do
    [ -w "$h" ] && mkdir -p "$h$CGROUP_ROOT" 2>/dev/null || true
  done
  stop_kubelet
  mkdir -p "$STATE/manifests"
  cp "$REPO"/examples/manifests/*.yaml "$STATE/manifests/"
  local node
  node=$(hostname | tr '[:upper:]' '[:lower:]')
  log "starting the kubelet: node $node, static pods from $STATE/manifests, log $LOG_FILE"
  nohup "$kubelet" \
    --pod-manifest-path="$STATE/manifests" \
    --container-runtime-endpoint="$ENDPOINT" \
    --root-dir=/var/lib/kubelet-rs/kubelet \
    --cgroup-root="/$CGROUP_ROOT" \
    --hostname-override="$node" \
    --read-only-port="$READ_ONLY_PORT" \
    >"$LOG_FILE" 2>&1 &
  echo $! >"$PID_FILE"
  sleep 0.5
  kubelet_pid >/dev/null || { tail -n 20 "$LOG_FILE" >&2; die "the kubelet exited; see $LOG_FILE"; }
  log "waiting for the pods to run"
  show --wait 120
  local ip
  ip=$(curl -s "127.0.0.1:$READ_ONLY_PORT/pods" 2>/dev/null | grep -o '"podIP":"[0-9.]*"' | head -1 | cut -d'"' -f4 || true)
  cat <<MSG

kubelet-rs is running (pid $(kubelet_pid)); healthz: curl 127.0.0.1:10248/healthz
  pods as JSON:       curl 127.0.0.1:$READ_ONLY_PORT/pods
  the pods again:     scripts/quickstart.sh status
  the web pod:        curl <pod IP of web-$node>:8080   (pod IPs come from 10.88.0.0/16)
  add a pod:          drop a manifest into $STATE/manifests (edit or remove one to see it re-created or stopped)
  kubelet log:        $LOG_FILE
  stop the kubelet:   scripts/quickstart.sh stop   (pods keep running)
  remove everything:  scripts/quickstart.sh down
MSG
}

case "${1:-up}" in
  up) up ;;
  status) show ;;
  stop) stop_kubelet ;;
  down)
    stop_kubelet
    cargo run -q --release -p xtask -- node-down 2>/dev/null || bash "$REPO/scripts/node-env.sh" down
    ;;
  *) die "usage: $0 [up|status|stop|down]" ;;
esac
