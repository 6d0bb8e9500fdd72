#!/usr/bin/env bash
# kubelet-rs node environment: a private containerd (CRI v1) with CNI and locally built images.
#
#   scripts/node-env.sh up [--containerd 1.6|1.7]
#                               install what is missing, write configs, build images, start containerd
#   scripts/node-env.sh down    remove every sandbox/container, stop containerd, clean mounts/netns/cgroups
#   scripts/node-env.sh status  print what is running
#   scripts/node-env.sh env     print the instance's settings (KUBELET_RS_CRI_ENDPOINT=..., ...)
#
# Runs as root on Debian. Idempotent: `up` twice leaves one containerd running; `down` works on
# a machine where `up` never ran. Everything lives under $NODE_DIR and $RUN_DIR so that it never
# touches a system containerd.
#
# Instances: KUBELET_RS_NODE_INSTANCE=NAME (1-8 of [a-z0-9]) runs an independent node
# environment beside the default one: its own node dir (/var/lib/kubelet-rs/node-NAME), run dir
# and socket (/run/kubelet-rs-NAME), containerd root/state, CNI network and bridge (krs-NAME),
# pod subnet (KUBELET_RS_POD_SUBNET, default one derived from NAME in 10.100-199.0.0/16), and
# cgroup parents (kubelet-rs-NAME-test, kubelet-rs-NAME). `down` of an instance removes only what
# is its own. Unset: the default instance, with the paths and names it always had.
#
# containerd version: bookworm's 1.6 (system packages) by default; `--containerd 1.7` or
# KUBELET_RS_CONTAINERD=1.7 runs Debian trixie's containerd 1.7 and runc, unpacked into a private
# prefix ($KUBELET_RS_CONTAINERD_CACHE, default /var/cache/kubelet-rs/containerd-1.7) from a
# private apt list (the system's apt sources never change). The choice is remembered by the
# instance until `down`.
set -euo pipefail

INSTANCE=${KUBELET_RS_NODE_INSTANCE:-}
if [ -n "$INSTANCE" ] && ! [[ "$INSTANCE" =~ ^[a-z0-9]{1,8}$ ]]; then
  printf '[node-env] error: KUBELET_RS_NODE_INSTANCE must be 1-8 of [a-z0-9]: %s\n' "$INSTANCE" >&2
  exit 2
fi
if [ -z "$INSTANCE" ]; then
  NODE_DIR=${KUBELET_RS_NODE_DIR:-/var/lib/kubelet-rs/node}
  RUN_DIR=${KUBELET_RS_RUN_DIR:-/run/kubelet-rs}
  CNI_NET_NAME="kubelet-rs"
  BRIDGE="kubeletrs0"
  POD_SUBNET=${KUBELET_RS_POD_SUBNET:-10.88.0.0/16}
  # Cgroup parents (relative to each hierarchy root) that tests and the kubelet create pods under.
  TEST_CGROUPS=${KUBELET_RS_TEST_CGROUPS:-"kubelet-rs-test kubelet-rs"}
else
  NODE_DIR=${KUBELET_RS_NODE_DIR:-/var/lib/kubelet-rs/node-$INSTANCE}
  RUN_DIR=${KUBELET_RS_RUN_DIR:-/run/kubelet-rs-$INSTANCE}
  CNI_NET_NAME="kubelet-rs-$INSTANCE"
  BRIDGE="krs-$INSTANCE"
  POD_SUBNET=${KUBELET_RS_POD_SUBNET:-10.$((100 + $(printf '%s' "$INSTANCE" | cksum | cut -d' ' -f1) % 100)).0.0/16}
  TEST_CGROUPS=${KUBELET_RS_TEST_CGROUPS:-"kubelet-rs-$INSTANCE-test kubelet-rs-$INSTANCE"}
fi
CTD_DIR="$NODE_DIR/containerd"
SOCK="$RUN_DIR/containerd/containerd.sock"
PID_FILE="$RUN_DIR/containerd/containerd.pid"
LOG_FILE="$NODE_DIR/containerd.log"
CNI_CONF_DIR="$NODE_DIR/cni/net.d"
CNI_DATA_DIR="$NODE_DIR/cni/networks"
IMAGES_DIR="$NODE_DIR/images"
# containerd's registry hosts directory (/etc/containerd/certs.d style).
HOSTS_DIR="$NODE_DIR/certs.d"
VERSION_FILE="$NODE_DIR/containerd-version"
PAUSE_IMAGE="kubelet-rs.local/pause:1.0"
BUSYBOX_IMAGE="kubelet-rs.local/busybox:1.0"
CTD17_CACHE=${KUBELET_RS_CONTAINERD_CACHE:-/var/cache/kubelet-rs/containerd-1.7}
CTD17_PREFIX="$CTD17_CACHE/root"
# The containerd binaries this instance runs: the system's (1.6) or the private prefix's (1.7).
CONTAINERD_BIN=containerd
CTR_BIN=ctr
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=debian.sh
. "$SCRIPT_DIR/debian.sh"
# shellcheck source=cgroup-tree.sh
. "$SCRIPT_DIR/cgroup-tree.sh"
# e2fsprogs, util-linux, mount: the kubelet's blkid, mkfs.ext4 and fsck for `local` volumes on a
# block device, and losetup for the tests' loop devices.
PACKAGES=(containerd runc containernetworking-plugins busybox-static umoci protobuf-compiler
  iproute2 iptables gcc libc6-dev dbus-daemon
  e2fsprogs util-linux mount)
# What containerd 1.7 from trixie needs besides (patchelf: its runc runs on trixie's glibc).
PACKAGES_17=(patchelf)
BUSYBOX_APPLETS=(sh ash ls cat echo sleep httpd wget date env touch rm mkdir ps kill true false
  nc hostname id grep sed head tail wc cp mv ln chmod printf test uname whoami sync stat
  mount umount ip ifconfig nslookup seq tee dd df du free top timeout xargs yes basename dirname
  pwd vi which uptime readlink realpath find sort uniq cut tr awk nproc mktemp base64 md5sum
  sha256sum netstat ping)

log() { printf '[node-env] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

ctr_() { "$CTR_BIN" -a "$SOCK" -n k8s.io "$@"; }

# use_containerd VERSION: which binaries run this instance (1.6: the system's; 1.7: the prefix's).
use_containerd() {
  case "$1" in
    1.6)
      CONTAINERD_BIN=containerd
      CTR_BIN=ctr
      ;;
    1.7)
      CONTAINERD_BIN="$CTD17_PREFIX/usr/bin/containerd"
      CTR_BIN="$CTD17_PREFIX/usr/bin/ctr"
      ;;
    *) die "unknown containerd version $1 (1.6 or 1.7)" ;;
  esac
}

# The version an earlier `up` of this instance chose (status, down and a second up follow it).
recorded_version() {
  cat "$VERSION_FILE" 2>/dev/null || echo 1.6
}

# The pid of the containerd running our config (exact command line), if any.
find_containerd_pid() {
  local d cmd want="$CONTAINERD_BIN --config $CTD_DIR/config.toml "
  for d in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
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

install_packages() { install_missing "${PACKAGES[@]}"; }

# debian_mirror (debian.sh): trixie is fetched from the system's mirror.

# apt-get with a private source list, list dir and cache: nothing of /etc/apt or /var/lib/apt changes.
apt_private() { apt_private_in "$CTD17_CACHE/apt" "$@"; }

# Debian trixie's containerd 1.7 and runc, unpacked (dpkg -x) into $CTD17_PREFIX once.
install_containerd_17() {
  local bin="$CTD17_PREFIX/usr/bin"
  if [ -x "$bin/containerd" ] && [ -x "$bin/containerd-shim-runc-v2" ] &&
    "$CTD17_PREFIX/usr/sbin/runc" --version >/dev/null 2>&1; then
    return 0
  fi
  local apt="$CTD17_CACHE/apt" mirror
  mirror=$(debian_mirror)
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  cat >"$apt/sources.list" <<SOURCES
# kubelet-rs node environment: private apt sources (never added to the system's)
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
SOURCES
  log "fetching containerd 1.7 and runc from trixie ($mirror; private apt list under $apt)"
  apt_private update >/dev/null
  rm -rf "$CTD17_CACHE/dl" && mkdir -p "$CTD17_CACHE/dl"
  # trixie's runc needs a newer glibc than bookworm's (GLIBC_2.38): it gets trixie's libc6 and
  # libseccomp2 from the prefix (its ELF interpreter and rpath point there; patchelf). runc
  # re-executes itself (/proc/self/exe), so a loader wrapper would not do. containerd, its
  # shims and ctr need only bookworm's glibc.
  (cd "$CTD17_CACHE/dl" && apt_private download containerd runc libc6 libseccomp2 >/dev/null)
  local tmp="$CTD17_PREFIX.tmp" deb
  rm -rf "$tmp" && mkdir -p "$tmp"
  for deb in "$CTD17_CACHE"/dl/*.deb; do dpkg -x "$deb" "$tmp"; done
  [ -x "$tmp/usr/bin/containerd" ] || die "no containerd in the trixie package"
  [ -x "$tmp/usr/sbin/runc" ] || die "no runc in the trixie package"
  local ld libdir
  ld=$(find "$tmp" -name 'ld-linux-x86-64.so.2' \( -type f -o -type l \) | head -n 1)
  libdir=$(dirname "$(find "$tmp" -name 'libc.so.6' | head -n 1)")
  [ -n "$ld" ] && [ -n "$libdir" ] || die "no loader/libc in trixie's libc6"
  ld=${ld/#$tmp/$CTD17_PREFIX}
  libdir=${libdir/#$tmp/$CTD17_PREFIX}
  patchelf --set-interpreter "$ld" --force-rpath --set-rpath "$libdir" "$tmp/usr/sbin/runc"
  rm -rf "$CTD17_PREFIX" && mv "$tmp" "$CTD17_PREFIX"
  "$CTD17_PREFIX/usr/bin/containerd" --version >&2
  "$CTD17_PREFIX/usr/sbin/runc" --version | head -n 1 >&2
}

write_configs() {
  mkdir -p "$CTD_DIR/root" "$CTD_DIR/state" "$CNI_CONF_DIR" "$CNI_DATA_DIR" "$(dirname "$SOCK")" \
    "$HOSTS_DIR"
  local RUNC_BINARY_LINE=""
  if [ "$CONTAINERD_BIN" != containerd ]; then
    RUNC_BINARY_LINE=$(printf '\n        BinaryName = "%s"' "$CTD17_PREFIX/usr/sbin/runc")
  fi
  cat >"$CTD_DIR/config.toml" <<EOF
# Written by kubelet-rs scripts/node-env.sh; a private containerd for kubelet-rs
# (instance: ${INSTANCE:-default}).
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
        SystemdCgroup = false$RUNC_BINARY_LINE
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
  # Registry hosts (containerd's hosts.toml layout, <host:port>/hosts.toml), read at every
  # pull: scripts/registry.sh puts its CA there.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$HOSTS_DIR"
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
    # The 1.7 prefix comes first on PATH: containerd finds its shim there and the shim runc.
    PATH="$(dirname "$CONTAINERD_BIN"):$CTD17_PREFIX/usr/sbin:$PATH" \
      setsid "$CONTAINERD_BIN" --config "$CTD_DIR/config.toml" >>"$LOG_FILE" 2>&1 </dev/null &
  fi
  for i in $(seq 1 100); do
    if ! containerd_pid >/dev/null; then
      pid=$(find_containerd_pid) && echo "$pid" >"$PID_FILE"
    fi
    if [ -S "$SOCK" ] && "$CTR_BIN" -a "$SOCK" version >/dev/null 2>&1 && containerd_pid >/dev/null; then
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
    if "$CTR_BIN" -a "$SOCK" plugins ls 2>/dev/null | grep -E "io.containerd.grpc.v1 +cri +" | grep -q ok; then
      return 0
    fi
    sleep 0.2
  done
  grep -i -E "cri|error" "$LOG_FILE" | tail -n 20 >&2 || true
  die "containerd's CRI plugin did not load"
}

cmd_up() {
  need_root
  local t0=$SECONDS version=${KUBELET_RS_CONTAINERD:-}
  while [ $# -gt 0 ]; do
    case "$1" in
      --containerd)
        [ $# -ge 2 ] || die "--containerd needs a version (1.6 or 1.7)"
        version=$2
        shift 2
        ;;
      --containerd=*)
        version=${1#--containerd=}
        shift
        ;;
      *) die "unknown argument to up: $1" ;;
    esac
  done
  if [ -z "$version" ]; then
    version=$(recorded_version)
  elif [ -f "$VERSION_FILE" ] && [ "$version" != "$(recorded_version)" ] &&
    (use_containerd "$(recorded_version)" && containerd_pid >/dev/null); then
    die "this instance runs containerd $(recorded_version); run down first to switch to $version"
  fi
  use_containerd "$version"
  [ "$version" = 1.7 ] && PACKAGES+=("${PACKAGES_17[@]}")
  install_packages
  [ "$version" = 1.7 ] && install_containerd_17
  mkdir -p "$NODE_DIR"
  echo "$version" >"$VERSION_FILE"
  write_configs
  kernel_settings
  start_containerd
  wait_cri_ready
  build_image kubelet-rs.local/pause 1.0 fill_pause /pause
  build_image kubelet-rs.local/busybox 1.0 fill_busybox /bin/sh
  log "up in $((SECONDS - t0))s (instance ${INSTANCE:-default}, containerd $version): endpoint unix://$SOCK"
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

# Network namespaces of our pods: those our containers' specs name (recorded while containerd
# still runs, into $OUR_NETNS), and those whose eth0 is a veth on our bridge. The default
# instance, when no other instance runs, also removes every other cni-* netns left behind (as it
# always did).
OUR_NETNS=""
record_netns() {
  local id
  for id in $(ctr_ containers ls -q 2>/dev/null); do
    OUR_NETNS="$OUR_NETNS $(ctr_ containers info "$id" 2>/dev/null |
      grep -o -E '"path": *"/var/run/netns/cni-[^"]+"|"path": *"/run/netns/cni-[^"]+"' |
      sed -E 's/.*"(\/[^"]+)"$/\1/' | xargs -r -n1 basename || true)"
  done
}

netns_on_our_bridge() {
  local ns=$1 peer master
  peer=$(ip -n "$ns" -o link show eth0 2>/dev/null | grep -o -E 'eth0@if[0-9]+' | cut -d f -f 2) || return 1
  [ -n "$peer" ] || return 1
  master=$(ip -o link show 2>/dev/null | awk -F': ' -v i="$peer" '$1 == i { print $2 }' |
    grep -o -E 'master [^ ]+' | cut -d' ' -f2) || return 1
  [ "$master" = "$BRIDGE" ]
}

other_instance_running() {
  local pidf pid
  for pidf in /run/kubelet-rs/containerd/containerd.pid /run/kubelet-rs-*/containerd/containerd.pid; do
    [ -f "$pidf" ] && [ "$pidf" != "$PID_FILE" ] || continue
    pid=$(cat "$pidf" 2>/dev/null) || continue
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && return 0
  done
  return 1
}

remove_netns() {
  local ns name sweep=0
  if [ -z "$INSTANCE" ] && ! other_instance_running; then sweep=1; fi
  for ns in /var/run/netns/cni-*; do
    [ -e "$ns" ] || continue
    name=$(basename "$ns")
    if [ "$sweep" = 0 ] && ! [[ " $OUR_NETNS " == *" $name "* ]] && ! netns_on_our_bridge "$name"; then
      continue
    fi
    umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
    rm -f "$ns" && log "removed netns $ns"
  done
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
  use_containerd "$(recorded_version)"
  if containerd_pid >/dev/null; then
    record_netns
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
  use_containerd "$(recorded_version)"
  if pid=$(containerd_pid); then
    echo "containerd: running (pid $pid, $("$CONTAINERD_BIN" --version 2>/dev/null | awk '{ print $3 }'), instance ${INSTANCE:-default}), endpoint unix://$SOCK"
    ctr_ images ls -q 2>/dev/null | sed 's/^/image: /'
    echo "containers: $(ctr_ containers ls -q 2>/dev/null | wc -l)"
  else
    echo "containerd: not running"
    return 1
  fi
}

# env: the instance's settings, as shell assignments (for scripts that run a kubelet on it).
cmd_env() {
  cat <<ENV
KUBELET_RS_CRI_ENDPOINT=unix://$SOCK
KUBELET_RS_NODE_INSTANCE=$INSTANCE
KUBELET_RS_NODE_DIR=$NODE_DIR
KUBELET_RS_RUN_DIR=$RUN_DIR
KUBELET_RS_POD_SUBNET=$POD_SUBNET
KUBELET_RS_CNI_BRIDGE=$BRIDGE
KUBELET_RS_CONTAINERD=$(recorded_version)
KUBELET_RS_CTR=$( use_containerd "$(recorded_version)"; echo "$CTR_BIN")
KUBELET_RS_CGROUP_PARENTS="$TEST_CGROUPS"
KUBELET_RS_REGISTRY_HOSTS_DIR=$HOSTS_DIR
ENV
}

case "${1:-}" in
  up)
    shift
    cmd_up "$@"
    ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *)
    echo "usage: $0 up [--containerd 1.6|1.7]|down|status|env" >&2
    exit 2
    ;;
esac
