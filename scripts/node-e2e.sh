#!/usr/bin/env bash
# The Go kubelet's own upstream test suite (node e2e, test/e2e_node of the v1.20.2 tree the
# control plane is built from) as kubelet-rs's second acceptance test.
#
#   scripts/node-e2e.sh build         build once per machine (cached in $NE2E_CACHE): e2e_node.test
#                                     from the control plane's tree with its Go 1.15, plus what
#                                     scripts/conformance.sh builds (ginkgo, the images)
#   scripts/node-e2e.sh run [kubelet-rs|go-kubelet] [FOCUS]
#                                     run the focused specs (default: [NodeConformance] without
#                                     [Slow], [Serial], [Flaky]) against that kubelet, print
#                                     `N passed, M failed, K skipped` and the failed specs
#   scripts/node-e2e.sh compare [FOCUS]   both kubelets, then the table and what Go passes and
#                                     kubelet-rs fails
#   scripts/node-e2e.sh rerun KIND FOCUS  the last run's specs FOCUS selects, again, alone
#   scripts/node-e2e.sh ci            the CI subset against kubelet-rs (fails when a spec failed)
#   scripts/node-e2e.sh table         the last runs' results side by side
#   scripts/node-e2e.sh groups [KIND|all] [GROUP...]
#                                     the [Serial]/[NodeFeature:*] groups (SPEC_GROUPS below) one run
#                                     each, then their table (`group-table` prints it again)
#   scripts/node-e2e.sh skips         the skip list with reasons (the README's)
#   scripts/node-e2e.sh go-kubelet    build the Go kubelet v1.20.2 of the tree once; print its path
#   scripts/node-e2e.sh sample-device-plugin
#                                     build the tree's test/images/sample-device-plugin once; print
#                                     its path (tests/tests/engine_device_plugin.rs runs it)
#   scripts/node-e2e.sh down          remove what an interrupted run left
#
# In local mode the test binary starts everything itself: an embedded etcd, a kube-apiserver on
# 127.0.0.1:6443 and the namespace controller, then `<k8s-bin-dir>/kubelet` with its own
# KubeletConfiguration (root dir /var/lib/kubelet, read-only port 10255, `kubeletCgroups:
# /kubelet`, `systemCgroups: /system`, cgroup root `/`). So the whole run happens in namespaces
# of its own (`unshare --pid --net --mount --cgroup --uts`):
# - network: only loopback and the pod bridge, whose gateway address is the node's address;
#   a containerd of its own (scripts/node-env.sh instance `ne2e`) runs inside it, so its CRI
#   streaming server is where the kubelet reaches it;
# - mounts: /var/lib/kubelet, /var/log, /run/netns, /run/containerd and /var/lib/cni are
#   the run's own (under $STATE), and nothing mounted inside propagates out;
# - cgroups: the namespace is rooted at /kubelet-rs-node-e2e of every hierarchy (remounted
#   inside), so `/kubepods`, `/kubelet` and `/system` land below it; containerd runs in
#   `/runtime` (given as --runtime-cgroups);
# - pids: when the run ends every process of it ends with the namespace's first process.
# A run leaves no process, mount, cgroup, network interface or iptables chain behind.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
NE2E_CACHE=${KUBELET_RS_NODE_E2E_CACHE:-/var/cache/kubelet-rs/node-e2e}
CONF_CACHE=${KUBELET_RS_CONFORMANCE_CACHE:-/var/cache/kubelet-rs/conformance}
STATE=${KUBELET_RS_NODE_E2E_DIR:-/var/lib/kubelet-rs/node-e2e}
RESULTS=${KUBELET_RS_NODE_E2E_RESULTS:-$STATE/results}
GROUP_RESULTS=${KUBELET_RS_NODE_E2E_GROUP_RESULTS:-$STATE/results-groups}
GINKGO_NODES=${KUBELET_RS_NODE_E2E_NODES:-4}
# The cgroup (of every hierarchy) the run's cgroup namespace is rooted at.
NS_CGROUP=kubelet-rs-node-e2e
NODE_NAME=kubelet-rs-node-e2e
INSTANCE=ne2e
# The node's pod CIDR in the suite's configuration; the bridge's gateway is the node's address.
POD_SUBNET=10.100.0.0/24
NODE_IP=10.100.0.1
BRIDGE=krs-$INSTANCE
FOCUS_CI='\[NodeConformance\]'
# Left out of the default runs; a FOCUS naming [Serial] or [Slow] runs those (one ginkgo node
# for [Serial]: they reconfigure or fill the node).
SKIP_ALWAYS=${KUBELET_RS_NODE_E2E_SKIP_ALWAYS:-'\[Flaky\]|\[Slow\]|\[Serial\]'}

log() { printf '[node-e2e] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
# shellcheck source=run-lock.sh
. "$SCRIPT_DIR/run-lock.sh"
# shellcheck source=k8s-tree.sh
. "$SCRIPT_DIR/k8s-tree.sh"
# shellcheck source=cgroup-tree.sh
. "$SCRIPT_DIR/cgroup-tree.sh"
# shellcheck source=debian.sh
. "$SCRIPT_DIR/debian.sh"
need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

# ---------------------------------------------------------------------------------------------
# the skip list: what this machine cannot offer, where today's Go kubelet (which kubelet-rs
# follows) differs from v1.20's, or where the v1.20 suite fails on every kubelet; never a spec
# only because kubelet-rs fails it.
# Each entry: a regular expression over the spec's full name, then ` :: ` and the reason.

SKIPS=(
  'Container Runtime (Conformance Test container runtime conformance )?blackbox test when running a container with a new image should (be able to pull (image|from private registry with (secret|credential provider))|not be able to pull from private registry without secret) :: pulls an image from an internet registry (gcr.io); none is reachable'
  'ImageID \[NodeFeature: ImageID\] should be set to the manifest digest :: pulls k8s.gcr.io/busybox by its registry digest; no registry is reachable and a local build cannot have that digest'
  'AppArmor \[Feature:AppArmor\]\[NodeFeature:AppArmor\] when running without AppArmor should reject a pod with an AppArmor profile :: expects v1.20'"'"'s soft rejection (the pod stays Pending, its container Blocked); since 1.31 Go rejects such a pod outright (Failed, reason AppArmor: kubernetes/kubernetes#125776, "kubelet now hard rejects pods with AppArmor if the node does not have AppArmor enabled"), and kubelet-rs follows it'
  'ResourceMetricsAPI \[NodeFeature:ResourceMetrics\] when querying /resource/metrics should report resource usage :: matches /metrics/resource against exactly v1.20'"'"'s seven families; since 1.22 Go also serves container_start_time_seconds there (kubernetes/kubernetes#102444), and so does kubelet-rs: "unexpected key container_start_time_seconds"'
  'CriticalPod \[Serial\] \[Disruptive\] \[NodeFeature:CriticalPod\] when we need to admit a critical pod should be able to create and delete a critical pod :: fails on every kubelet (the Go kubelet v1.20.2 too): the v1.20 framework'"'"'s `PodClientNS(kube-system).CreateSync` waits for the pod in the test'"'"'s own namespace (`c.f.Namespace.Name`), so it gets "pods \"static-critical-pod\" not found" 2 s after creating it'
  'SystemNodeCriticalPod \[Slow\] \[Serial\] \[Disruptive\] \[NodeFeature:SystemNodeCriticalPod\] when create a system-node-critical pod +should not be evicted upon DiskPressure :: its static pod sets `restartPolicy: Never` on its regular container, refused by current Go kubelets and kubelet-rs as the MirrorPod specs below ("spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"): the mirror pod never appears'
  'ContainerLogRotation \[Slow\] \[Serial\] \[Disruptive\] when a container generates a lot of log should be rotated and limited to a fixed amount of files :: its configuration turns on the CRIContainerLogRotation feature gate (GA in 1.21, since removed): no Go kubelet from 1.25 on knows it and they refuse to start ("unrecognized feature gate: CRIContainerLogRotation"), as kubelet-rs does; the rotation itself (containerLogMaxSize/MaxFiles) is covered by kubelet-rs'"'"'s own tests (tests/tests/node_log_rotation.rs)'
  'PrivilegedPod \[NodeConformance\] should enable privileged commands :: the kernel has no dummy netdevice (ip link add dummy1 type dummy: Operation not supported)'
  'MirrorPod when create a mirror pod +should (be updated when static pod updated|be recreated when mirror pod (gracefully|forcibly) deleted) :: the static pod of these specs sets `restartPolicy: Always` on its regular container (meant for the pod): v1.20 dropped the then unknown field, current Go kubelets validate static pods and refuse it (a container-level restartPolicy is allowed on init containers only; on regular containers only with the ContainerRestartRules gate, alpha and off), and kubelet-rs follows them'
  'LocalStorageCapacityIsolationEviction \[Slow\] \[Serial\] \[Disruptive\] \[Feature:LocalStorageCapacityIsolation\]\[NodeFeature:Eviction\] when we run containers that should cause evictions due to pod local storage violations +should eventually evict all of the correct pods :: expects the pod writing 200Mi into a memory-backed emptyDir with a 100Mi sizeLimit to be evicted; since SizeMemoryBackedVolumes (beta, on, 1.22; GA 1.32) the Go kubelet mounts that tmpfs with size=sizeLimit, as kubelet-rs does, so the writes stop at the limit and nothing exceeds it (v1.20, gate off, mounted it unbounded). The spec'"'"'s five other pods are evicted or kept as it expects'
  'ImageGCNoEviction \[Slow\] \[Serial\] \[Disruptive\]\[NodeFeature:Eviction\] when we run containers that should cause DiskPressure +should eventually evict all of the correct pods :: expects image garbage collection to free the 10000 inodes it consumes beyond the threshold; the local image builds are a few files each, so no kubelet can (the Go kubelet v1.20.2 fails it here too)'
)

# The [Serial], [Slow] and [NodeFeature:*] groups of subsystems kubelet-rs has, one run each
# (`groups`): NAME :: FOCUS. A focus naming [Serial] runs on one ginkgo node.
SPEC_GROUPS=(
  'features :: \[NodeFeature:(FSGroup|Sysctls|ResourceMetrics|SetHostnameAsFQDN| ImageID|AppArmor)\]'
  'garbage-collect :: GarbageCollect \[Serial\]'
  'oom-score-adj :: Container Manager Misc \[Serial\]'
  'critical-pod :: CriticalPod \[Serial\]'
  'system-node-critical :: SystemNodeCriticalPod \[Slow\] \[Serial\]'
  'pids-limit :: PodPidsLimit \[Serial\]'
  'downward-api-serial :: Downward API \[Serial\]'
  'node-allocatable :: Node Container Manager \[Serial\]'
  'log-rotation :: ContainerLogRotation \[Slow\] \[Serial\]'
  'eviction-memory :: (MemoryAllocatableEviction|PriorityMemoryEvictionOrdering) \[Slow\] \[Serial\]'
  'eviction-pids :: PriorityPidEvictionOrdering \[Slow\] \[Serial\]'
  'lsci-quota :: LocalStorageCapacityIsolationQuotaMonitoring \[Slow\] \[Serial\]'
  'restart :: Restart \[Serial\] \[Slow\] \[Disruptive\] \[NodeFeature:ContainerRuntimeRestart\]'
  'eviction-disk :: (InodeEviction|ImageGCNoEviction|LocalStorageEviction|LocalStorageSoftEviction|LocalStorageCapacityIsolationEviction|PriorityLocalStorageEvictionOrdering) \[Slow\] \[Serial\]'
)

group_focus() {
  local e
  for e in "${SPEC_GROUPS[@]}"; do
    [ "${e%% :: *}" = "$1" ] && { echo "${e#* :: }"; return 0; }
  done
  die "unknown group $1 (groups: $(group_names | tr '\n' ' '))"
}
group_names() {
  local e
  for e in "${SPEC_GROUPS[@]}"; do echo "${e%% :: *}"; done
}

skip_regex() {
  local e out=""
  for e in "${SKIPS[@]}"; do out="${out:+$out|}${e%% :: *}"; done
  echo "$SKIP_ALWAYS|$out${EXTRA_SKIP:+|$EXTRA_SKIP}"
}

# ---------------------------------------------------------------------------------------------
# build

cmd_build() {
  need_root
  local t0=$SECONDS
  # ginkgo, the images and the version stamp come from the conformance build.
  bash "$SCRIPT_DIR/conformance.sh" build
  install_missing docker-registry curl
  mkdir -p "$NE2E_CACHE/bin"
  if ! [ -x "$NE2E_CACHE/bin/e2e_node.test" ]; then
    tree_of
    log "building e2e_node.test (Go 1.15; log: $NE2E_CACHE/build.log)"
    : >"$NE2E_CACHE/build.log"
    in_tree "$NE2E_CACHE/build.log" make WHAT=test/e2e_node/e2e_node.test ||
      die "building e2e_node.test failed (log: $NE2E_CACHE/build.log)"
    install -m 0755 "$TREE/_output/local/bin/linux/amd64/e2e_node.test" "$NE2E_CACHE/bin/e2e_node.test.tmp"
    mv "$NE2E_CACHE/bin/e2e_node.test.tmp" "$NE2E_CACHE/bin/e2e_node.test"
  fi
  log "build done in $((SECONDS - t0))s (cache: $NE2E_CACHE)"
}

# The Go kubelet v1.20.2 of the same tree (only `run go-kubelet` needs it).
go_kubelet() {
  if ! [ -x "$NE2E_CACHE/bin/go-kubelet/kubelet" ]; then
    tree_of
    log "building the Go kubelet v1.20.2 (log: $NE2E_CACHE/build-kubelet.log)"
    mkdir -p "$NE2E_CACHE/bin/go-kubelet"
    : >"$NE2E_CACHE/build-kubelet.log"
    in_tree "$NE2E_CACHE/build-kubelet.log" make WHAT=cmd/kubelet ||
      die "building the Go kubelet failed (log: $NE2E_CACHE/build-kubelet.log)"
    install -m 0755 "$TREE/_output/local/bin/linux/amd64/kubelet" "$NE2E_CACHE/bin/go-kubelet/kubelet.tmp"
    mv "$NE2E_CACHE/bin/go-kubelet/kubelet.tmp" "$NE2E_CACHE/bin/go-kubelet/kubelet"
  fi
  echo "$NE2E_CACHE/bin/go-kubelet"
}

# The upstream sample device plugin of the same tree (`example.com/resource`, devices Dev-1 and
# Dev-2), for the device manager's tests.
sample_device_plugin() {
  local bin="$NE2E_CACHE/bin/sample-device-plugin"
  if ! [ -x "$bin" ]; then
    tree_of
    log "building the sample device plugin (log: $NE2E_CACHE/build-sample-device-plugin.log)"
    mkdir -p "$NE2E_CACHE/bin"
    : >"$NE2E_CACHE/build-sample-device-plugin.log"
    in_tree "$NE2E_CACHE/build-sample-device-plugin.log" make WHAT=test/images/sample-device-plugin ||
      die "building the sample device plugin failed (log: $NE2E_CACHE/build-sample-device-plugin.log)"
    install -m 0755 "$TREE/_output/local/bin/linux/amd64/sample-device-plugin" "$bin.tmp"
    mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

# kubelet_dir KIND: a directory holding `kubelet` (the suite's --k8s-bin-dir).
kubelet_dir() {
  case "$1" in
    kubelet-rs)
      local target=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target}
      local profile=${KUBELET_RS_NODE_E2E_PROFILE:-release} flags=(--release)
      [ "$profile" = debug ] && flags=()
      log "building kubelet-rs ($profile)"
      (cd "$REPO" && CARGO_TARGET_DIR="$target" cargo build -q "${flags[@]}" -p kubelet-bin) >&2
      mkdir -p "$STATE/bin-kubelet-rs"
      ln -sfn "$target/$profile/kubelet" "$STATE/bin-kubelet-rs/kubelet"
      echo "$STATE/bin-kubelet-rs"
      ;;
    go-kubelet) go_kubelet ;;
    *) die "unknown kubelet $1 (kubelet-rs or go-kubelet)" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# the namespaces of a run

# The run's own registry (plain HTTP on the namespace's loopback), the mirror of every registry
# the run's images are named after (docker.io, k8s.gcr.io, …), as a node's registries are
# there for it: the suite pulls its memory hog with `imagePullPolicy: Always`
# (k8s.gcr.io/stress:v1, a local build of scripts/stress.c), and an image that garbage
# collection or an eviction's reclaim removed is pulled again when the next spec needs it.
# No registry is reachable, so the local builds are what it serves.
MIRROR_ADDR=127.0.0.1:5000

# mirrored_refs CTR SOCKET: the run's images named after a registry (not the local builds'
# kubelet-rs.local names, not bare ids or digests).
mirrored_refs() {
  "$1" -a "$2" -n k8s.io images ls -q |
    grep -v -e '^sha256:' -e '^kubelet-rs\.local/' -e '@' -e "^$MIRROR_ADDR/" |
    grep '^[^/]*\.[^/]*/' || true
}

# start_mirror CTR SOCKET HOSTS_DIR OUT: the registry, the images pushed to it (a registry's
# repository path as it is: docker.io/library/busybox → library/busybox), and containerd's
# hosts.toml for each of their registries naming it.
start_mirror() {
  local ctr=$1 sock=$2 hosts=$3 out=$4 ref host i server
  rm -rf "$STATE/registry" && mkdir -p "$STATE/registry/data"
  printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n' \
    "$STATE/registry/data" "$MIRROR_ADDR" >"$STATE/registry/config.yml"
  docker-registry serve "$STATE/registry/config.yml" >>"$out/registry.log" 2>&1 </dev/null &
  for i in $(seq 1 50); do
    curl -sf "http://$MIRROR_ADDR/v2/" >/dev/null && break
    sleep 0.2
  done
  curl -sf "http://$MIRROR_ADDR/v2/" >/dev/null || die "the run's registry did not start (log: $out/registry.log)"
  : >"$STATE/registry/hosts-entry"
  local -A hosts_done=()
  while read -r ref; do
    "$ctr" -a "$sock" -n k8s.io images push --plain-http "$MIRROR_ADDR/${ref#*/}" "$ref" >/dev/null ||
      die "pushing $ref to the run's registry failed"
    host=${ref%%/*}
    [ -n "${hosts_done[$host]:-}" ] && continue
    hosts_done[$host]=1
    server="https://$host"
    [ "$host" = docker.io ] && server=https://registry-1.docker.io
    mkdir -p "$hosts/$host"
    printf 'server = "%s"\n\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' \
      "$server" "$MIRROR_ADDR" >"$hosts/$host/hosts.toml"
    echo "$hosts/$host" >>"$STATE/registry/hosts-entry"
  done < <(mirrored_refs "$ctr" "$sock")
  [ -n "${hosts_done[k8s.gcr.io]:-}" ] || die "k8s.gcr.io/stress:v1 is not among the run's images"
}

# The mirror's hosts.toml files out of the instance's hosts directory (the registry itself
# ends with the namespace).
stop_mirror() {
  local entry
  while read -r entry; do
    [ -z "$entry" ] || rm -rf "$entry"
  done <"$STATE/registry/hosts-entry" 2>/dev/null || true
  rm -rf "$STATE/registry"
}

# Every cgroup hierarchy mounted under /sys/fs/cgroup: `TARGET FSTYPE OPTIONS` lines.
cgroup_mounts() {
  awk '($3 == "cgroup" || $3 == "cgroup2") && index($2, "/sys/fs/cgroup") == 1 { print $2, $3, $4 }' /proc/self/mounts
}

# make_cgroup DIR: the cgroup, ready to take tasks (a v1 cpuset one needs its parent's CPUs and
# memory nodes first).
make_cgroup() {
  local dir=$1 f
  mkdir -p "$dir"
  for f in cpuset.cpus cpuset.mems; do
    if [ -f "$dir/$f" ] && [ -z "$(cat "$dir/$f")" ]; then
      cat "$(dirname "$dir")/$f" >"$dir/$f"
    fi
  done
}

# inner KIND KUBELET_DIR FOCUS OUT: runs as the first process of the new namespaces.
cmd_inner() {
  local kind=$1 kdir=$2 focus=$3 out=$4 target fstype opts
  # Cgroups: the hierarchies again, rooted at this namespace's root (the run's cgroup).
  local mounts
  mounts=$(cgroup_mounts)
  mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
  while read -r target fstype opts; do
    mkdir -p "$target"
    mount -t "$fstype" -o "$opts" cgroup "$target"
  done <<<"$mounts"
  # What the suite and the runtime write to fixed host paths: the run's own.
  mount -t proc proc /proc
  mkdir -p "$STATE/fs/kubelet" "$STATE/fs/log/pods" "$STATE/fs/log/containers" /run/netns /var/lib/cni \
    /run/containerd
  mount --bind "$STATE/fs/kubelet" /var/lib/kubelet
  mount --bind "$STATE/fs/log" /var/log
  mount -t tmpfs -o mode=755 netns /run/netns
  mount -t tmpfs -o mode=755 cni /var/lib/cni
  mount -t tmpfs -o mode=711 containerd /run/containerd
  hostname "$NODE_NAME"
  # No name server is reachable from here: lookups (the suite resolves a GitHub URL at start)
  # fail at once instead of after their timeouts. Pods get the same file (dnsPolicy Default).
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$STATE/resolv.conf"
  mount --bind "$STATE/resolv.conf" /etc/resolv.conf
  # The node's name resolves to its address (the API server reaches the kubelet by the node's
  # Hostname address first).
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n' \
    "$NODE_IP" "$NODE_NAME" >"$STATE/hosts"
  mount --bind "$STATE/hosts" /etc/hosts
  # Network: loopback, and the pod bridge carrying the node's address and the default route
  # (the kubelets take the default route's interface address as the node's).
  ip link set lo up
  ip link add "$BRIDGE" type bridge
  ip addr add "$NODE_IP/${POD_SUBNET#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  ip route add default dev "$BRIDGE"
  # containerd in /runtime.
  while read -r target fstype opts; do make_cgroup "$target/runtime"; done <<<"$mounts"
  local endpoint
  endpoint=$(
    while read -r target fstype opts; do
      echo "$BASHPID" >"$target/runtime/cgroup.procs" || die "cannot move into $target/runtime"
    done <<<"$mounts"
    KUBELET_RS_NODE_INSTANCE=$INSTANCE KUBELET_RS_POD_SUBNET=$POD_SUBNET bash "$SCRIPT_DIR/node-env.sh" up |
      tail -n 1
  )
  endpoint=${endpoint#KUBELET_RS_CRI_ENDPOINT=}
  local sock=${endpoint#unix://} ctr instance_env
  instance_env=$(KUBELET_RS_NODE_INSTANCE=$INSTANCE bash "$SCRIPT_DIR/node-env.sh" env)
  ctr=$(sed -n 's/^KUBELET_RS_CTR=//p' <<<"$instance_env")
  bash "$SCRIPT_DIR/conformance.sh" import-images "$ctr" "$sock"
  # The runtime starts again when it dies, as systemd restarts it on a node (the Restart group
  # kills it); in /runtime, as at first.
  local pidfile="${sock%/*}/containerd.pid" supervisor
  (
    while read -r target fstype opts; do echo "$BASHPID" >"$target/runtime/cgroup.procs"; done <<<"$mounts"
    while sleep 1; do
      pid=$(cat "$pidfile" 2>/dev/null || true)
      if [ -z "$pid" ] || ! [ -d "/proc/$pid" ]; then
        echo "$(date +%T) containerd is gone: starting it again" >>"$out/containerd-restarts.log"
        KUBELET_RS_NODE_INSTANCE=$INSTANCE KUBELET_RS_POD_SUBNET=$POD_SUBNET \
          bash "$SCRIPT_DIR/node-env.sh" up >>"$out/containerd-restarts.log" 2>&1 || true
      fi
    done
  ) &
  supervisor=$!
  start_mirror "$ctr" "$sock" "$(sed -n 's/^KUBELET_RS_REGISTRY_HOSTS_DIR=//p' <<<"$instance_env")" "$out"
  # The MirrorPodWithGracePeriod static pod's image.
  "$ctr" -a "$sock" -n k8s.io images tag --force docker.io/library/busybox:1.29 docker.io/library/busybox:1.31.1 >/dev/null
  # The suite's working directory (ginkgo runs a test binary in the binary's directory): its
  # kubeconfig, KubeletConfiguration and static pod directory are written there.
  rm -rf "$STATE/work" && mkdir -p "$STATE/work"
  ln -f "$NE2E_CACHE/bin/e2e_node.test" "$STATE/work/e2e_node.test" 2>/dev/null ||
    cp "$NE2E_CACHE/bin/e2e_node.test" "$STATE/work/e2e_node.test"
  cd "$STATE/work"
  # cAdvisor (the Go kubelet's stats) finds the containers through containerd's socket; an
  # accepted, ineffective cAdvisor flag for kubelet-rs.
  local kubelet_flags="--runtime-cgroups=/runtime --containerd=$sock"
  [ "$kind" = go-kubelet ] && kubelet_flags="$kubelet_flags --pod-infra-container-image=kubelet-rs.local/pause:1.0"
  kubelet_flags="$kubelet_flags ${KUBELET_RS_NODE_E2E_KUBELET_FLAGS:-}"
  log "$kind: specs on $GINKGO_NODES ginkgo nodes (log: $out/ginkgo.log)"
  local rc=0
  # No systemd-run (this host has no systemd running; with it on PATH the suite would start
  # the kubelet as a unit): inside the namespace it is an empty file nobody may execute.
  local d
  : >"$STATE/no-systemd-run" && chmod 0644 "$STATE/no-systemd-run"
  for d in ${PATH//:/ }; do
    [ -x "$d/systemd-run" ] && mount --bind "$STATE/no-systemd-run" "$d/systemd-run"
  done
  for d in ${PATH//:/ }; do
    [ ! -x "$d/systemd-run" ] || die "cannot hide $d/systemd-run"
  done
  # The suite runs some commands through sudo (`sudo cat /proc/PID/oom_score_adj`, `sudo kill`
  # of the runtime); a node e2e host has it, this one may not. The run is root already: a sudo
  # that runs the command as it is.
  local tools="$STATE/tools"
  mkdir -p "$tools"
  if ! command -v sudo >/dev/null; then
    printf '#!/bin/sh\n# the node e2e run is root: run the command as it is\nwhile [ $# -gt 0 ]; do case "$1" in --) shift; break ;; -*) shift ;; *) break ;; esac; done\nexec "$@"\n' >"$tools/sudo"
    chmod 0755 "$tools/sudo"
  fi
  # kubelet-rs has no Dynamic Kubelet Config (Go removed it in 1.24): the runner restarts it with
  # the configuration a spec asks for (scripts/node-e2e-config-source.py).
  if [ "$kind" = kubelet-rs ]; then
    python3 "$SCRIPT_DIR/node-e2e-config-source.py" "$STATE/work" "$NODE_NAME" "$kdir/kubelet" \
      "$out/config-source.log" &
  fi
  PATH="$tools:$PATH" "$CONF_CACHE/bin/ginkgo" -nodes="$GINKGO_NODES" -noColor -flakeAttempts="${FLAKE_ATTEMPTS:-1}" \
    -focus="$focus" -skip="$(skip_regex)" \
    "$STATE/work/e2e_node.test" -- \
    --k8s-bin-dir="$kdir" --node-name="$NODE_NAME" \
    --container-runtime=remote --container-runtime-endpoint="$endpoint" \
    --image-service-endpoint="$endpoint" --prepull-images=false \
    --container-runtime-process-name=containerd --container-runtime-pid-file="$pidfile" \
    --report-dir="$out/junit" --kubelet-flags="$kubelet_flags" \
    >"$out/ginkgo.log" 2>&1 || rc=$?
  echo "$rc" >"$out/ginkgo.rc"
  kill "$supervisor" 2>/dev/null || true
  wait "$supervisor" 2>/dev/null || true
  cd /
  KUBELET_RS_NODE_INSTANCE=$INSTANCE bash "$SCRIPT_DIR/node-env.sh" down >/dev/null 2>&1 || true
}

# run_in_namespaces KIND KUBELET_DIR FOCUS OUT
run_in_namespaces() {
  local kind=$1 kdir=$2 focus=$3 out=$4 target fstype opts
  local mounts
  mounts=$(cgroup_mounts)
  [ -n "$mounts" ] || die "no cgroup hierarchy under /sys/fs/cgroup"
  while read -r target fstype opts; do make_cgroup "$target/$NS_CGROUP"; done <<<"$mounts"
  # /var/lib/kubelet must exist to be mounted over; made here, removed after.
  if ! [ -e /var/lib/kubelet ]; then
    mkdir /var/lib/kubelet
    touch "$STATE/made-var-lib-kubelet"
  fi
  (
    # Into the run's cgroup first: the new cgroup namespace is rooted where its creator is.
    while read -r target fstype opts; do
      echo "$BASHPID" >"$target/$NS_CGROUP/cgroup.procs" || die "cannot move into $target/$NS_CGROUP"
    done <<<"$mounts"
    exec unshare --pid --fork --net --mount --cgroup --uts --propagation private -- \
      bash "$SCRIPT_DIR/node-e2e.sh" inner "$kind" "$kdir" "$focus" "$out"
  ) || true
}

# Removes what a run (or an interrupted one) left on the host.
cleanup() {
  local target fstype opts
  while read -r target fstype opts; do
    remove_cgroup_tree "$target/$NS_CGROUP"
  done < <(cgroup_mounts)
  if [ -f "$STATE/made-var-lib-kubelet" ]; then
    rmdir /var/lib/kubelet 2>/dev/null || log "warning: /var/lib/kubelet is not empty"
    rm -f "$STATE/made-var-lib-kubelet"
  fi
  # The run's state (the kubelet's root dir: emptyDir contents, checkpoints, the registry's
  # images); results stay.
  stop_mirror
  rm -rf "$STATE/fs" "$STATE/work"
}

# ---------------------------------------------------------------------------------------------
# runs


cmd_run() {
  need_root
  local kind=${1:-kubelet-rs} focus=${2:-$FOCUS_CI} kdir out t0=$SECONDS
  case "$focus" in
    *Serial*) export KUBELET_RS_NODE_E2E_SKIP_ALWAYS='\[Flaky\]' KUBELET_RS_NODE_E2E_NODES=1 ;;
    *Slow*) export KUBELET_RS_NODE_E2E_SKIP_ALWAYS='\[Flaky\]|\[Serial\]' ;;
  esac
  SKIP_ALWAYS=${KUBELET_RS_NODE_E2E_SKIP_ALWAYS:-$SKIP_ALWAYS}
  GINKGO_NODES=${KUBELET_RS_NODE_E2E_NODES:-$GINKGO_NODES}
  one_run_at_a_time "$STATE" "node e2e"
  cmd_build
  kdir=$(kubelet_dir "$kind")
  out="$RESULTS/$kind"
  rm -rf "$out" && mkdir -p "$out/junit"
  echo "$focus" >"$out/focus"
  echo "$SKIP_ALWAYS" >"$out/skip-always"
  cleanup
  trap cleanup EXIT
  run_in_namespaces "$kind" "$kdir" "$focus" "$out"
  cleanup
  trap - EXIT
  echo "$((SECONDS - t0))" >"$out/seconds"
  log "$kind: done in $((SECONDS - t0))s; results in $out"
  summarize "$kind" | tee "$out/summary.txt"
}

# rerun KIND FOCUS: the specs FOCUS selects (of the last `run`'s focus and skip list) again, on
# one ginkgo node in fresh namespaces, each with up to three attempts; the results go to $RESULTS/KIND/rerun-<time>/junit and
# replace the run's results of those specs.
cmd_rerun() {
  need_root
  local kind=${1:-kubelet-rs} focus=${2:-} kdir out t0=$SECONDS
  [ -n "$focus" ] || die "usage: $0 rerun KIND FOCUS"
  [ -f "$RESULTS/$kind/focus" ] || die "no run of $kind in $RESULTS to re-run specs of"
  export KUBELET_RS_NODE_E2E_SKIP_ALWAYS
  KUBELET_RS_NODE_E2E_SKIP_ALWAYS=$(cat "$RESULTS/$kind/skip-always")
  # Up to three attempts: the first runs while the suite's own services are still starting
  # (the apiserver, etcd, the namespace controller keep both cores busy for seconds), the
  # next ones once they have settled.
  export KUBELET_RS_NODE_E2E_NODES=1 FLAKE_ATTEMPTS=${KUBELET_RS_NODE_E2E_RERUN_ATTEMPTS:-3}
  one_run_at_a_time "$STATE" "node e2e"
  cmd_build
  kdir=$(kubelet_dir "$kind")
  out="$RESULTS/$kind/rerun-$(date +%Y%m%d%H%M%S)"
  mkdir -p "$out/junit"
  cleanup
  trap cleanup EXIT
  log "$kind: re-running $focus"
  run_in_namespaces "$kind" "$kdir" "$focus" "$out"
  cleanup
  trap - EXIT
  log "$kind: re-run done in $((SECONDS - t0))s; results in $out"
  summarize "$kind" | tee "$RESULTS/$kind/summary.txt"
}

# summarize KIND: `N passed, M failed, K skipped` over the run's JUnit (then any re-runs', in the
# order made: a later result of a spec replaces an earlier one), the failed specs, and
# $RESULTS/KIND/{passed,failed}.txt. Only the focused specs count; one the skip list names
# counts as skipped.
summarize() {
  local kind=$1 out="$RESULTS/$1" parts p
  [ -f "$out/skip-always" ] && SKIP_ALWAYS=$(cat "$out/skip-always")
  parts=("$out/junit")
  while IFS= read -r p; do parts+=("$p/junit"); done < <(ls -dtr "$out"/rerun-* 2>/dev/null)
  python3 "$SCRIPT_DIR/junit-summary.py" "$out" "$(skip_regex)" \
    "$(cat "$out/focus" 2>/dev/null || echo "$FOCUS_CI")" "${parts[@]}"
}

# go_only_passes DIR: the specs Go passed and kubelet-rs did not, one a line, of the runs
# under DIR (DIR/KIND/passed.txt); exit 1 when either run is missing.
go_only_passes() {
  [ -f "$1/go-kubelet/passed.txt" ] && [ -f "$1/kubelet-rs/passed.txt" ] || return 1
  grep -F -x -v -f "$1/kubelet-rs/passed.txt" "$1/go-kubelet/passed.txt" || true
}

print_table() {
  local k only
  printf '%-12s %s\n' kubelet result
  for k in kubelet-rs go-kubelet; do
    printf '%-12s %s (%ss)\n' "$k" "$(head -n 1 "$RESULTS/$k/summary.txt" 2>/dev/null || echo 'no run')" \
      "$(cat "$RESULTS/$k/seconds" 2>/dev/null || echo '?')"
  done
  if only=$(go_only_passes "$RESULTS"); then
    echo "Go passes, kubelet-rs does not:"
    if [ -n "$only" ]; then sed 's/^/  /' <<<"$only"; else echo "  (none)"; fi
  fi
}

# groups [KIND|all] [GROUP...]: each group (default: all) against the kubelet (default: both),
# results in $STATE/results-groups/GROUP/KIND, then the table.
cmd_groups() {
  local kinds=(go-kubelet kubelet-rs) g k names
  case "${1:-all}" in
    all) ;;
    kubelet-rs | go-kubelet) kinds=("$1") ;;
    *) die "groups: kubelet-rs, go-kubelet or all, then group names" ;;
  esac
  shift || true
  if [ $# -gt 0 ]; then names=("$@"); else mapfile -t names < <(group_names); fi
  for g in "${names[@]}"; do
    group_focus "$g" >/dev/null
    for k in "${kinds[@]}"; do
      (RESULTS="$GROUP_RESULTS/$g" && cmd_run "$k" "$(group_focus "$g")") || log "group $g ($k): run failed"
    done
  done
  print_group_table
}

# The groups' last results side by side (the README's table).
print_group_table() {
  local g k line only
  printf '| group | Go kubelet v1.20.2 | kubelet-rs | Go passes, kubelet-rs fails |\n|---|---|---|---|\n'
  while read -r g; do
    line="| $g"
    for k in go-kubelet kubelet-rs; do
      # Counted again: the skip list may have changed since the run.
      if [ -d "$GROUP_RESULTS/$g/$k/junit" ]; then
        (RESULTS="$GROUP_RESULTS/$g" && summarize "$k" >"$GROUP_RESULTS/$g/$k/summary.txt")
      fi
      if [ -f "$GROUP_RESULTS/$g/$k/summary.txt" ]; then
        line="$line | $(head -n 1 "$GROUP_RESULTS/$g/$k/summary.txt") ($(cat "$GROUP_RESULTS/$g/$k/seconds" 2>/dev/null || echo '?') s)"
      else
        line="$line | not run"
      fi
    done
    if only=$(go_only_passes "$GROUP_RESULTS/$g"); then
      line="$line | $(paste -sd ';' - <<<"$only")"
    else
      line="$line | ?"
    fi
    echo "$line |"
  done < <(group_names)
}

cmd_compare() {
  local focus=${1:-$FOCUS_CI}
  cmd_run go-kubelet "$focus" >/dev/null
  cmd_run kubelet-rs "$focus" >/dev/null
  print_table
}

# The whole file is read before anything runs (main and exit are one compound command on the
# last line), so editing the script during a run cannot change it.
main() {
  case "${1:-}" in
    build) cmd_build ;;
    run)
      shift
      cmd_run "$@"
      ;;
    compare)
      shift
      cmd_compare "$@"
      ;;
    groups)
      shift
      cmd_groups "$@"
      ;;
    group-table) print_group_table ;;
    go-kubelet)
      # Not `echo "$(go_kubelet)/kubelet"`: echo's status would hide a failed build.
      local dir
      dir=$(go_kubelet)
      echo "$dir/kubelet"
      ;;
    sample-device-plugin) sample_device_plugin ;;
    table) print_table ;;
    summary) summarize "${2:-kubelet-rs}" ;;
    rerun)
      shift
      cmd_rerun "$@"
      ;;
    ci)
      RESULTS="$STATE/results-ci"
      KUBELET_RS_NODE_E2E_PROFILE=${KUBELET_RS_NODE_E2E_PROFILE:-debug}
      # Two attempts per spec, and what failed both gets one more run alone (up to three
      # attempts there), as the cluster suite's CI subset (the summary lists what flaked). "Retrieving logs over websockets"
      # reads the log the moment the pod is Running, before the container's first line may
      # have reached it: upstream's race (kubernetes#129955, fixed in the test in 1.33), not
      # the kubelet's; under 4 parallel ginkgo nodes it can lose twice.
      # (Exported: the run's ginkgo starts in a process of its own, `inner`.)
      export FLAKE_ATTEMPTS=2
      cmd_run kubelet-rs "$FOCUS_CI"
      if grep -q . "$RESULTS/kubelet-rs/failed.txt"; then
        local again
        again=$(python3 "$SCRIPT_DIR/junit-summary.py" --focus-of "$RESULTS/kubelet-rs/failed.txt")
        log "re-running what failed, alone: $(wc -l <"$RESULTS/kubelet-rs/failed.txt") spec(s)"
        cmd_rerun kubelet-rs "$again"
      fi
      ! grep -q . "$RESULTS/kubelet-rs/failed.txt"
      ;;
    skips)
      for e in "${SKIPS[@]}"; do printf -- '- `%s`: %s\n' "${e%% :: *}" "${e#* :: }"; done
      ;;
    inner)
      shift
      cmd_inner "$@"
      ;;
    down) cleanup ;;
    *)
      echo "usage: $0 build|run [kubelet-rs|go-kubelet] [FOCUS]|compare [FOCUS]|groups [KIND|all] [GROUP...]|group-table|table|summary KIND|rerun KIND FOCUS|ci|skips|go-kubelet|sample-device-plugin|down" >&2
      exit 2
      ;;
  esac
}

[ "${BASH_SOURCE[0]}" != "$0" ] || { main "$@"; exit $?; }
