#!/usr/bin/env bash
# Runs every check and test of kubelet-rs: formatting, clippy, unit tests, and the integration
# tests against a real containerd (started here through scripts/node-env.sh when not running) and
# a real control plane (scripts/control-plane.sh: built once per machine, started when not running).
# The build cache lives outside the clone ($CARGO_TARGET_DIR, default /var/cache/kubelet-rs/target).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target}
# A CI run builds each crate once: incremental data would only grow the cache (it had reached
# 12 GB of one machine's 43 GB cache).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
export KUBELET_RS_CRI_ENDPOINT=${KUBELET_RS_CRI_ENDPOINT:-unix:///run/kubelet-rs/containerd/containerd.sock}
# The kubelet-tests library finds the scripts at run time (kubelet_tests::scripts): this clone's,
# even when its artifacts were built by another checkout sharing CARGO_TARGET_DIR.
export KUBELET_RS_SCRIPTS_DIR="$REPO/scripts"

started_node=0
if ! bash scripts/node-env.sh status >/dev/null 2>&1 || ! [ -S /run/kubelet-rs/containerd/containerd.sock ]; then
  started_node=1
fi
started_cp=0
if ! bash scripts/control-plane.sh status >/dev/null 2>&1; then
  started_cp=1
fi
# The join tests' control plane instance (tests/src/cluster.rs JOIN_INSTANCE_ENV) and the test
# registry (scripts/registry.sh) are started by the tests that need them.
join_cp() {
  KUBELET_RS_CP_DIR=/var/lib/kubelet-rs/join/control-plane \
    KUBELET_RS_CP_LOCK=/var/lib/kubelet-rs/join/control-plane.lock bash scripts/control-plane.sh "$@"
}
started_join_cp=0
if ! join_cp status >/dev/null 2>&1; then started_join_cp=1; fi
started_registry=0
if ! bash scripts/registry.sh status >/dev/null 2>&1; then started_registry=1; fi
started_ctd17=0
cleanup() {
  if [ "$started_ctd17" = 1 ]; then
    KUBELET_RS_NODE_INSTANCE=ctd17 bash scripts/node-env.sh down >/dev/null 2>&1 || true
  fi
  if [ "$started_join_cp" = 1 ] && [ -z "${KUBELET_RS_KEEP_CONTROL_PLANE:-}" ]; then
    join_cp down >/dev/null 2>&1 || true
  fi
  if [ "$started_registry" = 1 ]; then bash scripts/registry.sh down >/dev/null 2>&1 || true; fi
  if [ "$started_cp" = 1 ] && [ -z "${KUBELET_RS_KEEP_CONTROL_PLANE:-}" ]; then
    bash scripts/control-plane.sh down >/dev/null 2>&1 || true
  fi
  if [ "$started_node" = 1 ] && [ -z "${KUBELET_RS_KEEP_NODE:-}" ]; then
    bash scripts/node-env.sh down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# The disk is shared with build caches; the node e2e kubelet evicts below 10% free (Go's
# framework's evictionHard), so a short disk shows here first.
echo "== disk: $(df -h --output=avail,size / | tail -n 1 | awk '{print $1 " free of " $2}')"
echo "== node environment"
bash scripts/node-env.sh up
cargo run -q -p xtask -- cri-ready --endpoint "$KUBELET_RS_CRI_ENDPOINT" --timeout 60

echo "== control plane (etcd, kube-apiserver, controller-manager, scheduler v1.20.2)"
bash scripts/control-plane.sh up >/dev/null

echo "== Prometheus (the scrape test runs a real one on 127.0.0.1), test registry packages (docker-registry, htpasswd)"
log() { echo "[test] $*"; }
. scripts/debian.sh
install_missing prometheus docker-registry apache2-utils
prometheus --version 2>&1 | head -1

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy -q --workspace --all-targets --all-features -- -D warnings
results=$(mktemp)
echo "== cargo test (unit, doc and integration tests)"
cargo test --workspace --all-features 2>&1 | tee -a "$results"
echo "== containerd 1.7 (Debian trixie's, in a private prefix; node instance ctd17): CRI backend, evented PLEG, engine tests"
# The default runtime above is bookworm's containerd 1.6; these run again on 1.7, which has
# GetContainerEvents (the evented PLEG test is skipped on 1.6). Its own containerd, bridge,
# pod subnet and cgroups: it runs beside the shared instance.
ctd17() { KUBELET_RS_NODE_INSTANCE=ctd17 bash scripts/node-env.sh "$@"; }
ctd17 up --containerd 1.7 >/dev/null
started_ctd17=1
(
  eval "$(ctd17 env | sed 's/^/export /')"
  cargo test -p kubelet-tests --test cri_backend --test engine_evented_pleg --test engine_lifecycle \
    --test engine_pods --test engine_probes --test engine_restart --test engine_images \
    --test engine_volumes --test engine_delete --test engine_cgroups --test engine_pod_api \
    --test engine_static_pods --test engine_cpu_manager --test engine_memory_manager --test node_log_rotation --test node_image_gc
) 2>&1 | tee -a "$results"
ctd17 down >/dev/null
started_ctd17=0
echo "== tests that restart containerd (one at a time)"
cargo test -p kubelet-tests -- --ignored --test-threads=1 containerd_restart 2>&1 | tee -a "$results"
echo "== the CPU manager's state file against the Go kubelet v1.20.2's (builds it once from the tree)"
bash scripts/node-e2e.sh go-kubelet >/dev/null
cargo test -p kubelet-tests --test standalone_cpu_manager_go -- --ignored 2>&1 | tee -a "$results"
echo "== the device manager with the upstream sample device plugin, and beside the Go kubelet's (builds the plugin once from the tree)"
KUBELET_RS_SAMPLE_DEVICE_PLUGIN=$(bash scripts/node-e2e.sh sample-device-plugin)
export KUBELET_RS_SAMPLE_DEVICE_PLUGIN
cargo test -p kubelet-tests --test engine_device_plugin --test standalone_device_plugin_go -- --ignored 2>&1 | tee -a "$results"
echo "== CSI volumes with the project's test driver, beside the Go kubelet's (the same calls, paths and records)"
cargo test -p kubelet-tests --test standalone_csi_go -- --ignored 2>&1 | tee -a "$results"
echo "== the API server outage test (stops the shared apiserver, so alone)"
cargo test -p kubelet-tests --test cluster_apiserver_outage -- --ignored 2>&1 | tee -a "$results"
# --- the systemd host tier (issue #35) -----------------------------------------------------
# kubelet-rs (the debug build above) as a systemd service on a systemd + cgroup v2 host: a qemu
# VM under software emulation (scripts/vm.sh, image cached in /var/cache/kubelet-rs/vm), once
# with the systemd cgroup driver and once with cgroupfs; see README "systemd hosts".
# KUBELET_RS_VM_TIER=0 leaves it out; a failed check fails CI.
if [ "${KUBELET_RS_VM_TIER:-1}" != 0 ]; then
  echo "== systemd host tier: kubelet-rs on systemd + cgroup v2 in a VM (both cgroup drivers)"
  vm_tier_start=$SECONDS
  cargo build -q -p kubelet-bin
  KUBELET_RS_VM_KUBELET="$CARGO_TARGET_DIR/debug/kubelet" bash scripts/vm-tier.sh all
  echo "== systemd host tier took $((SECONDS - vm_tier_start)) s"
fi
# --- conformance (issue #16) ---------------------------------------------------------------
# The upstream [NodeConformance] specs against kubelet-rs (debug build, already built above) on a
# cluster of its own (second control plane, containerd instance "conf"); see README "Conformance".
# On by default (KUBELET_RS_CONFORMANCE=0 leaves it out, e.g. for a quick local run); a failed
# spec fails CI. A cold machine builds e2e.test, ginkgo and the test images first.
if [ "${KUBELET_RS_CONFORMANCE:-1}" != 0 ]; then
  echo "== conformance: [NodeConformance] specs on kubelet-rs"
  conformance_start=$SECONDS
  KUBELET_RS_CONFORMANCE_PROFILE=debug bash scripts/conformance.sh ci
  echo "== conformance took $((SECONDS - conformance_start)) s"
fi
# --- storage e2e (issue #36) ---------------------------------------------------------------
# The upstream [sig-storage] specs of the storage focus (pre-provisioned `local` PVs of every
# type kubelet-rs supports, inline hostPath and emptyDir, PV/PVC protection; scripts/
# conformance.sh FOCUS_STORAGE) but [Slow], on a cluster of their own; see README "Persistent
# storage". KUBELET_RS_STORAGE_E2E=0 leaves them out; a failed spec fails CI.
if [ "${KUBELET_RS_STORAGE_E2E:-1}" != 0 ]; then
  echo "== storage e2e: upstream [sig-storage] specs on kubelet-rs"
  storage_start=$SECONDS
  KUBELET_RS_CONFORMANCE_PROFILE=debug bash scripts/conformance.sh storage-ci
  echo "== storage e2e took $((SECONDS - storage_start)) s"
fi
# --- node e2e (issue #34) ------------------------------------------------------------------
# The Go kubelet's own suite (test/e2e_node), its [NodeConformance] specs but [Slow], [Serial]
# and [Flaky], against kubelet-rs (debug build) in namespaces of its own; see README "Node e2e".
# KUBELET_RS_NODE_E2E=0 leaves it out; a failed spec fails CI.
if [ "${KUBELET_RS_NODE_E2E:-1}" != 0 ]; then
  echo "== node e2e: [NodeConformance] specs on kubelet-rs"
  node_e2e_start=$SECONDS
  KUBELET_RS_NODE_E2E_PROFILE=debug bash scripts/node-e2e.sh ci
  echo "== node e2e took $((SECONDS - node_e2e_start)) s"
fi
# -------------------------------------------------------------------------------------------
echo "== test.sh took $SECONDS s"
# One closing line over every test binary (pipefail above has already stopped on a failure).
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, i }' "$results"
rm -f "$results"
