#!/usr/bin/env bash
# The systemd host tier (issue #35): kubelet-rs on a systemd host with cgroup v2, in the VM of
# scripts/vm.sh, as a systemd service against the VM's containerd.
#
#   scripts/vm-tier.sh [systemd|cgroupfs|all]     (default all: both drivers, one fresh VM each)
#
# Each scenario boots a throwaway copy of the image, gives containerd the driver's
# `SystemdCgroup`, starts the host-built kubelet (`cgroupDriver: <driver>`, graceful node
# shutdown with 30 s of which 10 s for critical pods) with static pods of each QoS class, and
# checks, failing with what it saw:
#   - the pods run, in their cgroups (slices under the systemd driver, made by systemd), with
#     the limits Go gives them in memory.max / cpu.max / cpu.weight;
#   - node allocatable on the pods' cgroup (capacity − systemReserved − kubeReserved), the
#     system reservation on /system.slice and the kube one on /kube.slice
#     (`enforceNodeAllocatable: [pods, system-reserved, kube-reserved]`);
#     `kubeletCgroups: /system.slice/kubelet.service` is taken as the cgroupfs path it is;
#   - a container over its memory limit is OOM-killed and restarted, reported `OOMKilled`;
#   - /stats/summary gives real numbers for the node, the kubelet and the pods, and
#     /metrics/cadvisor for the containers, their `id` label being their real cgroup;
#   - eviction's memory signal: with `memory.available` set 300Mi below what the node has, a
#     pod filling 600Mi of memory puts the node under memory pressure and the eviction
#     manager acts (static pods are critical, as in Go: they are kept);
#   - a pod cgroup no pod owns is removed;
#   - (systemd driver) the seed node's kubelet — its KubeletConfiguration and command line
#     unchanged (kubelet-bin/testdata/seed-*) — joins the control plane on the host by TLS
#     bootstrap, goes Ready, runs the static pods' mirror pods and a pod the scheduler places,
#     and authenticates its API as configured (scripts/control-plane.sh starts the control
#     plane when it is not up);
#   - `systemctl poweroff`: logind's shutdown signal makes the kubelet stop the regular pods,
#     then the critical one after the regular pods' 20 s, release its delay lock, and the host
#     goes down without waiting on the pods.
# Results (the console log and the kubelet's journal) are kept in $KUBELET_RS_VM_TIER_OUT
# (default /var/lib/kubelet-rs/vm-tier/<driver>).
#
# Needs the local images (scripts/node-env.sh up builds them) and a kubelet binary
# ($KUBELET_RS_VM_KUBELET, default the debug build, built if missing).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
VM="$SCRIPT_DIR/vm.sh"
TARGET=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target}
KUBELET=${KUBELET_RS_VM_KUBELET:-$TARGET/debug/kubelet}
OUT_ROOT=${KUBELET_RS_VM_TIER_OUT:-/var/lib/kubelet-rs/vm-tier}
STATE=${KUBELET_RS_VM_STATE:-/var/lib/kubelet-rs/vm}

# The VM's node name, and how the tier's own kubelet is started there (a transient unit).
NODE=kubelet-rs-vm
START_KUBELET="systemd-run --unit=kubelet /usr/local/bin/kubelet --config /etc/kubernetes/kubelet.yaml --hostname-override $NODE"

log() { printf '[vm-tier] %s\n' "$*" >&2; }
# The scenario being run: its results directory (die keeps the kubelet's journal there).
CURRENT_OUT=
die() {
  log "FAIL: $*"
  if [ -n "$CURRENT_OUT" ]; then
    "$SCRIPT_DIR/vm.sh" run journalctl -u kubelet --no-pager >"$CURRENT_OUT/kubelet.log" 2>&1 || true
    log "the kubelet's journal: $CURRENT_OUT/kubelet.log"
    "$SCRIPT_DIR/vm.sh" down >/dev/null 2>&1 || true
  fi
  exit 1
}
vm() { "$VM" "$@"; }

# The local images' OCI archives (node-env.sh builds them in every instance's node dir).
image_tar() {
  local name=$1 t
  for t in "${KUBELET_RS_VM_IMAGES_DIR:-/var/lib/kubelet-rs/node/images}/$name/image.tar" \
    /var/lib/kubelet-rs/node*/images/"$name"/image.tar; do
    [ -f "$t" ] && {
      echo "$t"
      return 0
    }
  done
  die "no $name image archive: run scripts/node-env.sh up first"
}

# wait_for SECONDS WHAT CMD...: CMD (run on the host) until it succeeds.
wait_for() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 3
  done
  log "ok: $what"
}

manifests() {
  local dir=$1
  # Regular pods (priority 0); the burstable one leaves on SIGTERM, the others only on SIGKILL.
  cat >"$dir/burstable.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: burstable, namespace: default}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: app
    image: kubelet-rs.local/busybox:1.0
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 500m, memory: 64Mi}
EOF
  cat >"$dir/guaranteed.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: guaranteed, namespace: default}
spec:
  containers:
  - name: app
    image: kubelet-rs.local/busybox:1.0
    command: [sh, -c, "while true; do sleep 1; done"]
    resources:
      limits: {cpu: 250m, memory: 48Mi}
EOF
  cat >"$dir/besteffort.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: besteffort, namespace: default}
spec:
  containers:
  - name: app
    image: kubelet-rs.local/busybox:1.0
    command: [sh, -c, "while true; do sleep 1; done"]
EOF
  # Over its limit after 3 s: OOM-killed, restarted.
  cat >"$dir/oom.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: oom, namespace: default}
spec:
  containers:
  - name: hog
    image: kubelet-rs.local/busybox:1.0
    command: [sh, -c, "sleep 3; tail /dev/zero"]
    resources:
      limits: {memory: 32Mi}
EOF
  # A critical pod (system-node-critical's priority): stopped in the last 10 s.
  cat >"$dir/critical.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: critical, namespace: kube-system}
spec:
  priority: 2000001000
  containers:
  - name: app
    image: kubelet-rs.local/busybox:1.0
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
EOF
}

kubelet_config() {
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: $1
staticPodPath: /etc/kubernetes/manifests
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
readOnlyPort: 10255
failSwapOn: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
systemReserved: {memory: 1Gi}
systemReservedCgroup: /system.slice
kubeReserved: {memory: 256Mi}
kubeReservedCgroup: /kube.slice
enforceNodeAllocatable: [pods, system-reserved, kube-reserved]
kubeletCgroups: /system.slice/kubelet.service
EOF
}

# pods_json: the kubelet's pods (read-only port).
pods_json() { vm run curl -sf http://127.0.0.1:10255/pods; }

# pod_field NAME JQ: a field of the pod whose name starts with NAME.
pod_field() {
  pods_json | jq -r --arg n "$1" ".items[] | select(.metadata.name | startswith(\$n)) | $2"
}

all_running() {
  local n
  n=$(pods_json | jq '[.items[] | select(.status.phase == "Running")] | length')
  [ "$n" = 5 ]
}

oom_restarted() {
  local s
  s=$(pod_field oom '.status.containerStatuses[0] | "\(.restartCount) \(.lastState.terminated.reason // "")"')
  [ "${s%% *}" -ge 1 ] && [ "${s#* }" = OOMKilled ]
}

# pod_dir NAME DRIVER: the pod's cgroup directory in the VM.
pod_dir() {
  local uid qos esc
  uid=$(pod_field "$1" .metadata.uid)
  qos=$(pod_field "$1" .status.qosClass | tr '[:upper:]' '[:lower:]')
  if [ "$2" = systemd ]; then
    esc=${uid//-/_}
    case $qos in
      guaranteed) echo "/sys/fs/cgroup/kubepods.slice/kubepods-pod$esc.slice" ;;
      *) echo "/sys/fs/cgroup/kubepods.slice/kubepods-$qos.slice/kubepods-$qos-pod$esc.slice" ;;
    esac
  else
    case $qos in
      guaranteed) echo "/sys/fs/cgroup/kubepods/pod$uid" ;;
      *) echo "/sys/fs/cgroup/kubepods/$qos/pod$uid" ;;
    esac
  fi
}

# check_limits DRIVER: Go's values for the pods' cgroups (cpu.weight from Go's shares).
check_limits() {
  local driver=$1 name want dir got
  for spec in "burstable 67108864 50000_100000 4" "guaranteed 50331648 25000_100000 10" \
    "besteffort max max_100000 1" "oom 33554432 max_100000 1"; do
    read -r name mem cpu weight <<<"$spec"
    dir=$(pod_dir "$name" "$driver")
    got=$(vm run "echo \$(cat $dir/memory.max) \$(cat $dir/cpu.max | tr ' ' _) \$(cat $dir/cpu.weight)")
    want="$mem $cpu $weight"
    [ "$got" = "$want" ] || die "$driver: $name's $dir has memory.max cpu.max cpu.weight '$got', want '$want'"
  done
  log "ok: the pods' cgroups have Go's limits"
  if [ "$driver" = systemd ]; then
    dir=$(pod_dir burstable systemd)
    local unit
    unit=$(basename "$dir")
    got=$(vm run systemctl show -p MemoryMax --value "$unit")
    [ "$got" = 67108864 ] || die "systemd's MemoryMax of $unit is '$got', want 67108864"
    got=$(vm run systemctl show -p Description --value "$unit")
    [ "$got" = "libcontainer container $unit" ] || die "$unit is not the kubelet's slice: '$got'"
    vm run "ls $dir" | grep -q '^cri-containerd-.*\.scope$' ||
      die "containerd's scopes are not under the burstable pod's slice"
    log "ok: the pod slices are systemd units holding containerd's scopes"
  fi
}

# check_reserved DRIVER: capacity − 1Gi − 256Mi on kubepods, 1Gi on /system.slice, 256Mi on
# /kube.slice (for the systemd driver also as the slices' unit properties), and the kubelet in
# its kubeletCgroups.
check_reserved() {
  local driver=$1 kubepods=/sys/fs/cgroup/kubepods got want total gib=1073741824 kube=268435456
  [ "$driver" = systemd ] && kubepods=/sys/fs/cgroup/kubepods.slice
  total=$(($(vm run "awk '/^MemTotal:/ {print \$2}' /proc/meminfo") * 1024))
  want="$((total - gib - kube)) $gib $kube"
  got=$(vm run "echo \$(cat $kubepods/memory.max) \$(cat /sys/fs/cgroup/system.slice/memory.max) \$(cat /sys/fs/cgroup/kube.slice/memory.max)")
  [ "$got" = "$want" ] || die "$driver: kubepods, system.slice and kube.slice memory.max are '$got', want '$want'"
  if [ "$driver" = systemd ]; then
    got=$(vm run systemctl show -p MemoryMax --value system.slice kube.slice | xargs)
    [ "$got" = "$gib $kube" ] || die "system.slice's and kube.slice's MemoryMax properties are '$got', want '$gib $kube'"
  fi
  log "ok: node allocatable on kubepods ($((total - gib - kube))), the reservations on system.slice and kube.slice"
  # kubeletCgroups is a cgroupfs path with either driver (Go's createManager): the service's own.
  got=$(vm run 'cat /proc/$(systemctl show -p MainPID --value kubelet)/cgroup')
  [ "$got" = 0::/system.slice/kubelet.service ] || die "the kubelet runs in '$got'"
  ! vm run journalctl -u kubelet --no-pager | grep -E 'failed to move the kubelet|placing the kubelet in kubeletCgroups' ||
    die "the kubelet could not be placed in kubeletCgroups"
  log "ok: kubeletCgroups /system.slice/kubelet.service taken as the cgroupfs path"
}

check_summary() {
  local s
  s=$(vm run curl -sf http://127.0.0.1:10255/stats/summary)
  jq -e '.node.memory.workingSetBytes > 0 and .node.memory.availableBytes > 0
    and .node.cpu.usageNanoCores >= 0 and .node.cpu.usageCoreNanoSeconds > 0' <<<"$s" >/dev/null ||
    die "the node's summary: $(jq -c .node.memory <<<"$s")"
  jq -e '[.pods[] | select(.podRef.name | startswith("burstable"))][0]
    | .memory.workingSetBytes > 0 and .cpu.usageCoreNanoSeconds > 0' <<<"$s" >/dev/null ||
    die "the burstable pod's summary: $(jq -c '.pods[] | select(.podRef.name | startswith("burstable"))' <<<"$s")"
  jq -e '.node.systemContainers[] | select(.name == "kubelet") | .memory.workingSetBytes > 0' <<<"$s" >/dev/null ||
    die "the kubelet's system container: $(jq -c '.node.systemContainers' <<<"$s")"
  log "ok: /stats/summary has the node's, the kubelet's and the pods' usage"
  # /metrics/cadvisor: the burstable pod's container, its usage and spec, and an `id` label
  # that is the container's real cgroup (a containerd scope in the pod's slice with systemd).
  local m id
  m=$(vm run curl -sf http://127.0.0.1:10255/metrics/cadvisor)
  series() { grep "^$1{container=\"app\"," <<<"$m" | grep 'pod="burstable' | head -n1; }
  awk '{exit !($2 > 0)}' <<<"$(series container_memory_working_set_bytes)" ||
    die "no working set for the burstable pod in /metrics/cadvisor: $(series container_memory_working_set_bytes)"
  awk '{exit !($2 > 0)}' <<<"$(series container_cpu_usage_seconds_total)" ||
    die "no cpu time for the burstable pod in /metrics/cadvisor"
  [ "$(series container_spec_memory_limit_bytes | awk '{print $2}')" = 67108864 ] &&
    [ "$(series container_spec_cpu_quota | awk '{print $2}')" = 50000 ] ||
    die "the burstable pod's spec series: $(series container_spec_memory_limit_bytes) $(series container_spec_cpu_quota)"
  id=$(series container_memory_working_set_bytes | grep -o 'id="[^"]*"' | cut -d'"' -f2)
  vm run test -d "/sys/fs/cgroup$id" || die "the id label $id is not the container's cgroup"
  log "ok: /metrics/cadvisor has the containers' usage and spec, id $id"
}

# check_memory_eviction DIR: the kubelet restarted with evictionHard memory.available 300Mi
# below the node's available memory (and no system reservation) and a pod that fills 600Mi of
# a memory-backed emptyDir.
check_memory_eviction() {
  local dir=$1 avail threshold phase
  avail=$(vm run curl -sf http://127.0.0.1:10255/stats/summary | jq '.node.memory.availableBytes')
  [ "${avail:-0}" -gt $((1024 * 1024 * 1024)) ] || die "the node has too little memory available: $avail"
  threshold=$((avail - 300 * 1024 * 1024))
  cat >"$dir/hog.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: hog, namespace: default}
spec:
  restartPolicy: Never
  volumes:
  - name: fill
    emptyDir: {medium: Memory}
  containers:
  - name: hog
    image: kubelet-rs.local/busybox:1.0
    command: [sh, -c, "sleep 5; dd if=/dev/zero of=/fill/f bs=1M count=600; sleep 3600"]
    volumeMounts: [{name: fill, mountPath: /fill}]
EOF
  vm copy "$dir/hog.yaml" /etc/kubernetes/manifests/hog.yaml
  # The threshold counts against allocatable as the reservations do (Go's check that the
  # reservations fit the capacity): the system and kube reservations go for this part.
  vm run "sed -i '/^systemReserved/d; /^kubeReserved/d; /^enforceNodeAllocatable/d' /etc/kubernetes/kubelet.yaml &&
    printf 'evictionHard:\n  memory.available: \"%s\"\n' $threshold >>/etc/kubernetes/kubelet.yaml &&
    systemctl restart kubelet"
  # Static pods are critical (Go's IsCriticalPod): the manager sees the pressure and keeps them.
  memory_pressure_seen() {
    vm run journalctl -u kubelet --no-pager |
      grep -q 'attempting to reclaim resource="memory" signal="memory.available"'
  }
  wait_for 240 "memory.available < $threshold after 600Mi more in a pod: the eviction manager acts on it" \
    memory_pressure_seen || die "no memory pressure seen (journal: $(vm run journalctl -u kubelet --no-pager | grep -i evict | tail -3))"
  # The pods are ranked on a fresh summary after the first message: seconds under TCG.
  critical_kept() {
    vm run journalctl -u kubelet --no-pager | grep -q 'cannot evict a critical pod pod=default/hog'
  }
  wait_for 60 "the static hog pod is kept as a critical pod" critical_kept ||
    die "the static hog pod was not kept as a critical pod"
  [ "$(pod_field hog .status.phase)" = Running ] || die "a static pod was evicted"
  log "ok: static pods are critical and stay"
}

check_orphan() {
  local driver=$1 dir
  if [ "$driver" = systemd ]; then
    dir=/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0000_orphan.slice
  else
    dir=/sys/fs/cgroup/kubepods/besteffort/pod0000-orphan
  fi
  vm run mkdir "$dir"
  wait_for 60 "an orphaned pod cgroup is removed" bash -c "! '$VM' run test -d '$dir'" ||
    die "$dir is still there"
}

# check_seed: the seed node's kubelet (../shared/seed-node: its KubeletConfiguration as
# kubelet-bin/testdata/seed-kubelet-conf.yml, its command line) unchanged — the VM has the
# seed's paths (/etc/kubernetes/..., /var/lib/kubelet, containerd's socket) — joins the
# project's control plane on the host by TLS bootstrap (a bootstrap token; the VM's
# 127.0.0.1:6443 is the host's API server through an ssh tunnel): the node registers with the
# seed's label and goes Ready, the static pods get mirror pods, a pod the scheduler places
# there runs, and the kubelet's API authenticates as the seed says (no anonymous requests,
# x509 against /etc/kubernetes/pki/ca.pem, webhook authorization). The tier's kubelet is
# started again afterwards (the pods stay) and the node is deleted from the cluster.
check_seed() {
  local cp="$SCRIPT_DIR/control-plane.sh" bootstrap pki code
  bash "$cp" up >/dev/null || die "the control plane did not start"
  eval "$(bash "$cp" env)"
  pki=$(dirname "$KUBELET_RS_CLUSTER_CA")
  bootstrap=$(bash "$cp" bootstrap-token 1h) || die "no bootstrap token"
  kubectl delete node "$NODE" --ignore-not-found >/dev/null
  vm forward 6443
  vm run mkdir -p /etc/kubernetes/pki
  vm copy "$bootstrap" /etc/kubernetes/bootstrap-kubelet.kubeconfig
  vm copy "$KUBELET_RS_CLUSTER_CA" /etc/kubernetes/pki/ca.pem
  vm copy "$REPO/kubelet-bin/testdata/seed-kubelet-conf.yml" /etc/kubernetes/kubelet-conf.yml
  vm run "systemctl stop kubelet; systemctl reset-failed kubelet 2>/dev/null; rm -f /etc/kubernetes/kubelet.kubeconfig;
    systemd-run --unit=kubelet $(grep -v '^#' "$REPO/kubelet-bin/testdata/seed-command-line.txt")"
  node_ready() {
    [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
  }
  wait_for 240 "the seed's kubelet joined by TLS bootstrap: node $NODE Ready" node_ready ||
    die "node $NODE not Ready: $(kubectl get node "$NODE" -o jsonpath='{.status.conditions}' 2>&1 | tail -c 600)"
  vm run test -s /etc/kubernetes/kubelet.kubeconfig -a -s /var/lib/kubelet/pki/kubelet-client-current.pem ||
    die "no kubeconfig or client certificate written by the TLS bootstrap"
  kubectl get node "$NODE" -o json | jq -e '.metadata.labels["node.kubernetes.io/node"] == ""' >/dev/null ||
    die "the node lacks the label of --node-labels"
  # (Not the critical one: it gives its priority as a number, which the API's Priority
  # admission refuses without the class name.)
  mirrors() { kubectl get pod "burstable-$NODE" >/dev/null && kubectl get pod "guaranteed-$NODE" >/dev/null; }
  wait_for 120 "the static pods have mirror pods" mirrors || die "no mirror pods: $(kubectl get pods -A -o wide 2>&1 | tail -5)"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: seed-api-pod, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: kubelet-rs.local/busybox:1.0
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
EOF
  api_pod_running() { [ "$(kubectl get pod seed-api-pod -o jsonpath='{.status.phase}')" = Running ]; }
  wait_for 180 "a pod the scheduler placed on the node runs" api_pod_running ||
    die "seed-api-pod: $(kubectl get pod seed-api-pod -o jsonpath='{.status}' 2>&1 | tail -c 600)"
  code=$(vm run curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:10250/pods || true)
  [ "$code" = 401 ] || die "an anonymous request to :10250/pods got $code, want 401 (anonymous disabled)"
  vm copy "$pki/admin.crt" /root/admin.crt
  vm copy "$pki/admin.key" /root/admin.key
  code=$(vm run curl -sk -o /dev/null -w '%{http_code}' --cert /root/admin.crt --key /root/admin.key https://127.0.0.1:10250/pods || true)
  vm run rm -f /root/admin.crt /root/admin.key
  [ "$code" = 200 ] || die "the cluster admin's certificate at :10250/pods got $code, want 200 (x509 + webhook authorization)"
  log "ok: the kubelet's API: anonymous 401, the admin's client certificate 200"
  kubectl delete pod seed-api-pod --grace-period=1 --wait=true --timeout=120s >/dev/null ||
    die "seed-api-pod was not deleted"
  log "ok: the pod deleted through the API server"
  # Back to the tier's kubelet (standalone) for the shutdown check; the static pods stay.
  vm run "systemctl stop kubelet; systemctl reset-failed kubelet 2>/dev/null; $START_KUBELET" >/dev/null
  kubectl delete node "$NODE" --ignore-not-found >/dev/null
  critical_running() { [ "$(pod_field critical .status.phase)" = Running ]; }
  wait_for 120 "the tier's kubelet is back" critical_running || die "the tier's kubelet did not come back"
}

check_shutdown() {
  local out=$1 pid t0 began killed_critical released lines
  vm run 'mkdir -p /etc/systemd/journald.conf.d && printf "[Journal]\nForwardToConsole=yes\nMaxLevelConsole=info\nTTYPath=/dev/ttyS0\n" >/etc/systemd/journald.conf.d/console.conf && systemctl restart systemd-journald'
  vm run journalctl -u kubelet --no-pager >"$out/kubelet-before-poweroff.log" 2>&1 || true
  pid=$(cat "$STATE/qemu.pid")
  t0=$SECONDS
  vm run systemctl poweroff || true
  while [ -d "/proc/$pid" ] && [ $((SECONDS - t0)) -lt 150 ]; do sleep 1; done
  cp "$STATE/console.log" "$out/console.log"
  [ -d "/proc/$pid" ] && die "the VM did not power off within 150 s"
  log "ok: powered off in $((SECONDS - t0)) s"
  lines=$(grep -a 'kubelet\[' "$out/console.log" |
    grep -a -E 'shutdown begins|killing pod|pod terminated|lock released|timed out|SIGTERM received' || true)
  echo "$lines" >"$out/shutdown.log"
  stamp() { grep -a -m1 -E "$1" <<<"$lines" | grep -o 'T[0-9:.]*Z' | head -n1 || true; }
  began=$(stamp 'shutdown begins')
  [ -n "$began" ] || die "the kubelet never saw the shutdown signal (console: $out/console.log)"
  killed_critical=$(stamp 'killing pod pod=kube-system/critical')
  # The end of the hold: the kubelet's release, or logind going on at InhibitDelayMaxSec (the
  # kubelet's SIGTERM) when the release is late. The critical group's 10 s end at 30 s, the same
  # instant as logind's limit, so under TCG either comes first (Go races the same way).
  released=$(stamp 'lock released|SIGTERM received')
  [ -n "$killed_critical" ] && [ -n "$released" ] || die "no critical kill or no end of the hold: $lines"
  secs() { local t=${1#T}; t=${t%Z}; awk -F: '{print $1*3600 + $2*60 + $3}' <<<"$t"; }
  local d_crit d_rel
  d_crit=$(awk -v a="$(secs "$began")" -v b="$(secs "$killed_critical")" 'BEGIN{printf "%.1f", b-a}')
  d_rel=$(awk -v a="$(secs "$began")" -v b="$(secs "$released")" 'BEGIN{printf "%.1f", b-a}')
  for p in default/burstable default/guaranteed default/besteffort default/oom; do
    grep -a -q "killing pod pod=$p.*grace_seconds=20" <<<"$lines" ||
      die "$p was not killed with the regular pods' 20 s: $lines"
  done
  # logind goes on at 30 s whatever the kubelet does; under TCG stopping a pod takes seconds,
  # so a release a little after that is the kubelet seeing it late, not holding on.
  awk -v c="$d_crit" -v r="$d_rel" 'BEGIN{exit !(c >= 19 && c <= 23 && r >= c && r <= 33)}' ||
    die "critical pod killed after ${d_crit}s (want ~20), hold ended after ${d_rel}s (want after it, by ~30)"
  local how="lock released"
  grep -a -q 'lock released' <<<"$lines" || how="logind went on (the release came late)"
  log "ok: regular pods killed first (20 s), the critical pod after ${d_crit}s, $how after ${d_rel}s"
}

scenario() {
  local driver=$1 out="$OUT_ROOT/$1" dir t0=$SECONDS
  rm -rf "$out" && mkdir -p "$out"
  CURRENT_OUT=$out
  log "== $driver driver on cgroup v2 (results: $out)"
  vm down >/dev/null 2>&1 || true
  vm up
  dir=$(mktemp -d)
  manifests "$dir"
  kubelet_config "$driver" >"$dir/kubelet.yaml"
  # Stripped: half the bytes through qemu's user-mode network.
  strip -o "$dir/kubelet" "$KUBELET"
  vm copy "$dir/kubelet" /usr/local/bin/kubelet
  rm -f "$dir/kubelet"
  vm copy "$(image_tar pause)" /root/pause.tar
  vm copy "$(image_tar busybox)" /root/busybox.tar
  vm copy "$dir/kubelet.yaml" /etc/kubernetes/kubelet.yaml
  for f in "$dir"/*.yaml; do
    [ "$(basename "$f")" = kubelet.yaml ] || vm copy "$f" "/etc/kubernetes/manifests/$(basename "$f")"
  done
  local systemd_cgroup=true
  [ "$driver" = systemd ] || systemd_cgroup=false
  # kubeReservedCgroup must exist (Go's check): a slice of its own, as operators make one.
  vm run "printf '[Unit]\nDescription=Kubernetes reserved\n' >/etc/systemd/system/kube.slice &&
    systemctl daemon-reload && systemctl start kube.slice && test -d /sys/fs/cgroup/kube.slice"
  vm run "sed -i 's/SystemdCgroup = .*/SystemdCgroup = $systemd_cgroup/' /etc/containerd/config.toml && systemctl restart containerd &&
    for i in pause busybox; do ctr -n k8s.io images import --base-name kubelet-rs.local/\$i /root/\$i.tar >/dev/null; done &&
    $START_KUBELET"
  wait_for 240 "the five pods run" all_running ||
    die "pods not running: $(pods_json | jq -c '[.items[] | {n: .metadata.name, p: .status.phase}]' 2>/dev/null)"
  check_limits "$driver"
  check_reserved "$driver"
  wait_for 120 "the OOM-killed container restarted, reported OOMKilled" oom_restarted ||
    die "oom: $(pod_field oom '.status.containerStatuses[0]' | tr -d '\n')"
  check_summary
  check_memory_eviction "$dir"
  check_orphan "$driver"
  if [ "$driver" = systemd ]; then check_seed; fi
  check_shutdown "$out"
  vm down >/dev/null 2>&1 || true
  rm -rf "$dir"
  log "== $driver: passed in $((SECONDS - t0)) s"
}

[ -x "$KUBELET" ] || (cd "$REPO" && CARGO_TARGET_DIR=$TARGET cargo build -q -p kubelet-bin) ||
  die "building the kubelet failed"
vm image
case "${1:-all}" in
  systemd | cgroupfs) scenario "$1" ;;
  all)
    scenario systemd
    scenario cgroupfs
    ;;
  *)
    echo "usage: $0 [systemd|cgroupfs|all]" >&2
    exit 2
    ;;
esac
