#!/usr/bin/env bash
# kubelet-rs node environment: a private containerd (CRI v1) with CNI and locally built images.
#
#   scripts/node-env.sh up      install what is missing, write configs, build images, start containerd
#   scripts/node-env.sh down    remove every sandbox/container, stop containerd, clean mounts/netns/cgroups
#   scripts/node-env.sh status  print what is running
#
# Runs as root on Debian. Idempotent: `up` twice leaves one containerd running; `down` works on
# a machine where `up` never ran. Everything lives under $NODE_DIR and $RUN_DIR so that it never
# touches a system containerd.
set -euo pipefail

NODE_DIR=${KUBELET_RS_NODE_DIR:-/var/lib/kubelet-rs/node}
RUN_DIR=${KUBELET_RS_RUN_DIR:-/run/kubelet-rs}
CTD_DIR="$NODE_DIR/containerd"
SOCK="$RUN_DIR/containerd/containerd.sock"
PID_FILE="$RUN_DIR/containerd/containerd.pid"
LOG_FILE="$NODE_DIR/containerd.log"
CNI_CONF_DIR="$NODE_DIR/cni/net.d"
CNI_DATA_DIR="$NODE_DIR/cni/networks"
IMAGES_DIR="$NODE_DIR/images"
CNI_NET_NAME="kubelet-rs"
BRIDGE="kubeletrs0"
POD_SUBNET="10.88.0.0/16"
PAUSE_IMAGE="kubelet-rs.local/pause:1.0"
BUSYBOX_IMAGE="kubelet-rs.local/busybox:1.0"
# Cgroup parents (relative to each hierarchy root) that tests and the kubelet create pods under.
TEST_CGROUPS=${KUBELET_RS_TEST_CGROUPS:-"kubelet-rs-test kubelet-rs"}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PACKAGES=(containerd runc containernetworking-plugins busybox-static umoci protobuf-compiler
  iproute2 iptables gcc libc6-dev)
BUSYBOX_APPLETS=(sh ash ls cat echo sleep httpd wget date env touch rm mkdir ps kill true false
  nc hostname id grep sed head tail wc cp mv ln chmod printf test uname whoami sync stat
  mount umount ip ifconfig nslookup seq tee dd df du free top timeout xargs yes basename dirname
  pwd vi which uptime readlink realpath find sort uniq cut tr awk nproc mktemp base64 md5sum
  sha256sum netstat ping)

log() { printf '[node-env] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

ctr_() { ctr -a "$SOCK" -n k8s.io "$@"; }

# The pid of the containerd running our config (exact command line), if any.
find_containerd_pid() {
  local d cmd want="containerd --config $CTD_DIR/config.toml "
  for d in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
    if [ "$cmd" = "$want" ]; then
      echo "${d#/proc/}"
      return 0
    fi
  done
  return 1
}

containerd_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  # Make sure the pid still is our containerd (pids get reused).
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$CTD_DIR/config.toml" || return 1
  echo "$pid"
}

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

write_configs() {
  mkdir -p "$CTD_DIR/root" "$CTD_DIR/state" "$CNI_CONF_DIR" "$CNI_DATA_DIR" "$(dirname "$SOCK")"
  cat >"$CTD_DIR/config.toml" <<EOF
# Written by kubelet-rs scripts/node-env.sh; a private containerd for kubelet-rs.
version = 2
root = "$CTD_DIR/root"
state = "$CTD_DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$SOCK"
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  max_container_log_line_size = 16384
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""
EOF
  # The CRI plugin sets up the pod's loopback itself with /usr/lib/cni/loopback; the chain
  # below configures eth0.
  cat >"$CNI_CONF_DIR/10-kubelet-rs.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NET_NAME",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$CNI_DATA_DIR"
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
}

kernel_settings() {
  # Pod traffic leaves through the bridge; the bridge plugin also enables forwarding, but set
  # it early. br_netfilter is optional (not loadable in every sandbox).
  sysctl -q -w net.ipv4.ip_forward=1 >/dev/null 2>&1 || log "warning: cannot enable ip_forward"
  modprobe br_netfilter >/dev/null 2>&1 || true
  if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    sysctl -q -w net.bridge.bridge-nf-call-iptables=1 >/dev/null 2>&1 || true
  fi
}

start_containerd() {
  local pid i
  if pid=$(containerd_pid); then
    log "containerd already running (pid $pid)"
  else
    rm -f "$SOCK" "$SOCK.ttrpc" "$PID_FILE"
    log "starting containerd (log: $LOG_FILE)"
    # setsid forks when its caller leads a process group (a shell with job control), so `$!`
    # may be setsid's short-lived parent: the pid file gets containerd's own pid below.
    setsid containerd --config "$CTD_DIR/config.toml" >>"$LOG_FILE" 2>&1 </dev/null &
  fi
  for i in $(seq 1 100); do
    if ! containerd_pid >/dev/null; then
      pid=$(find_containerd_pid) && echo "$pid" >"$PID_FILE"
    fi
    if [ -S "$SOCK" ] && ctr -a "$SOCK" version >/dev/null 2>&1 && containerd_pid >/dev/null; then
      return 0
    fi
    if [ "$i" -gt 10 ] && ! containerd_pid >/dev/null; then
      tail -n 30 "$LOG_FILE" >&2
      die "containerd exited"
    fi
    sleep 0.2
  done
  tail -n 30 "$LOG_FILE" >&2
  die "containerd did not answer on $SOCK"
}

# build_image NAME TAG ROOTFS_FILLER ENTRYPOINT...: an OCI image made with umoci, imported into
# containerd's k8s.io namespace (the CRI plugin's namespace).
build_image() {
  local name=$1 tag=$2 filler=$3
  shift 3
  local work="$IMAGES_DIR/$(basename "$name")"
  # The image is rebuilt when what goes into it changes (this script's filler, the pause
  # source, the applet list).
  local stamp
  stamp=$({ declare -f "$filler"; echo "${BUSYBOX_APPLETS[*]}" "$*"; cat "$SCRIPT_DIR/pause.c"; } | sha256sum | cut -c1-16)
  if ctr_ images check "name==$name:$tag" 2>/dev/null | grep -q "$name:$tag" &&
    [ "$(cat "$work.stamp" 2>/dev/null)" = "$stamp" ]; then
    log "image $name:$tag present"
    return 0
  fi
  ctr_ images rm "$name:$tag" >/dev/null 2>&1 || true
  log "building image $name:$tag"
  rm -rf "$work"
  mkdir -p "$work"
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:$tag"
  umoci unpack --image "$work/oci:$tag" "$work/bundle" >/dev/null
  "$filler" "$work/bundle/rootfs"
  umoci repack --image "$work/oci:$tag" "$work/bundle" >/dev/null
  local cfg=(--image "$work/oci:$tag" --config.workingdir / --config.env PATH=/bin:/usr/bin:/sbin:/usr/sbin)
  local a
  for a in "$@"; do cfg+=(--config.entrypoint "$a"); done
  umoci config "${cfg[@]}" >/dev/null
  umoci gc --layout "$work/oci"
  tar -C "$work/oci" -cf "$work/image.tar" .
  ctr_ images import --base-name "$name" "$work/image.tar" >/dev/null
  ctr_ images check "name==$name:$tag" | grep -q "$name:$tag" || die "import of $name:$tag failed"
  rm -rf "$work/bundle"
  echo "$stamp" >"$work.stamp"
}

fill_pause() {
  local rootfs=$1
  gcc -static -O2 -Wall -o "$rootfs/pause" "$SCRIPT_DIR/pause.c"
  strip "$rootfs/pause" 2>/dev/null || true
}

fill_busybox() {
  local rootfs=$1 a
  mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,var/www,root,home,proc,sys,dev}
  chmod 1777 "$rootfs/tmp"
  cp /bin/busybox "$rootfs/bin/busybox"
  for a in "${BUSYBOX_APPLETS[@]}"; do ln -sf busybox "$rootfs/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
}

wait_cri_ready() {
  # containerd answers before its CRI plugin has loaded the CNI config; the Rust side checks
  # CRI Status (cargo xtask cri-ready). Here: make sure the CRI plugin loaded at all.
  local i
  for i in $(seq 1 50); do
    if ctr -a "$SOCK" plugins ls 2>/dev/null | grep -E "io.containerd.grpc.v1 +cri +" | grep -q ok; then
      return 0
    fi
    sleep 0.2
  done
  grep -i -E "cri|error" "$LOG_FILE" | tail -n 20 >&2 || true
  die "containerd's CRI plugin did not load"
}

cmd_up() {
  need_root
  local t0=$SECONDS
  install_packages
  write_configs
  kernel_settings
  start_containerd
  wait_cri_ready
  build_image kubelet-rs.local/pause 1.0 fill_pause /pause
  build_image kubelet-rs.local/busybox 1.0 fill_busybox /bin/sh
  log "up in $((SECONDS - t0))s: endpoint unix://$SOCK"
  echo "KUBELET_RS_CRI_ENDPOINT=unix://$SOCK"
}

# Removes every container and sandbox of our containerd while it still runs. The CRI view
# (with CNI teardown) is done by `cargo xtask node-down` before it calls this; here ctr kills
# what is left so that no shim outlives containerd.
remove_workloads() {
  local id
  for id in $(ctr_ tasks ls -q 2>/dev/null); do
    ctr_ tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_ tasks ls -q 2>/dev/null); do
    ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_ containers ls -q 2>/dev/null); do
    ctr_ containers delete "$id" >/dev/null 2>&1 || true
  done
}

stop_containerd() {
  local pid i
  pid=$(containerd_pid) || return 0
  log "stopping containerd (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do
    [ -d "/proc/$pid" ] || break
    sleep 0.2
  done
  [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$PID_FILE"
}

# Shims started by our containerd carry our socket in their command line.
kill_leftover_shims() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    if tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -q "containerd-shim.*-address $SOCK "; then
      log "killing leftover shim $pid"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

unmount_under() {
  local prefix m
  for prefix in "$@"; do
    # Deepest first.
    for m in $(awk -v p="$prefix" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/self/mounts | sort -r); do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: cannot unmount $m"
    done
  done
}

remove_netns() {
  local ns
  for ns in /var/run/netns/cni-*; do
    [ -e "$ns" ] || continue
    umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
    rm -f "$ns" && log "removed netns $ns"
  done
}

remove_cgroup_tree() {
  local dir=$1 sub p
  [ -d "$dir" ] || return 0
  # Children first.
  for sub in $(find "$dir" -mindepth 1 -type d 2>/dev/null | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-); do
    if [ -f "$sub/cgroup.procs" ]; then
      for p in $(cat "$sub/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    fi
    rmdir "$sub" 2>/dev/null || true
  done
  if [ -f "$dir/cgroup.procs" ]; then
    for p in $(cat "$dir/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  fi
  rmdir "$dir" 2>/dev/null || log "warning: cannot remove cgroup $dir"
}

remove_cgroups() {
  local name hier
  for name in $TEST_CGROUPS; do
    for hier in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
      [ -d "$hier$name" ] && remove_cgroup_tree "$hier$name"
    done
  done
  return 0
}

remove_network() {
  local line
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link delete "$BRIDGE" 2>/dev/null || true
    log "removed bridge $BRIDGE"
  fi
  # iptables chains the bridge (masquerade) and portmap plugins left for our network: every
  # chain holding a rule commented with our network name, and every jump to it.
  command -v iptables-save >/dev/null 2>&1 || return 0
  local table chains chain rule
  for table in nat filter; do
    chains=$(iptables-save -t "$table" 2>/dev/null | grep '^-A CNI-' |
      grep -F "name: \\\"$CNI_NET_NAME\\\"" | awk '{ print $2 }' | sort -u || true)
    for chain in $chains; do
      iptables-save -t "$table" 2>/dev/null | grep -E "^-A [^ ]+ .*-j $chain( |\$)" |
        while read -r rule; do
          # shellcheck disable=SC2086
          eval iptables -t "$table" -D ${rule#-A } 2>/dev/null || true
        done || true
      iptables -t "$table" -F "$chain" 2>/dev/null || true
      iptables -t "$table" -X "$chain" 2>/dev/null && log "removed iptables chain $table/$chain"
    done
  done
  return 0
}

cmd_down() {
  need_root
  if containerd_pid >/dev/null; then
    remove_workloads
  fi
  stop_containerd
  kill_leftover_shims
  unmount_under "$RUN_DIR" "$NODE_DIR"
  remove_netns
  remove_cgroups
  remove_network
  rm -rf "$RUN_DIR" "$NODE_DIR"
  log "down"
}

cmd_status() {
  local pid
  if pid=$(containerd_pid); then
    echo "containerd: running (pid $pid), endpoint unix://$SOCK"
    ctr_ images ls -q 2>/dev/null | sed 's/^/image: /'
    echo "containers: $(ctr_ containers ls -q 2>/dev/null | wc -l)"
  else
    echo "containerd: not running"
    return 1
  fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
