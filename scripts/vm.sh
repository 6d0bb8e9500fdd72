#!/usr/bin/env bash
# A systemd host for the tests (issue #35): Debian bookworm with systemd as PID 1 on cgroup v2
# (every controller), containerd with `SystemdCgroup = true`, logind, under qemu's software
# emulation (TCG: this machine's KVM cannot run a stock kernel).
#
#   scripts/vm.sh image        build the image once (debootstrap from Debian's packages), cached
#   scripts/vm.sh up           boot a throwaway copy of it; returns once systemd is running
#   scripts/vm.sh run CMD...   run a command inside (ssh as root), its output and exit code
#   scripts/vm.sh copy SRC DST copy a host file into the VM (DST: a path inside)
#   scripts/vm.sh forward PORT the VM's 127.0.0.1:PORT reaches the host's 127.0.0.1:PORT (an ssh
#                              reverse tunnel, until down): a host service with a certificate
#                              for 127.0.0.1, such as the control plane's API server
#   scripts/vm.sh down         power it off (the copy is discarded)
#   scripts/vm.sh status       whether it runs
#
# The image lives in $KUBELET_RS_VM_CACHE (default /var/cache/kubelet-rs/vm, outside any clone,
# like the build cache): root.img (ext4, made from the debootstrapped tree by `mke2fs -d`, no
# loop device), the kernel and initramfs booted with -kernel/-initrd, and the ssh key. A run's
# state (the qcow2 overlay every boot starts from, the console log, the pid) is in
# $KUBELET_RS_VM_STATE (default /var/lib/kubelet-rs/vm). ssh listens on 127.0.0.1:$KUBELET_RS_VM_SSH_PORT
# (default 2222) through qemu's user-mode network; the VM reaches the host as 10.0.2.2.
#
# Under TCG computation is about 5x slower and every process start about 50x: keep what runs
# inside small (copy built binaries in, don't build there).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${KUBELET_RS_VM_CACHE:-/var/cache/kubelet-rs/vm}
STATE=${KUBELET_RS_VM_STATE:-/var/lib/kubelet-rs/vm}
SSH_PORT=${KUBELET_RS_VM_SSH_PORT:-2222}
MEMORY_MB=${KUBELET_RS_VM_MEMORY_MB:-4096}
CPUS=${KUBELET_RS_VM_CPUS:-2}
DISK_SIZE=${KUBELET_RS_VM_DISK_SIZE:-8G}
BOOT_TIMEOUT=${KUBELET_RS_VM_BOOT_TIMEOUT:-300}
# Bumped when the image's contents change, so a cached image of an older recipe is rebuilt.
IMAGE_VERSION=2

log() { printf '[vm] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
# shellcheck source=debian.sh
. "$SCRIPT_DIR/debian.sh"

HOST_PACKAGES=(qemu-system-x86 qemu-utils debootstrap openssh-client e2fsprogs)
# What the guest has: systemd as init with logind and D-Bus, containerd and runc, ssh, the
# Debian cloud kernel (its initramfs has the virtio drivers).
GUEST_PACKAGES=(systemd systemd-sysv dbus libpam-systemd udev kmod iproute2 iptables procps
  containerd runc containernetworking-plugins openssh-server ca-certificates curl jq
  linux-image-cloud-amd64 initramfs-tools)

SSH_OPTS=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
  -o ConnectTimeout=10 -o ServerAliveInterval=15 -o BatchMode=yes)

need_root() { [ "$(id -u)" = 0 ] || die "run as root"; }

image_ready() {
  [ "$(cat "$CACHE/version" 2>/dev/null || true)" = "$IMAGE_VERSION" ] &&
    [ -f "$CACHE/root.img" ] && [ -f "$CACHE/vmlinuz" ] && [ -f "$CACHE/initrd.img" ] &&
    [ -f "$CACHE/id_ed25519" ]
}

# The guest's configuration, written into the debootstrapped tree ROOT.
configure_guest() {
  local root=$1
  echo kubelet-rs-vm >"$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 kubelet-rs-vm\n' >"$root/etc/hosts"
  printf '/dev/vda / ext4 rw,relatime 0 1\n' >"$root/etc/fstab"
  # The network: DHCP from qemu's user-mode network (the guest is 10.0.2.15).
  mkdir -p "$root/etc/systemd/network"
  printf '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n' >"$root/etc/systemd/network/10-eth0.network"
  mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
  ln -sf /lib/systemd/system/systemd-networkd.service \
    "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
  printf 'nameserver 10.0.2.3\n' >"$root/etc/resolv.conf"
  # ssh as root with the key made here.
  mkdir -p -m 700 "$root/root/.ssh"
  cp "$CACHE/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
  chmod 600 "$root/root/.ssh/authorized_keys"
  # containerd with the systemd cgroup driver, as kubeadm nodes run it (`SystemdCgroup` is
  # the line a test flips for the cgroupfs driver), and a bridge network for pods.
  mkdir -p "$root/etc/containerd" "$root/etc/cni/net.d"
  cat >"$root/etc/cni/net.d/10-pods.conflist" <<'EOF'
{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$root/etc/containerd/config.toml" <<'EOF'
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "kubelet-rs.local/pause:1.0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
EOF
  # Quiet and quick: no getty on the console, no time wasted waiting for a network.
  rm -f "$root/etc/systemd/system/getty.target.wants/"*
  ln -sf /dev/null "$root/etc/systemd/system/systemd-networkd-wait-online.service"
  # The kubelet's dirs.
  mkdir -p "$root/var/lib/kubelet" "$root/etc/kubernetes/manifests"
}

# The host's qemu, debootstrap and ssh. Installing bookworm's qemu-system-x86 removes a newer
# qemu-utils (a machine may come with backports' qemu-img, which bookworm's qemu-system-common
# breaks): qemu-img is then installed again, in bookworm's version.
host_tools() {
  install_missing "${HOST_PACKAGES[@]}"
  if ! command -v qemu-img >/dev/null; then
    log "installing qemu-utils again (qemu-img), in qemu-system-x86's version"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends qemu-utils >/dev/null
  fi
  command -v qemu-img >/dev/null || die "qemu-img is missing after installing qemu-utils"
}

cmd_image() {
  need_root
  host_tools
  if image_ready; then
    log "image ready in $CACHE"
    return 0
  fi
  local t0=$SECONDS tree="$CACHE/rootfs" mirror
  mirror=$(debian_mirror)
  rm -rf "$CACHE" && mkdir -p "$CACHE"
  ssh-keygen -q -t ed25519 -N '' -C kubelet-rs-vm -f "$CACHE/id_ed25519"
  log "debootstrapping bookworm from $mirror into $tree (log: $CACHE/debootstrap.log)"
  debootstrap --variant=minbase --include="$(
    IFS=,
    echo "${GUEST_PACKAGES[*]}"
  )" bookworm "$tree" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
    die "debootstrap failed (log: $CACHE/debootstrap.log)"
  configure_guest "$tree"
  cp "$(ls "$tree"/boot/vmlinuz-* | tail -n 1)" "$CACHE/vmlinuz"
  cp "$(ls "$tree"/boot/initrd.img-* | tail -n 1)" "$CACHE/initrd.img"
  rm -rf "$tree/var/cache/apt/archives/"*.deb
  log "making the disk image ($DISK_SIZE, sparse)"
  mke2fs -q -t ext4 -L root -d "$tree" "$CACHE/root.img" "$DISK_SIZE" ||
    die "mke2fs -d failed"
  rm -rf "$tree"
  echo "$IMAGE_VERSION" >"$CACHE/version"
  log "image built in $((SECONDS - t0))s: $CACHE"
}

qemu_pid() {
  local pid
  pid=$(cat "$STATE/qemu.pid" 2>/dev/null || true)
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && echo "$pid"
}

cmd_run() {
  [ $# -gt 0 ] || die "run: a command, please"
  ssh "${SSH_OPTS[@]}" -i "$CACHE/id_ed25519" -p "$SSH_PORT" root@127.0.0.1 "$@"
}

cmd_copy() {
  [ $# -eq 2 ] || die "copy SRC DST"
  scp -q "${SSH_OPTS[@]}" -i "$CACHE/id_ed25519" -P "$SSH_PORT" "$1" "root@127.0.0.1:$2"
}

cmd_up() {
  need_root
  host_tools
  image_ready || cmd_image
  if qemu_pid >/dev/null; then
    log "already running (pid $(qemu_pid))"
    return 0
  fi
  local t0=$SECONDS
  mkdir -p "$STATE"
  rm -f "$STATE/overlay.qcow2" "$STATE/console.log"
  qemu-img create -q -f qcow2 -F raw -b "$CACHE/root.img" "$STATE/overlay.qcow2"
  qemu-system-x86_64 -machine q35,accel=tcg -cpu max -smp "$CPUS" -m "$MEMORY_MB" \
    -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 net.ifnames=0" \
    -drive "file=$STATE/overlay.qcow2,if=virtio,format=qcow2" \
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$SSH_PORT-:22" -device virtio-net-pci,netdev=n0 \
    -display none -serial "file:$STATE/console.log" -monitor none \
    -daemonize -pidfile "$STATE/qemu.pid" ||
    die "qemu did not start"
  log "booting (console: $STATE/console.log)"
  local deadline=$((SECONDS + BOOT_TIMEOUT)) state=""
  while [ $SECONDS -lt $deadline ]; do
    qemu_pid >/dev/null || die "qemu exited while booting (console: $STATE/console.log)"
    state=$(cmd_run systemctl is-system-running 2>/dev/null || true)
    case "$state" in
      running | degraded) break ;;
    esac
    sleep 2
  done
  case "$state" in
    running) ;;
    degraded) log "systemd is degraded: $(cmd_run systemctl --failed --no-legend --plain 2>/dev/null | tr '\n' ';')" ;;
    *) die "the VM did not reach a running systemd in ${BOOT_TIMEOUT}s (state: ${state:-no ssh}; console: $STATE/console.log)" ;;
  esac
  log "up in $((SECONDS - t0))s: systemd $state, cgroup $(cmd_run stat -fc %T /sys/fs/cgroup)"
}

cmd_forward() {
  local port=${1:-} pid
  [[ "$port" =~ ^[0-9]+$ ]] || die "forward PORT"
  qemu_pid >/dev/null || die "the VM is not running"
  nohup ssh -N "${SSH_OPTS[@]}" -o ExitOnForwardFailure=yes -i "$CACHE/id_ed25519" -p "$SSH_PORT" \
    -R "127.0.0.1:$port:127.0.0.1:$port" root@127.0.0.1 >"$STATE/forward-$port.log" 2>&1 &
  pid=$!
  echo "$pid" >"$STATE/forward-$port.pid"
  # Up once the VM has the listening socket (ssh stays in the foreground, so poll for it).
  for _ in $(seq 1 30); do
    [ -d "/proc/$pid" ] || die "the tunnel for port $port failed: $(cat "$STATE/forward-$port.log")"
    cmd_run "ss -Htln 'sport = :$port' | grep -q ." >/dev/null 2>&1 && return 0
    sleep 1
  done
  die "the tunnel for port $port did not come up"
}

cmd_down() {
  local pid f
  for f in "$STATE"/forward-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -f "$f" "${f%.pid}.log"
  done
  pid=$(qemu_pid || true)
  if [ -n "$pid" ]; then
    cmd_run systemctl poweroff >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      [ -d "/proc/$pid" ] || break
      sleep 1
    done
    [ -d "/proc/$pid" ] && kill "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/overlay.qcow2" "$STATE/qemu.pid"
}

cmd_status() {
  if qemu_pid >/dev/null; then
    echo "running (pid $(qemu_pid)), ssh 127.0.0.1:$SSH_PORT"
  else
    echo "not running"
  fi
}

case "${1:-}" in
  image) cmd_image ;;
  up) cmd_up ;;
  run)
    shift
    cmd_run "$@"
    ;;
  copy)
    shift
    cmd_copy "$@"
    ;;
  forward) cmd_forward "${2:-}" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 image|up|run CMD...|copy SRC DST|forward PORT|down|status" >&2
    exit 2
    ;;
esac
