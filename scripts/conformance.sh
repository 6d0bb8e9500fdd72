#!/usr/bin/env bash
# The upstream Kubernetes conformance suite (v1.20.2 e2e.test) as kubelet-rs's acceptance test.
#
#   scripts/conformance.sh build     build once per machine (cached in $CONF_CACHE): e2e.test,
#                                    ginkgo and agnhost from the control plane's kubernetes tree
#                                    with its Go 1.15; the images the specs use (made locally)
#   scripts/conformance.sh run [kubelet-rs|go-kubelet]
#                                    bring up a single-node cluster of its own (a second control
#                                    plane, a second containerd, the chosen kubelet), run the
#                                    focused specs (parallel, then [Serial] alone), print
#                                    `N passed, M failed, K skipped` and the failed specs, tear down
#   scripts/conformance.sh compare   run both kubelets and print the table and the specs Go passes
#                                    and kubelet-rs fails
#   scripts/conformance.sh ci        the CI subset ([NodeConformance]) against kubelet-rs
#   scripts/conformance.sh down      tear down what `run` started (after an interrupted run)
#
# Everything is its own instance: node environment KUBELET_RS_NODE_INSTANCE=conf (containerd,
# CNI bridge, cgroups), control plane state in /var/lib/kubelet-rs/conformance/control-plane on
# other ports; the shared default node environment and control plane are never touched.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
CONF_CACHE=${KUBELET_RS_CONFORMANCE_CACHE:-/var/cache/kubelet-rs/conformance}
BIN_DIR="$CONF_CACHE/bin"
K8S_VERSION=v1.20.2

log() { printf '[conformance] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
# shellcheck source=debian.sh
. "$SCRIPT_DIR/debian.sh"
# shellcheck source=run-lock.sh
. "$SCRIPT_DIR/run-lock.sh"
# shellcheck source=k8s-tree.sh
. "$SCRIPT_DIR/k8s-tree.sh"
need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

# ---------------------------------------------------------------------------------------------
# build

BUILT=(e2e.test ginkgo agnhost kubectl nnp)

build_binaries() {
  local b missing=0
  for b in "${BUILT[@]}"; do [ -x "$BIN_DIR/$b" ] || missing=1; done
  if [ "$missing" = 0 ]; then
    log "binaries present in $BIN_DIR"
    return 0
  fi
  local t0=$SECONDS
  tree_of
  mkdir -p "$BIN_DIR"
  cat >"$CONF_CACHE/version.env" <<VERSION
KUBE_GIT_COMMIT='faecb196815e248d3ecfb03c680a4507229c2a56'
KUBE_GIT_TREE_STATE='clean'
KUBE_GIT_VERSION='$K8S_VERSION'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
VERSION
  log "building e2e.test, ginkgo, agnhost, kubectl (Go 1.15; cold: tens of minutes on 2 cores; log: $CONF_CACHE/build.log)"
  : >"$CONF_CACHE/build.log"
  # nonewprivs' nnp: one stdlib-only file, built with the tree's Go cache.
  if ! in_tree "$CONF_CACHE/build.log" \
    make WHAT="test/e2e/e2e.test vendor/github.com/onsi/ginkgo/ginkgo test/images/agnhost cmd/kubectl" ||
    ! in_tree "$CONF_CACHE/build.log" env GO111MODULE=off GOCACHE="$TREE/_output/local/go/cache" \
      go build -o "$TREE/_output/local/bin/linux/amd64/nnp" ./test/images/nonewprivs/nnp.go; then
    tail -n 40 "$CONF_CACHE/build.log" >&2
    die "build failed (full log: $CONF_CACHE/build.log)"
  fi
  for b in "${BUILT[@]}"; do
    install -m 0755 "$TREE/_output/local/bin/linux/amd64/$b" "$BIN_DIR/$b.tmp"
    mv "$BIN_DIR/$b.tmp" "$BIN_DIR/$b"
  done
  # The image sources (agnhost's porter certs, nautilus/kitten pages) are kept beside the binaries.
  rm -rf "$CONF_CACHE/images-src" && mkdir -p "$CONF_CACHE/images-src"
  cp -a "$TREE/test/images/agnhost/porter" "$TREE/test/images/kitten" "$TREE/test/images/nautilus" \
    "$TREE/build/pause" "$CONF_CACHE/images-src/"
  log "binaries built in $((SECONDS - t0))s"
}


# ---------------------------------------------------------------------------------------------
# images: OCI archives made with umoci once per machine ($CONF_CACHE/images/*.tar), imported into
# the conformance node's containerd under the names e2e's image manifest
# (test/utils/image/manifest.go) gives them. No registry is reachable: nothing is pulled.

IMAGES_DIR="$CONF_CACHE/images"
IMAGE_PACKAGES=(umoci busybox-static bash-static curl netcat-openbsd iproute2 gcc libc6-dev)
# name|filler|entrypoint (comma-separated)|cmd (comma-separated)|user
IMAGES=(
  "k8s.gcr.io/pause:3.2|fill_pause|/pause||"
  "docker.io/library/busybox:1.29|fill_busybox||sh|"
  "k8s.gcr.io/e2e-test-images/agnhost:2.21|fill_agnhost|/agnhost|pause|"
  "gcr.io/kubernetes-e2e-test-images/nautilus:1.0|fill_nautilus|/agnhost|test-webserver|"
  "gcr.io/kubernetes-e2e-test-images/kitten:1.0|fill_kitten|/agnhost|test-webserver|"
  "gcr.io/kubernetes-e2e-test-images/nonroot:1.0|fill_busybox||/bin/sh|1234"
  "gcr.io/kubernetes-e2e-test-images/nonewprivs:1.0|fill_nonewprivs||nnp|"
  "docker.io/library/httpd:2.4.38-alpine|fill_httpd||httpd-foreground|"
  "docker.io/library/httpd:2.4.39-alpine|fill_httpd||httpd-foreground|"
  "docker.io/library/nginx:1.14-alpine|fill_nginx||nginx,-g,daemon off;|"
  "docker.io/library/nginx:1.15-alpine|fill_nginx||nginx,-g,daemon off;|"
  # The node e2e memory eviction specs' memory hog (scripts/stress.c).
  "k8s.gcr.io/stress:v1|fill_stress|/stress||"
)

install_image_packages() { install_missing "${IMAGE_PACKAGES[@]}"; }

# copy_with_libs ROOTFS BINARY [AS]: the binary and every shared library it loads (as ldd
# resolves them on this machine), at the same paths, plus the dynamic loader.
copy_with_libs() {
  local rootfs=$1 bin=$2 as=${3:-$2} lib
  mkdir -p "$rootfs$(dirname "$as")"
  cp -L "$bin" "$rootfs$as"
  for lib in $(ldd "$bin" 2>/dev/null | grep -o -E '/[^ ]+' | sort -u); do
    [ -e "$rootfs$lib" ] && continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
}

# The busybox image: every applet of Debian's static busybox, a passwd/group like the upstream
# image's, /tmp, and the tag in /etc/image-tag (so images of different tags differ).
fill_busybox() {
  local rootfs=$1 tag=$2 a
  mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,tmp,var/www,root,home,proc,sys,dev}
  chmod 1777 "$rootfs/tmp"
  cp /bin/busybox "$rootfs/bin/busybox"
  for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -sf busybox "$rootfs/bin/$a"
  done
  cat >"$rootfs/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
PASSWD
  cat >"$rootfs/etc/group" <<GROUP
root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
wheel:x:10:root
mail:x:12:
www-data:x:33:
operator:x:37:
users:x:100:
nogroup:x:65534:
GROUP
  echo "$tag" >"$rootfs/etc/image-tag"
}

fill_pause() {
  local rootfs=$1
  gcc -Os -Wall -Werror -static -DVERSION=v3.2 -o "$rootfs/pause" "$CONF_CACHE/images-src/pause/linux/pause.c"
  strip "$rootfs/pause" 2>/dev/null || true
}

# stress: the stand-in for vishh/stress (scripts/stress.c), static.
fill_stress() {
  local rootfs=$1
  gcc -Os -Wall -Werror -static -o "$rootfs/stress" "$SCRIPT_DIR/stress.c"
  strip "$rootfs/stress" 2>/dev/null || true
}

# agnhost as upstream's Dockerfile lays it out (/agnhost, /agnhost-2, /uploads, porter's
# certificate) on a busybox base with the tools its subcommands and the specs call: bash, curl,
# nc (OpenBSD's), ip and ss (iproute2).
fill_agnhost() {
  local rootfs=$1 tag=$2
  fill_busybox "$rootfs" "$tag"
  cp /bin/bash-static "$rootfs/bin/bash"
  # /bin/sh is bash: Debian's static busybox is a "standalone shell" that runs its own applets
  # before PATH, so under `sh -c` the specs got busybox's nc (no -u: "node-pod communication:
  # udp" failed for both kubelets) instead of the OpenBSD nc upstream's alpine image has.
  ln -sf bash "$rootfs/bin/sh"
  rm -f "$rootfs/bin/ip" "$rootfs/bin/nc"
  copy_with_libs "$rootfs" /usr/bin/curl
  copy_with_libs "$rootfs" /bin/nc.openbsd /usr/bin/nc
  copy_with_libs "$rootfs" /bin/ip /sbin/ip
  copy_with_libs "$rootfs" /bin/ss /sbin/ss
  # The storage specs' host-exec pods (privileged, the host's / at /rootfs) run `nsenter
  # --mount=/rootfs/proc/1/ns/mnt -- sh -c ...` to make local volumes on the host (loop devices,
  # tmpfs, bind mounts). util-linux's nsenter: Debian's static busybox prefers its own applets
  # (see sh above), so its nsenter would run the host commands as busybox applets. And on this
  # kind of machine PID 1 is the sandbox's agent, whose namespace files even root cannot open
  # ("Permission denied"): the wrapper enters the host's mount namespace through PID 2
  # (kthreadd, in the initial mount namespace like every host process) when PID 1's cannot be
  # opened, and changes nothing else.
  rm -f "$rootfs/bin/nsenter"
  copy_with_libs "$rootfs" /usr/bin/nsenter /usr/bin/nsenter.util-linux
  cat >"$rootfs/usr/bin/nsenter" <<'NSENTER'
#!/bin/bash
args=()
for a in "$@"; do
  case $a in
    --mount=/rootfs/proc/1/ns/mnt)
      { : <"${a#--mount=}"; } 2>/dev/null || a=--mount=/rootfs/proc/2/ns/mnt ;;
  esac
  args+=("$a")
done
exec /usr/bin/nsenter.util-linux "${args[@]}"
NSENTER
  chmod 0755 "$rootfs/usr/bin/nsenter"
  install -m 0755 "$BIN_DIR/agnhost" "$rootfs/agnhost"
  ln -sf agnhost "$rootfs/agnhost-2"
  mkdir -p "$rootfs/uploads"
  cp "$CONF_CACHE/images-src/porter/localhost.crt" "$CONF_CACHE/images-src/porter/localhost.key" "$rootfs/"
}

fill_nautilus() {
  fill_agnhost "$1" "$2"
  cp "$CONF_CACHE/images-src/nautilus/html/nautilus.jpg" "$CONF_CACHE/images-src/nautilus/html/data.json" "$1/"
}

fill_kitten() {
  fill_agnhost "$1" "$2"
  cp "$CONF_CACHE/images-src/kitten/html/kitten.jpg" "$CONF_CACHE/images-src/kitten/html/data.json" "$1/"
}

# nonewprivs: nnp (prints its effective uid) setuid root, as upstream's Dockerfile makes it.
fill_nonewprivs() {
  fill_busybox "$1" "$2"
  install -m 4755 "$BIN_DIR/nnp" "$1/usr/local/bin/nnp"
}

# Stand-ins for httpd and nginx: busybox's httpd on port 80 serving the image's usual docroot
# (with the usual index page and the tag), exiting 0 on SIGTERM as the real servers do.
write_server() {
  local rootfs=$1 path=$2 docroot=$3
  cat >"$rootfs$path" <<SERVER
#!/bin/sh
# kubelet-rs conformance stand-in: serves $docroot on :80 until SIGTERM (then exits 0).
trap 'kill \$child 2>/dev/null; exit 0' TERM INT QUIT
httpd -f -p 80 -h $docroot &
child=\$!
wait \$child
SERVER
  chmod 0755 "$rootfs$path"
}

fill_httpd() {
  local rootfs=$1 tag=$2 docroot=/usr/local/apache2/htdocs
  fill_busybox "$rootfs" "$tag"
  mkdir -p "$rootfs$docroot" "$rootfs/usr/local/apache2/bin"
  echo "<html><body><h1>It works!</h1></body></html>" >"$rootfs$docroot/index.html"
  write_server "$rootfs" /usr/local/bin/httpd-foreground "$docroot"
}

fill_nginx() {
  local rootfs=$1 tag=$2 docroot=/usr/share/nginx/html
  fill_busybox "$rootfs" "$tag"
  mkdir -p "$rootfs$docroot"
  printf '<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n' >"$rootfs$docroot/index.html"
  write_server "$rootfs" /usr/sbin/nginx "$docroot"
}

# build_image SPEC: $IMAGES_DIR/<file>.tar (an OCI layout archive), rebuilt when the recipe changes.
build_image() {
  local spec=$1 name filler entry cmd user
  IFS='|' read -r name filler entry cmd user <<<"$spec"
  local tag=${name##*:} file
  file=$(echo "$name" | tr '/:' '__')
  local work="$IMAGES_DIR/$file" stamp
  stamp=$({
    echo "$spec"
    declare -f "$filler" fill_busybox fill_agnhost write_server copy_with_libs
    [ "$filler" != fill_stress ] || cat "$SCRIPT_DIR/stress.c"
  } | sha256sum | cut -c1-16)
  if [ -f "$work.tar" ] && [ "$(cat "$work.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "building image $name"
  rm -rf "$work" "$work.tar"
  mkdir -p "$work"
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:$tag"
  umoci unpack --image "$work/oci:$tag" "$work/bundle" >/dev/null
  "$filler" "$work/bundle/rootfs" "$tag"
  umoci repack --image "$work/oci:$tag" "$work/bundle" >/dev/null
  local cfg=(--image "$work/oci:$tag" --config.workingdir /
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin) a
  if [ -n "$entry" ]; then
    IFS=',' read -r -a parts <<<"$entry"
    for a in "${parts[@]}"; do cfg+=(--config.entrypoint "$a"); done
  fi
  if [ -n "$cmd" ]; then
    IFS=',' read -r -a parts <<<"$cmd"
    for a in "${parts[@]}"; do cfg+=(--config.cmd "$a"); done
  fi
  [ -z "$user" ] || cfg+=(--config.user "$user")
  umoci config "${cfg[@]}" >/dev/null
  umoci gc --layout "$work/oci"
  tar -C "$work/oci" -cf "$work.tar.tmp" .
  mv "$work.tar.tmp" "$work.tar"
  rm -rf "$work"
  echo "$stamp" >"$work.stamp"
}

build_images() {
  install_image_packages
  mkdir -p "$IMAGES_DIR"
  local spec
  for spec in "${IMAGES[@]}"; do build_image "$spec"; done
}

# import_images CTR SOCKET: every image into the k8s.io namespace under its exact name.
import_images() {
  local ctr=$1 sock=$2 spec name file
  for spec in "${IMAGES[@]}"; do
    name=${spec%%|*}
    file=$(echo "$name" | tr '/:' '__')
    "$ctr" -a "$sock" -n k8s.io images import --base-name "${name%:*}" "$IMAGES_DIR/$file.tar" >/dev/null
    "$ctr" -a "$sock" -n k8s.io images check "name==$name" | grep -q "$name" || die "import of $name failed"
  done
  log "imported ${#IMAGES[@]} images"
}

cmd_build() {
  need_root
  mkdir -p "$CONF_CACHE"
  local t0=$SECONDS
  build_binaries
  build_images
  log "build done in $((SECONDS - t0))s (cache: $CONF_CACHE)"
}


# ---------------------------------------------------------------------------------------------
# the cluster of the run: its own control plane, node environment and kubelet

STATE=${KUBELET_RS_CONFORMANCE_DIR:-/var/lib/kubelet-rs/conformance}
RESULTS=${KUBELET_RS_CONFORMANCE_RESULTS:-$STATE/results}
NODE_NAME=kubelet-rs-conformance
KUBELET_PORT=${KUBELET_RS_CONFORMANCE_KUBELET_PORT:-11250}
KUBELET_HEALTHZ_PORT=${KUBELET_RS_CONFORMANCE_HEALTHZ_PORT:-11248}
GINKGO_NODES=${KUBELET_RS_CONFORMANCE_NODES:-4}
FOCUS_ALL='\[NodeConformance\]|\[Conformance\]'
FOCUS_CI='\[NodeConformance\]'
# The storage focus (issue #36): the upstream [sig-storage] specs that run on one node without a
# cloud or a provisioner, for the volume types kubelet-rs supports: pre-provisioned `local` PVs
# on directories, symlinks, bind mounts, tmpfs, a filesystem on a loop device, a bare loop
# device the kubelet formats and mounts, and a loop device as a raw block volume (the specs make
# them on the host through privileged host-exec pods), inline hostPath and emptyDir,
# HostPathType checks, PV and PVC protection.
FOCUS_STORAGE_LOCAL_TYPES='dir|dir-link|dir-bindmounted|dir-link-bindmounted|tmpfs|blockfs|blockfswithformat|blockfswithoutformat|block'
FOCUS_STORAGE_INTREE_TYPES='dir|dir-link|dir-bindmounted|dir-link-bindmounted|tmpfs|blockfs|block'
FOCUS_STORAGE="\\[sig-storage\\] (PersistentVolumes-local  (\\[Volume type: ($FOCUS_STORAGE_LOCAL_TYPES)\\]|Local volume that cannot be mounted|Pod with node different from PV's NodeAffinity|StatefulSet with pod affinity|Stress with local volumes)\
|In-tree Volumes \\[Driver: local\\]\\[LocalVolumeType: ($FOCUS_STORAGE_INTREE_TYPES)\\] \\[Testpattern: Pre-provisioned PV \\((default fs|filesystem volmode|block volmode)\\)\\]\
|In-tree Volumes \\[Driver: (hostPath|hostPathSymlink|emptydir)\\] \\[Testpattern: Inline-volume \\(default fs\\)\\]\
|HostPathType|PV Protection|PVC Protection|Volumes ConfigMap)"

# The control plane instance of the runs (never the shared default one).
cp_env() {
  export KUBELET_RS_CP_DIR="$STATE/control-plane"
  export KUBELET_RS_CP_LOCK="$STATE/control-plane.lock"
  export KUBELET_RS_NODE_NAME="$NODE_NAME"
  export KUBELET_RS_ETCD_PORT=${KUBELET_RS_CONFORMANCE_ETCD_PORT:-12379}
  export KUBELET_RS_ETCD_PEER_PORT=${KUBELET_RS_CONFORMANCE_ETCD_PEER_PORT:-12380}
  export KUBELET_RS_APISERVER_PORT=${KUBELET_RS_CONFORMANCE_APISERVER_PORT:-16443}
  export KUBELET_RS_CM_PORT=${KUBELET_RS_CONFORMANCE_CM_PORT:-20257}
  export KUBELET_RS_SCHED_PORT=${KUBELET_RS_CONFORMANCE_SCHED_PORT:-20259}
  # Admission webhooks and aggregated API servers are reached at their pods' endpoints (no
  # kube-proxy here).
  export KUBELET_RS_APISERVER_EXTRA_FLAGS="--enable-aggregator-routing=true"
  # The node's serving certificate also names the node's address (issued at `up`).
  if [ -n "${KUBELET_RS_POD_SUBNET:-}" ]; then
    export KUBELET_RS_NODE_EXTRA_SANS="IP:$(node_ip)"
  fi
}

# The node environment instance of the runs.
node_env() {
  export KUBELET_RS_NODE_INSTANCE=conf
}

# The node's address: the gateway address of the instance's pod bridge (the Go kubelet refuses a
# loopback --node-ip; the apiserver reaches the kubelet there, and so do hostNetwork pods and
# pods). The bridge is made before the first sandbox (the CNI bridge plugin adopts it).
node_ip() {
  local subnet=${KUBELET_RS_POD_SUBNET%/*}
  echo "${subnet%.*}.1"
}

ensure_bridge() {
  local ip
  ip=$(node_ip)
  ip link show "$KUBELET_RS_CNI_BRIDGE" >/dev/null 2>&1 ||
    ip link add "$KUBELET_RS_CNI_BRIDGE" type bridge
  ip -4 addr show dev "$KUBELET_RS_CNI_BRIDGE" | grep -q "inet $ip/" ||
    ip addr add "$ip/${KUBELET_RS_POD_SUBNET#*/}" dev "$KUBELET_RS_CNI_BRIDGE"
  ip link set "$KUBELET_RS_CNI_BRIDGE" up
}

# The settings `node-env.sh env` prints, in this shell.
load_node_env() {
  local line
  while IFS= read -r line; do
    line=${line//\"/}
    export "${line?}"
  done < <(node_env && bash "$SCRIPT_DIR/node-env.sh" env)
}

KUBELET_PID_FILE="$STATE/kubelet.pid"

kubelet_pid() {
  local pid
  pid=$(cat "$KUBELET_PID_FILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "--root-dir=$STATE/kubelet " || return 1
  echo "$pid"
}

stop_kubelet() {
  local pid i
  pid=$(kubelet_pid) || return 0
  log "stopping the kubelet (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$KUBELET_PID_FILE"
}

kubelet_binary() {
  case "$1" in
    kubelet-rs)
      # KUBELET_RS_CONFORMANCE_KUBELET: a kubelet-rs binary built elsewhere (the PGO build of
      # scripts/pgo-build.sh, for scripts/startup-latency.sh).
      if [ -n "${KUBELET_RS_CONFORMANCE_KUBELET:-}" ]; then
        echo "$KUBELET_RS_CONFORMANCE_KUBELET"
        return
      fi
      # KUBELET_RS_CONFORMANCE_PROFILE=debug uses the debug build (the one `cargo test` has
      # already built in CI) instead of a release build of its own; =ship the shipped binary
      # (scripts/startup-latency.sh: what operators run).
      local target=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target}
      local profile=${KUBELET_RS_CONFORMANCE_PROFILE:-release} flags
      flags=(--profile "$profile")
      [ "$profile" = debug ] && flags=()
      log "building kubelet-rs ($profile)"
      (cd "$REPO" && CARGO_TARGET_DIR="$target" cargo build -q "${flags[@]}" -p kubelet-bin) >&2
      echo "$target/$profile/kubelet"
      ;;
    go-kubelet) bash "$SCRIPT_DIR/go-kubelet.sh" build | tail -n 1 ;;
    *) die "unknown kubelet $1 (kubelet-rs or go-kubelet)" ;;
  esac
}

# start_kubelet KIND BINARY: the node of the cluster, as the README's cluster quickstart runs it,
# on its own root dir, cgroup root, containerd instance and ports.
start_kubelet() {
  local kind=$1 bin=$2 pki="$STATE/control-plane/nodes/$NODE_NAME" h
  [ -f "$pki/kubeconfig" ] || die "no node identity under $pki"
  for h in /sys/fs/cgroup/*/; do mkdir -p "${h}kubelet-rs-conf"; done
  mkdir -p "$STATE/kubelet"
  local args=(
    --kubeconfig="$pki/kubeconfig"
    --hostname-override="$NODE_NAME" --node-ip="$(node_ip)"
    --container-runtime-endpoint="$KUBELET_RS_CRI_ENDPOINT"
    --root-dir="$STATE/kubelet" --cgroup-root=/kubelet-rs-conf
    --tls-cert-file="$pki/kubelet.crt" --tls-private-key-file="$pki/kubelet.key"
    --client-ca-file="$STATE/control-plane/pki/ca.crt" --anonymous-auth=false
    --authentication-token-webhook --authorization-mode=Webhook
    --port="$KUBELET_PORT" --healthz-port="$KUBELET_HEALTHZ_PORT" --read-only-port=0
    --fail-swap-on=false
    # No registry can give an image back: image GC never removes one.
    --image-gc-high-threshold=100 --image-gc-low-threshold=99
    # The shared build machine's disk may run below the default 10%/15% free, and below 1% of
    # its 252G (CI once saw 2.4G free): eviction on disk signals would taint the node and evict
    # the specs' pods for a cause outside the node. Absolute floors: only a disk that is really
    # full trips them.
    --eviction-hard="memory.available<100Mi,nodefs.available<512Mi,imagefs.available<512Mi,nodefs.inodesFree<1%"
  )
  if [ "$kind" = kubelet-rs ]; then
    # Its own pod log directory (podLogsDir, a configuration field of current kubelets): every
    # kubelet removes the log directories of pods it does not know from its podLogsDir, so
    # kubelets sharing /var/log/pods (tests, the quickstart) would remove the specs' logs.
    mkdir -p "$STATE/pod-logs"
    printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\npodLogsDir: %s\n' \
      "$STATE/pod-logs" >"$STATE/kubelet-config.yaml"
    # KUBELET_RS_CONFORMANCE_OTLP=HOST:PORT: every span to that OTLP collector
    # (scripts/startup-latency.sh with KUBELET_RS_STARTUP_SPANS=1).
    if [ -n "${KUBELET_RS_CONFORMANCE_OTLP:-}" ]; then
      printf 'featureGates:\n  KubeletTracing: true\ntracing:\n  endpoint: "%s"\n  samplingRatePerMillion: 1000000\n' \
        "$KUBELET_RS_CONFORMANCE_OTLP" >>"$STATE/kubelet-config.yaml"
    fi
    args+=(--config="$STATE/kubelet-config.yaml")
  fi
  # Extra flags for both kubelets (scripts/idle-rate.sh: a cluster DNS address).
  local extra
  read -r -a extra <<<"${KUBELET_RS_CONFORMANCE_KUBELET_ARGS:-}"
  args+=("${extra[@]}")
  if [ "$kind" = go-kubelet ]; then
    args+=(--container-runtime=remote --image-service-endpoint= --cgroup-driver=cgroupfs
      --make-iptables-util-chains=false --pod-infra-container-image=kubelet-rs.local/pause:1.0
      --v=1)
  fi
  log "starting $kind ($bin; log: $RESULTS/$kind/kubelet.log)"
  mkdir -p "$RESULTS/$kind"
  setsid "$bin" "${args[@]}" >"$RESULTS/$kind/kubelet.log" 2>&1 </dev/null &
  local i pid=""
  for i in $(seq 1 50); do
    pid=$(pgrep -n -f -- "--root-dir=$STATE/kubelet " || true)
    [ -n "$pid" ] && break
    sleep 0.1
  done
  [ -n "$pid" ] || die "the kubelet did not start"
  echo "$pid" >"$KUBELET_PID_FILE"
  log "waiting for node $NODE_NAME to be Ready"
  for i in $(seq 1 120); do
    if "$BIN_DIR/kubectl" get node "$NODE_NAME" \
      -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; then
      wait_untainted
      return 0
    fi
    kubelet_pid >/dev/null || {
      tail -n 30 "$RESULTS/$kind/kubelet.log" >&2
      die "the kubelet exited"
    }
    sleep 1
  done
  tail -n 30 "$RESULTS/$kind/kubelet.log" >&2
  die "node $NODE_NAME not Ready after 120s"
}

# wait_untainted: the e2e framework waits 30 minutes for a node without NoSchedule taints, and
# then fails every spec; a pressure taint (a full disk, little memory) is named here instead.
wait_untainted() {
  local i taints=""
  for i in $(seq 1 60); do
    taints=$("$BIN_DIR/kubectl" get node "$NODE_NAME" -o jsonpath='{.spec.taints[*].key}' 2>/dev/null || true)
    [ -z "$taints" ] && return 0
    sleep 1
  done
  df -h "$STATE" / >&2 || true
  free -m >&2 || true
  grep -E 'eviction manager' "$RESULTS/$kind/kubelet.log" | tail -n 5 >&2 || true
  die "node $NODE_NAME still tainted after 60s ($taints): the machine is short of disk or memory"
}

cluster_up() {
  local kind=$1 bin
  bin=$(kubelet_binary "$kind")
  [ -x "$bin" ] || die "no kubelet binary at $bin"
  cluster_prepare
  start_kubelet "$kind" "$bin"
}

# Everything of the cluster but the kubelet: the control plane, the node's identity, the node
# environment with the specs' images (scripts/startup-latency.sh measures the raw CRI floor on
# it before the kubelet starts).
cluster_prepare() {
  cluster_down
  mkdir -p "$STATE"
  load_node_env
  (cp_env && bash "$SCRIPT_DIR/control-plane.sh" up >/dev/null)
  cp_env
  export KUBECONFIG="$STATE/control-plane/admin.kubeconfig"
  (cp_env && bash "$SCRIPT_DIR/control-plane.sh" node-kubeconfig "$NODE_NAME" >/dev/null)
  (node_env && bash "$SCRIPT_DIR/node-env.sh" up >/dev/null)
  ensure_bridge
  import_images "$KUBELET_RS_CTR" "${KUBELET_RS_CRI_ENDPOINT#unix://}"
}

# Pods the kubelet left (a Go kubelet leaves its pods running on exit) go with the node
# environment instance.
cluster_down() {
  stop_kubelet
  (node_env && bash "$SCRIPT_DIR/node-env.sh" down >/dev/null 2>&1) || true
  (cp_env && bash "$SCRIPT_DIR/control-plane.sh" down >/dev/null 2>&1) || true
  local h
  for h in /sys/fs/cgroup/*/; do [ -d "${h}kubelet-rs-conf" ] && rmdir "${h}kubelet-rs-conf" 2>/dev/null; done
  # The kubelet's root dir (volumes are unmounted by then; a leftover mount stays visible).
  if [ -d "$STATE/kubelet" ]; then
    # (The Go kubelet bind-mounts its root dir onto itself.)
    awk -v p="$STATE/kubelet" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
      while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
    rm -rf "$STATE/kubelet"
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------
# the skip list: what this machine cannot offer (never a spec because kubelet-rs fails it).
# Each entry: a regular expression over the spec's full name, then ` :: ` and the reason.

SKIPS=(
  '\[sig-network\] DNS should (provide|resolve) :: no cluster DNS (CoreDNS is not built here; the specs resolve service and pod names through it)'
  '\[sig-network\] Services should (have session affinity|be able to switch session affinity|be able to create a functioning NodePort|be able to change the type from ExternalName to (ClusterIP|NodePort)|be able to change the type from (ClusterIP|NodePort) to ExternalName) :: no Service data plane: no kube-proxy, so ClusterIP/NodePort addresses lead nowhere, and ExternalName needs cluster DNS'
  '\[sig-cli\] Kubectl client Guestbook application :: the guestbook frontend finds its backends by Service name (cluster DNS)'
  'ServiceAccountIssuerDiscovery should support OIDC discovery :: the pod reaches the API server through the kubernetes Service VIP (no kube-proxy)'
  '\[sig-api-machinery\] Aggregator Should be able to support the 1.17 Sample API Server :: needs the sample-apiserver:1.17 and etcd:3.4.13-0 images, not built here'
  'Container Runtime blackbox test when running a container with a new image should be able to pull (image|from private registry with secret) :: pulls an image from an internet registry'
  'PrivilegedPod \[NodeConformance\] should enable privileged commands :: the kernel has no dummy netdevice (ip link add dummy1 type dummy: Operation not supported)'
  'Daemon set \[Serial\] should rollback without unnecessary restarts :: needs a cluster of at least 2 nodes (the cluster has one)'
  '\[Disruptive\] :: the specs restart or stop the kubelet over SSH to the node (no SSH here: --provider=skeleton); the kubelet-restart cases of volumes are the cluster tests'"'"' (cluster_storage, cluster_csi_volumes)'
  'SchedulerPreemption \[Serial\] validates (basic preemption works|lower priority pod preemption by critical pod) :: needs a cluster of at least 2 nodes (one victim pod per node; with one node the spec fails "We need at least two pods to be created")'
)

skip_regex() {
  local e out=""
  for e in "${SKIPS[@]}"; do out="${out:+$out|}${e%% :: *}"; done
  # The CI subset leaves the [Slow] specs to the full runs (see `ci`).
  echo "$out${EXTRA_SKIP:+|$EXTRA_SKIP}"
}

# ---------------------------------------------------------------------------------------------
# a run

# run_suite KIND FOCUS: the focused specs (but [Serial]) on GINKGO_NODES parallel nodes, then the
# [Serial] ones alone; JUnit under $RESULTS/KIND/{parallel,serial}.
run_suite() {
  local kind=$1 focus=$2 out="$RESULTS/$1" t0=$SECONDS
  rm -rf "$out/parallel" "$out/serial" "$out"/rerun-*
  mkdir -p "$out/parallel" "$out/serial"
  echo "$focus" >"$out/focus"
  local common=(--kubeconfig="$KUBECONFIG" --provider=skeleton --num-nodes=1
    --kubectl-path="$BIN_DIR/kubectl" --repo-root="$TREE" --e2e-output-dir="$out"
    --allowed-not-ready-nodes=0 --minStartupPods=0 --disable-log-dump
    --node-os-distro=debian)
  local skip
  skip=$(skip_regex)
  log "$kind: parallel specs ($GINKGO_NODES ginkgo nodes; log: $out/parallel.log)"
  "$BIN_DIR/ginkgo" -nodes="$GINKGO_NODES" -noColor -flakeAttempts="${FLAKE_ATTEMPTS:-1}" \
    -focus="$focus" -skip="$skip|\[Serial\]" \
    "$BIN_DIR/e2e.test" -- "${common[@]}" --report-dir="$out/parallel" >"$out/parallel.log" 2>&1 || true
  log "$kind: parallel part done in $((SECONDS - t0))s"
  local t1=$SECONDS
  log "$kind: [Serial] specs (log: $out/serial.log)"
  "$BIN_DIR/ginkgo" -nodes=1 -noColor -flakeAttempts="${FLAKE_ATTEMPTS:-1}" \
    -focus="\[Serial\].*($focus)|($focus).*\[Serial\]" -skip="$skip" \
    "$BIN_DIR/e2e.test" -- "${common[@]}" --report-dir="$out/serial" >"$out/serial.log" 2>&1 || true
  log "$kind: serial part done in $((SECONDS - t1))s; total $((SECONDS - t0))s"
  echo "$((SECONDS - t0))" >"$out/seconds"
}

# summarize KIND: `N passed, M failed, K skipped` over the parts' JUnit (parallel, serial, then
# any re-runs in the order made: a later result of a spec replaces an earlier one), the failed
# specs, and $RESULTS/KIND/{passed,failed}.txt. Only the focused specs count (the run's focus,
# in $RESULTS/KIND/focus). A spec the skip list names counts as skipped
# even in a run made before it was listed (so two runs compare on one list).
summarize() {
  local kind=$1 out="$RESULTS/$1"
  local focus
  focus=$(cat "$out/focus" 2>/dev/null || echo "$FOCUS_ALL")
  local parts=("$out/parallel" "$out/serial") p
  while IFS= read -r p; do parts+=("$p"); done < <(ls -dtr "$out"/rerun-* 2>/dev/null)
  python3 "$SCRIPT_DIR/junit-summary.py" "$out" "$(skip_regex)" "$focus" "${parts[@]}"
}

# rerun KIND FOCUS: the specs FOCUS selects, again (one ginkgo node), on a fresh cluster; the
# results go to $RESULTS/KIND/rerun-<time> and replace the earlier results of those specs.
# Runs share the cluster of $STATE (its control plane, node instance and ports): a second one
# waits for the first (scripts/run-lock.sh).
cmd_rerun() {
  need_root
  local kind=${1:-kubelet-rs} focus=${2:-}
  [ -n "$focus" ] || die "usage: $0 rerun KIND FOCUS"
  one_run_at_a_time "$STATE" "conformance"
  cmd_build
  local src out
  src=$(bash "$SCRIPT_DIR/control-plane.sh" source | tail -n 1)
  TREE=${src##* TREE=}
  out="$RESULTS/$kind/rerun-$(date +%Y%m%d%H%M%S)"
  trap cluster_down EXIT
  cluster_up "$kind"
  mkdir -p "$out"
  log "$kind: re-running $focus (log: $out.log)"
  "$BIN_DIR/ginkgo" -nodes=1 -noColor -focus="$focus" -skip="$(skip_regex)" "$BIN_DIR/e2e.test" -- \
    --kubeconfig="$KUBECONFIG" --provider=skeleton --num-nodes=1 \
    --kubectl-path="$BIN_DIR/kubectl" --repo-root="$TREE" --e2e-output-dir="$out" \
    --allowed-not-ready-nodes=0 --minStartupPods=0 --disable-log-dump --node-os-distro=debian \
    --report-dir="$out" >"$out.log" 2>&1 || true
  cluster_down
  trap - EXIT
  summarize "$kind" | tee "$RESULTS/$kind/summary.txt"
}

cmd_run() {
  need_root
  local kind=${1:-kubelet-rs} focus=${2:-$FOCUS_ALL}
  one_run_at_a_time "$STATE" "conformance"
  cmd_build
  local src
  src=$(bash "$SCRIPT_DIR/control-plane.sh" source | tail -n 1)
  TREE=${src##* TREE=}
  trap cluster_down EXIT
  cluster_up "$kind"
  run_suite "$kind" "$focus"
  "$BIN_DIR/kubectl" get pods -A -o wide >"$RESULTS/$kind/pods-at-end.txt" 2>&1 || true
  cluster_down
  trap - EXIT
  log "$kind: results in $RESULTS/$kind"
  summarize "$kind" | tee "$RESULTS/$kind/summary.txt"
}

# compare: both kubelets on the same suite, machine and skip list; the table and the specs the
# Go kubelet passes and kubelet-rs fails.
cmd_compare() {
  local focus=${1:-$FOCUS_ALL}
  cmd_run go-kubelet "$focus" >/dev/null
  cmd_run kubelet-rs "$focus" >/dev/null
  print_compare
}

print_compare() {
  local k
  printf '%-12s %s\n' kubelet result
  for k in kubelet-rs go-kubelet; do
    printf '%-12s %s (%ss)\n' "$k" "$(head -n 1 "$RESULTS/$k/summary.txt" 2>/dev/null || echo 'no run')" \
      "$(cat "$RESULTS/$k/seconds" 2>/dev/null || echo '?')"
  done
  if [ -f "$RESULTS/go-kubelet/passed.txt" ] && [ -f "$RESULTS/kubelet-rs/failed.txt" ]; then
    echo "Go passes, kubelet-rs fails:"
    grep -F -x -f "$RESULTS/go-kubelet/passed.txt" "$RESULTS/kubelet-rs/failed.txt" | sed 's/^/  /' || echo "  (none)"
  fi
}

# ci_run RESULTS FOCUS: a CI run of FOCUS on kubelet-rs into RESULTS; fails when a spec failed.
ci_run() {
  RESULTS=$1
  # Without the [Slow] ones (MaxContainerBackOff alone waits ~20 minutes for the 5-minute
  # back-off cap): the subset must fit CI's budget; the full runs keep them.
  EXTRA_SKIP='\[Slow\]'
  # A spec that fails and then passes does not fail CI (ginkgo's flake attempts, as
  # upstream's CI jobs run them): "retrieving logs over websockets" reads the log the
  # moment the pod is Running, and the container's first line can land 20-90 ms after
  # that (README: known flakes). The full runs make one attempt, so flakes show there.
  FLAKE_ATTEMPTS=2
  cmd_run kubelet-rs "$2"
  # A spec that failed both attempts under the parallel run's load gets one more run, alone
  # on a fresh cluster (it shows as FLAKED when it passes there; the summary says so).
  if grep -q . "$RESULTS/kubelet-rs/failed.txt"; then
    local again
    again=$(python3 "$SCRIPT_DIR/junit-summary.py" --focus-of "$RESULTS/kubelet-rs/failed.txt")
    log "re-running what failed, alone: $(wc -l <"$RESULTS/kubelet-rs/failed.txt") spec(s)"
    cmd_rerun kubelet-rs "$again"
  fi
  ! grep -q . "$RESULTS/kubelet-rs/failed.txt"
}

# The whole file is read before anything runs (main and exit are one compound command on the
# last line, parsed whole before it runs), so editing the script during a run cannot change it.
# Sourced (scripts/idle-rate.sh), it only defines its functions and settings.
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
    table) print_compare ;;
    rerun)
      shift
      cmd_rerun "$@"
      ;;
    summary) summarize "${2:-kubelet-rs}" ;;
    import-images)
      # import-images CTR SOCKET: the built images into another containerd (node-e2e.sh).
      [ $# -eq 3 ] || die "usage: $0 import-images CTR SOCKET"
      import_images "$2" "$3"
      ;;
    ci)
      # The CI subset: fails when a spec failed. Its results go beside the full runs' (which
      # the README's table comes from), not over them.
      ci_run "$STATE/results-ci" "$FOCUS_CI"
      ;;
    storage-ci)
      # The storage focus without [Slow], as CI runs it (after `ci`, on a cluster of its own).
      # Its specs mostly wait (pods, PV binding, host-exec commands): more ginkgo nodes than the
      # conformance run's.
      GINKGO_NODES=${KUBELET_RS_STORAGE_NODES:-8}
      ci_run "$STATE/results-storage-ci" "$FOCUS_STORAGE"
      ;;
    storage)
      # storage [kubelet-rs|go-kubelet]: the storage focus (all of it, [Slow] too), results in
      # $STATE/results-storage; fails when a spec failed.
      RESULTS="$STATE/results-storage"
      cmd_run "${2:-kubelet-rs}" "$FOCUS_STORAGE"
      ! grep -q . "$RESULTS/${2:-kubelet-rs}/failed.txt"
      ;;
    skips)
      for e in "${SKIPS[@]}"; do printf -- '- `%s`: %s\n' "${e%% :: *}" "${e#* :: }"; done
      ;;
    down) cluster_down ;;
    *)
      echo "usage: $0 build|run [kubelet-rs|go-kubelet] [FOCUS]|rerun KIND FOCUS|compare [FOCUS]|summary KIND|table|ci|storage-ci|storage [KIND]|skips|down" >&2
      exit 2
      ;;
  esac
}

[ "${BASH_SOURCE[0]}" != "$0" ] || { main "$@"; exit $?; }
