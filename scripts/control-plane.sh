#!/usr/bin/env bash
# kubelet-rs control plane: a real upstream kube-apiserver (v1.20.2), kube-controller-manager and
# kube-scheduler with etcd, all on 127.0.0.1, for the cluster tests and the cluster quickstart.
#
#   scripts/control-plane.sh build   install what is missing, build the v1.20.2 binaries once
#                                    (cached in $CP_CACHE/bin; skipped when already there)
#   scripts/control-plane.sh up      build if needed, make a throwaway CA and certs, start etcd,
#                                    apiserver, controller-manager, scheduler; wait for /readyz;
#                                    print the env lines (as `env` does)
#   scripts/control-plane.sh down    stop what `up` started (by pid) and remove its state
#                                    (the cached binaries stay)
#   scripts/control-plane.sh status  print what runs (exit 1 when the apiserver is not ready)
#   scripts/control-plane.sh env     print the shell exports for kubectl users and tests
#   scripts/control-plane.sh node-kubeconfig NODE
#                                    issue (once) a client cert CN=system:node:NODE, O=system:nodes
#                                    (+ a kubelet serving cert) and print its kubeconfig's path
#   scripts/control-plane.sh audit-rate [USER_PREFIX] [LAST_SECONDS]
#                                    requests/min by verb and resource of system:node:* users
#                                    (or USER_PREFIX) from the apiserver's audit log (over the
#                                    last LAST_SECONDS, default all of it)
#   scripts/control-plane.sh apiserver-stop | apiserver-start
#                                    stop / start only the apiserver (outage tests)
#   scripts/control-plane.sh bootstrap-token [TTL]
#                                    create a bootstrap token (kubeadm's format, in kube-system,
#                                    group system:bootstrappers:kubeadm:default-node-token, valid
#                                    TTL, default 24h) and print the path of a bootstrap
#                                    kubeconfig that uses it (for kubelet --bootstrap-kubeconfig)
#   scripts/control-plane.sh source  fetch (once) Go 1.15 and the kubernetes source tree the
#                                    build uses; print `GOROOT=... TREE=...` (for other builds
#                                    from the same tree: scripts/conformance.sh)
#
# Environment: KUBELET_RS_NODE_NAME (default node identity, kubelet-rs-node), KUBELET_RS_*_PORT
# (ETCD, ETCD_PEER, APISERVER, CM, SCHED), KUBELET_RS_CP_DIR (state), KUBELET_RS_CP_CACHE
# (binaries, downloads), KUBELET_RS_DEBIAN_MIRROR (default: the system's Debian mirror),
# KUBELET_RS_APISERVER_EXTRA_FLAGS (extra kube-apiserver flags, split on whitespace, appended
# last so they override the defaults; e.g. --enable-aggregator-routing=true),
# KUBELET_RS_CM_EXTRA_FLAGS (the same for kube-controller-manager; e.g.
# --cluster-signing-duration=8m for short-lived kubelet certificates),
# KUBELET_RS_CP_LOCK (the state lock; give a second instance its own),
# KUBELET_RS_NODE_EXTRA_SANS (more subjectAltNames for the kubelet serving certs issued from then
# on, an openssl list such as IP:10.126.0.1).
#
# Node TLS bootstrap as kubeadm sets it up: the apiserver accepts bootstrap tokens
# (--enable-bootstrap-token-auth), `up` binds the kubeadm RBAC (system:bootstrappers may create
# node CSRs, which are auto-approved; nodes may renew their own client certificates), and the
# controller-manager signs kubelet client certificates with the cluster CA and kubelet serving
# certificates with the kubelet CA (the apiserver's --kubelet-certificate-authority).
#
# Where things come from (registry packages only): etcd from Debian's `etcd-server`; kubectl from
# Debian's `kubernetes-client` when no kubectl is installed; the three control-plane binaries
# built from Debian bookworm's `kubernetes` SOURCE package (pristine upstream v1.20.2 with
# vendor/) using Go 1.15 from Debian bullseye (golang-1.15-go, golang-1.15-src). Both are fetched
# with a private apt list/cache under $CP_CACHE/apt: the system's /etc/apt is never changed.
# Go >= 1.18 builds v1.20 but its apiserver then crashes (vendored reflect2), hence Go 1.15.
#
# Runs as root on Debian 12. Idempotent: `up` twice leaves one of each running; `down` works on a
# machine where `up` never ran.
set -euo pipefail

CP_CACHE=${KUBELET_RS_CP_CACHE:-/var/cache/kubelet-rs/control-plane}
GO_DIR=${KUBELET_RS_GO_DIR:-/var/cache/kubelet-rs/go1.15}
CP_DIR=${KUBELET_RS_CP_DIR:-/var/lib/kubelet-rs/control-plane}
NODE_NAME=${KUBELET_RS_NODE_NAME:-kubelet-rs-node}
ETCD_PORT=${KUBELET_RS_ETCD_PORT:-2379}
ETCD_PEER_PORT=${KUBELET_RS_ETCD_PEER_PORT:-2380}
APISERVER_PORT=${KUBELET_RS_APISERVER_PORT:-6443}
CM_PORT=${KUBELET_RS_CM_PORT:-10257}
SCHED_PORT=${KUBELET_RS_SCHED_PORT:-10259}
SERVICE_CIDR=10.96.0.0/16
# shellcheck disable=SC2206
APISERVER_EXTRA_FLAGS=(${KUBELET_RS_APISERVER_EXTRA_FLAGS:-})
# shellcheck disable=SC2206
CM_EXTRA_FLAGS=(${KUBELET_RS_CM_EXTRA_FLAGS:-})
K8S_VERSION=v1.20.2
K8S_COMMIT=faecb196815e248d3ecfb03c680a4507229c2a56
BIN_DIR="$CP_CACHE/bin"
APT_DIR="$CP_CACHE/apt"
SRC_DIR="$CP_CACHE/src"
PKI="$CP_DIR/pki"
RUN="$CP_DIR/run"
LOGS="$CP_DIR/logs"
APISERVER_URL="https://127.0.0.1:$APISERVER_PORT"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
BUILT=(kube-apiserver kube-controller-manager kube-scheduler)
PACKAGES=(etcd-server etcd-client openssl make rsync curl ca-certificates tar gzip jq iproute2 util-linux)

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }
# shellcheck source=debian.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/debian.sh"

# ---------------------------------------------------------------------------------------------
# build

install_packages() {
  local extra=()
  # Any kubectl will do (the machine may have one from elsewhere); Debian's is kubernetes-client.
  command -v kubectl >/dev/null 2>&1 || extra+=(kubernetes-client)
  install_missing "${PACKAGES[@]}" "${extra[@]}"
}

# debian_mirror (debian.sh): bullseye and bookworm are fetched from the system's mirror.

# apt-get with a private source list, list dir and cache: nothing of /etc/apt or /var/lib/apt changes.
apt_private() { apt_private_in "$APT_DIR" "$@"; }

apt_private_update() {
  local mirror
  mirror=$(debian_mirror)
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$APT_DIR/dl"
  cat >"$APT_DIR/sources.list" <<EOF
# kubelet-rs control plane: private apt sources (never added to the system's)
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bullseye main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main
EOF
  if [ -z "$(ls -A "$APT_DIR/lists" 2>/dev/null | grep -v partial || true)" ] || [ -n "${FORCE_APT_UPDATE:-}" ]; then
    log "private apt update ($mirror: bullseye binaries, bookworm sources)"
    apt_private update >/dev/null
  fi
}

install_go() {
  local goroot="$GO_DIR/usr/lib/go-1.15"
  if [ -x "$goroot/bin/go" ] && [ -f "$goroot/src/runtime/proc.go" ]; then
    return 0
  fi
  apt_private_update
  log "fetching Go 1.15 from bullseye"
  rm -rf "$APT_DIR/dl/go" && mkdir -p "$APT_DIR/dl/go"
  # A stale private list (an old cache) points at removed files: refresh once and retry.
  (cd "$APT_DIR/dl/go" && apt_private download golang-1.15-go golang-1.15-src >/dev/null) ||
    {
      FORCE_APT_UPDATE=1 apt_private_update
      (cd "$APT_DIR/dl/go" && apt_private download golang-1.15-go golang-1.15-src >/dev/null)
    }
  rm -rf "$GO_DIR" && mkdir -p "$GO_DIR"
  local deb
  for deb in "$APT_DIR"/dl/go/*.deb; do dpkg -x "$deb" "$GO_DIR"; done
  [ -x "$goroot/bin/go" ] || die "no go binary in $goroot after unpacking"
  # golang-1.15-go links $goroot/src to the -src package's tree, by an absolute /usr path.
  if [ ! -f "$goroot/src/runtime/proc.go" ]; then
    rm -rf "$goroot/src"
    ln -s "$GO_DIR/usr/share/go-1.15/src" "$goroot/src"
  fi
  [ -f "$goroot/src/runtime/proc.go" ] || die "Go sources missing under $goroot/src"
  GOROOT="$goroot" "$goroot/bin/go" version >&2
}

fetch_kubernetes_source() {
  local tree="$SRC_DIR/kubernetes"
  if [ -f "$tree/.kubelet-rs-unpacked" ]; then
    return 0
  fi
  apt_private_update
  log "fetching the bookworm kubernetes source package"
  rm -rf "$APT_DIR/dl/src" && mkdir -p "$APT_DIR/dl/src"
  (cd "$APT_DIR/dl/src" && apt_private source --download-only kubernetes >/dev/null) ||
    {
      FORCE_APT_UPDATE=1 apt_private_update
      (cd "$APT_DIR/dl/src" && apt_private source --download-only kubernetes >/dev/null)
    }
  local orig
  orig=$(ls "$APT_DIR"/dl/src/kubernetes_*.orig.tar.* 2>/dev/null | head -n 1)
  [ -n "$orig" ] || die "no kubernetes orig tarball downloaded"
  log "unpacking $(basename "$orig")"
  rm -rf "$tree" "$SRC_DIR/unpack" && mkdir -p "$SRC_DIR/unpack"
  tar -C "$SRC_DIR/unpack" -xf "$orig"
  local top
  top=$(find "$SRC_DIR/unpack" -mindepth 1 -maxdepth 1 -type d | head -n 1)
  [ -f "$top/cmd/kube-apiserver/apiserver.go" ] || die "unexpected layout of $orig"
  mv "$top" "$tree"
  rm -rf "$SRC_DIR/unpack"
  touch "$tree/.kubelet-rs-unpacked"
}

binaries_present() {
  local b
  for b in "${BUILT[@]}"; do [ -x "$BIN_DIR/$b" ] || return 1; done
}

cmd_build() {
  need_root
  install_packages
  if binaries_present; then
    log "binaries present in $BIN_DIR ($("$BIN_DIR/kube-apiserver" --version 2>/dev/null || true))"
    return 0
  fi
  local t0=$SECONDS
  install_go
  fetch_kubernetes_source
  local tree="$SRC_DIR/kubernetes" goroot="$GO_DIR/usr/lib/go-1.15"
  cat >"$SRC_DIR/version.env" <<EOF
KUBE_GIT_COMMIT='$K8S_COMMIT'
KUBE_GIT_TREE_STATE='clean'
KUBE_GIT_VERSION='$K8S_VERSION'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
EOF
  log "building ${BUILT[*]} (Go 1.15, GOPATH mode; several minutes on 2 cores; log: $SRC_DIR/build.log)"
  local what="" b
  for b in "${BUILT[@]}"; do what="$what cmd/$b"; done
  if ! (
    cd "$tree"
    export GOROOT="$goroot" PATH="$goroot/bin:$PATH"
    export GOPATH="$SRC_DIR/gopath" GOCACHE="$SRC_DIR/gocache"
    export GOPROXY=off GOSUMDB=off CGO_ENABLED=0 GOTOOLCHAIN=local
    export KUBE_GIT_VERSION_FILE="$SRC_DIR/version.env" KUBE_VERBOSE=1
    export KUBE_BUILD_PLATFORMS=linux/amd64
    unset GOBIN
    make WHAT="${what# }" >"$SRC_DIR/build.log" 2>&1
  ); then
    tail -n 40 "$SRC_DIR/build.log" >&2
    die "build failed (full log: $SRC_DIR/build.log)"
  fi
  mkdir -p "$BIN_DIR"
  for b in "${BUILT[@]}"; do
    install -m 0755 "$tree/_output/local/bin/linux/amd64/$b" "$BIN_DIR/$b.tmp"
    mv "$BIN_DIR/$b.tmp" "$BIN_DIR/$b"
  done
  log "built in $((SECONDS - t0))s: $("$BIN_DIR/kube-apiserver" --version)"
}

# ---------------------------------------------------------------------------------------------
# pki and kubeconfigs

# One lock for every command that changes state, so that parallel test binaries calling `up` or
# `node-kubeconfig` at once serialize. Daemons are started with fd 9 closed (they must not
# hold the lock).
LOCK_FILE=${KUBELET_RS_CP_LOCK:-/var/lib/kubelet-rs/control-plane.lock}
take_lock() {
  mkdir -p "$(dirname "$LOCK_FILE")"
  exec 9>"$LOCK_FILE"
  flock 9
}

# Keys, CAs, certificates, kubeconfigs, node identities.
# shellcheck source=scripts/control-plane-pki.sh
. "$(dirname "${BASH_SOURCE[0]}")/control-plane-pki.sh"

write_audit_policy() {
  # Everything the kubelets (group system:nodes: users system:node:*) ask, at Metadata level
  # (verb, resource, user, code; no bodies); nothing else.
  cat >"$CP_DIR/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
POLICY
}

# ---------------------------------------------------------------------------------------------
# processes

# pid_of NAME: the pid recorded for component NAME, if it still runs with our state dir.
pid_of() {
  local f="$RUN/$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$CP_DIR/" || return 1
  echo "$pid"
}

# find_pid CMDLINE: the pid of the process whose command line is exactly CMDLINE.
find_pid() {
  local d want=$1
  for d in /proc/[0-9]*; do
    if [ "$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" = "$want " ]; then
      echo "${d#/proc/}"
      return 0
    fi
  done
  return 1
}

port_free() {
  ! ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# start NAME BINARY ARGS...: starts a component in its own session and records its own pid.
start() {
  local name=$1 pid i
  shift
  if pid=$(pid_of "$name"); then
    log "$name already running (pid $pid)"
    return 0
  fi
  log "starting $name (log: $LOGS/$name.log)"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
  # setsid forks when its caller leads a process group: find the component's own pid.
  for i in $(seq 1 50); do
    if pid=$(find_pid "$*"); then
      echo "$pid" >"$RUN/$name.pid"
      return 0
    fi
    sleep 0.1
  done
  tail -n 30 "$LOGS/$name.log" >&2
  die "$name did not start"
}

stop() {
  local name=$1 pid i
  if pid=$(pid_of "$name"); then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
      [ -d "/proc/$pid" ] || break
      sleep 0.1
    done
    [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/$name.pid"
}

# Components of ours whose pid file is gone (an interrupted `up`): their command lines name our
# binaries and our state dir.
stop_strays() {
  local d cmd pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
    case "$cmd" in
      "$BIN_DIR/kube-"*"$CP_DIR/"* | "etcd --name kubelet-rs --data-dir $CP_DIR/"*)
        log "stopping leftover $pid: ${cmd:0:60}..."
        kill -KILL "$pid" 2>/dev/null || true
        ;;
    esac
  done
}

curl_api() {
  curl -fsS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$APISERVER_URL$1"
}

# wait_for WHAT TRIES COMPONENT CMD...: runs CMD every 0.5s until it succeeds; fails early when
# COMPONENT exits.
wait_for() {
  local what=$1 tries=$2 name=$3 i
  shift 3
  for i in $(seq 1 "$tries"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if ! pid_of "$name" >/dev/null; then
      tail -n 40 "$LOGS/$name.log" >&2
      die "$name exited while waiting for $what"
    fi
    sleep 0.5
  done
  tail -n 40 "$LOGS/$name.log" >&2
  die "timed out waiting for $what"
}

etcd_healthy() {
  curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'
}

default_sa_token_exists() {
  curl_api /api/v1/namespaces/default/serviceaccounts/default >/dev/null &&
    curl_api "/api/v1/namespaces/default/secrets?fieldSelector=type%3Dkubernetes.io%2Fservice-account-token" |
    grep -q '"kubernetes.io/service-account.name"'
}

check_ports() {
  local p name
  for p in "etcd:$ETCD_PORT" "etcd:$ETCD_PEER_PORT" "kube-apiserver:$APISERVER_PORT" \
    "kube-controller-manager:$CM_PORT" "kube-scheduler:$SCHED_PORT"; do
    name=${p%%:*}
    pid_of "$name" >/dev/null && continue
    port_free "${p#*:}" || die "port ${p#*:} (for $name) is in use by another process; see KUBELET_RS_*_PORT"
  done
}

# start_apiserver: starts kube-apiserver (unless running) and waits for /readyz.
start_apiserver() {
  start kube-apiserver "$BIN_DIR/kube-apiserver" \
    --advertise-address=127.0.0.1 --bind-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --insecure-port=0 \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/kubelet-ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
    --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    --enable-bootstrap-token-auth=true \
    --endpoint-reconciler-type=none \
    --enable-priority-and-fairness=false \
    --allow-privileged=true \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --audit-policy-file="$CP_DIR/audit-policy.yaml" \
    --audit-log-path="$LOGS/audit.log" \
    --audit-log-maxsize=200 --audit-log-maxbackup=3 \
    --cert-dir="$RUN/apiserver" \
    --profiling=false \
    --v=1 \
    "${APISERVER_EXTRA_FLAGS[@]}"
  wait_for "kube-apiserver /readyz" 240 kube-apiserver curl_api /readyz
}

cmd_up() {
  need_root
  take_lock
  local t0=$SECONDS
  cmd_build
  mkdir -p "$CP_DIR" "$RUN" "$LOGS"
  check_ports
  make_pki
  write_audit_policy

  start etcd etcd --name kubelet-rs --data-dir "$CP_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "kubelet-rs=http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster-state new --log-level warn
  wait_for "etcd health" 60 etcd etcd_healthy

  start_apiserver

  start kube-controller-manager "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$CP_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$CP_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$CP_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$CM_PORT" --port=0 \
    --cert-dir="$RUN/controller-manager" \
    --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-kubelet-client-cert-file="$PKI/ca.crt" \
    --cluster-signing-kubelet-client-key-file="$PKI/ca.key" \
    --cluster-signing-kube-apiserver-client-cert-file="$PKI/ca.crt" \
    --cluster-signing-kube-apiserver-client-key-file="$PKI/ca.key" \
    --cluster-signing-legacy-unknown-cert-file="$PKI/ca.crt" \
    --cluster-signing-legacy-unknown-key-file="$PKI/ca.key" \
    --cluster-signing-kubelet-serving-cert-file="$PKI/kubelet-ca.crt" \
    --cluster-signing-kubelet-serving-key-file="$PKI/kubelet-ca.key" \
    --controllers='*,bootstrapsigner,tokencleaner' \
    --profiling=false \
    --v=1 \
    "${CM_EXTRA_FLAGS[@]}"

  start kube-scheduler "$BIN_DIR/kube-scheduler" \
    --kubeconfig="$CP_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$CP_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$CP_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --port=0 \
    --cert-dir="$RUN/scheduler" \
    --leader-elect=false \
    --profiling=false \
    --v=1

  # The controller-manager works once it has made the default service account and its token.
  wait_for "the default service account's token (controller-manager)" 240 kube-controller-manager \
    default_sa_token_exists
  if ! pid_of kube-scheduler >/dev/null; then
    tail -n 40 "$LOGS/kube-scheduler.log" >&2
    die "kube-scheduler exited"
  fi
  bootstrap_rbac
  log "up in $((SECONDS - t0))s: $APISERVER_URL"
  cmd_env
}

kubectl_admin() {
  kubectl --kubeconfig="$CP_DIR/admin.kubeconfig" "$@"
}

# The RBAC kubeadm creates for node TLS bootstrap (kubeadm init phase bootstrap-token): the
# token's group may create CSRs and have its node client CSRs approved; nodes may renew their
# own client certificates. The cluster roles are the apiserver's bootstrap policy.
bootstrap_rbac() {
  kubectl_admin apply -f - >/dev/null <<'RBAC'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:kubelet-bootstrap
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-bootstrapper
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:bootstrappers:kubeadm:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-bootstrap
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:certificates.k8s.io:certificatesigningrequests:nodeclient
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:bootstrappers:kubeadm:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-certificate-rotation
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:certificates.k8s.io:certificatesigningrequests:selfnodeclient
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:nodes
RBAC
}

# bootstrap-token [TTL]: a kubeadm-style bootstrap token secret and a kubeconfig using it.
cmd_bootstrap_token() {
  local ttl=${1:-24h}
  need_root
  take_lock
  [ -f "$PKI/ca.crt" ] && curl_api /readyz >/dev/null 2>&1 || die "the control plane is not up"
  local pid
  pid=$(pid_of kube-apiserver) || die "the control plane's apiserver is not running"
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--enable-bootstrap-token-auth=true" ||
    die "this apiserver was started without --enable-bootstrap-token-auth (an older control-plane.sh): restart it with down and up"
  [[ "$ttl" =~ ^[0-9]+[smh]$ ]] || die "TTL must be like 30m or 24h: $ttl"
  local secs=${ttl%?}
  case "$ttl" in
    *m) secs=$((secs * 60)) ;;
    *h) secs=$((secs * 3600)) ;;
  esac
  bootstrap_rbac
  local id secret expiration
  id=$(openssl rand -hex 3)
  secret=$(openssl rand -hex 8)
  expiration=$(date -u -d "@$(($(date +%s) + secs))" +%Y-%m-%dT%H:%M:%SZ)
  kubectl_admin apply -f - >/dev/null <<TOKEN
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-$id
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  description: kubelet-rs node bootstrap token (scripts/control-plane.sh bootstrap-token)
  token-id: "$id"
  token-secret: "$secret"
  expiration: "$expiration"
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token
TOKEN
  mkdir -p "$CP_DIR/bootstrap"
  local path="$CP_DIR/bootstrap/bootstrap-kubelet-$id.kubeconfig" tmp
  tmp="$path.tmp"
  cat >"$tmp" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: kubelet-rs
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: kubelet-bootstrap
  user:
    token: $id.$secret
contexts:
- name: kubelet-bootstrap@kubelet-rs
  context:
    cluster: kubelet-rs
    user: kubelet-bootstrap
current-context: kubelet-bootstrap@kubelet-rs
preferences: {}
KCFG
  chmod 0600 "$tmp"
  mv "$tmp" "$path"
  log "bootstrap token $id (expires $expiration)"
  echo "$path"
}

cmd_down() {
  need_root
  take_lock
  local i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${COMPONENTS[$i]}"; done
  stop_strays
  rm -rf "$CP_DIR"
  log "down"
}

# apiserver-stop / apiserver-start: only the apiserver goes away and comes back (same certs,
# same etcd), for tests of a kubelet riding out an apiserver outage.
cmd_apiserver_stop() {
  need_root
  take_lock
  stop kube-apiserver
}

cmd_apiserver_start() {
  need_root
  take_lock
  [ -f "$PKI/ca.crt" ] && pid_of etcd >/dev/null || die "the control plane is not up"
  start_apiserver
}

cmd_status() {
  local c pid rc=0
  for c in "${COMPONENTS[@]}"; do
    if pid=$(pid_of "$c"); then
      echo "$c: running (pid $pid)"
    else
      echo "$c: not running"
      rc=1
    fi
  done
  if [ -f "$PKI/admin.crt" ] && curl_api /readyz >/dev/null 2>&1; then
    echo "kube-apiserver: ready at $APISERVER_URL"
  else
    echo "kube-apiserver: not ready"
    rc=1
  fi
  return $rc
}

cmd_env() {
  cat <<ENV
export KUBECONFIG=$CP_DIR/admin.kubeconfig
export KUBELET_RS_ADMIN_KUBECONFIG=$CP_DIR/admin.kubeconfig
export KUBELET_RS_NODE_NAME=$NODE_NAME
export KUBELET_RS_NODE_KUBECONFIG=$CP_DIR/node.kubeconfig
export KUBELET_RS_APISERVER_URL=$APISERVER_URL
export KUBELET_RS_CLUSTER_CA=$PKI/ca.crt
export KUBELET_RS_KUBELET_CA=$PKI/kubelet-ca.crt
export KUBELET_RS_KUBELET_TLS_CERT=$PKI/kubelet.crt
export KUBELET_RS_KUBELET_TLS_KEY=$PKI/kubelet.key
export KUBELET_RS_AUDIT_LOG=$LOGS/audit.log
export ETCDCTL_API=3
export ETCDCTL_ENDPOINTS=http://127.0.0.1:$ETCD_PORT
ENV
}

cmd_node_kubeconfig() {
  local node=${1:-}
  [ -n "$node" ] || die "usage: $0 node-kubeconfig NODE"
  valid_node_name "$node" || die "invalid node name: $node"
  need_root
  take_lock
  [ -f "$PKI/ca.crt" ] || die "the control plane is not up (no $PKI/ca.crt)"
  node_identity "$node"
  echo "$CP_DIR/nodes/$node/kubeconfig"
}

# audit-rate [USER_PREFIX] [LAST_SECONDS]: requests per minute by verb and resource[/subresource]
# (or path, for non-resource requests) in the audit log, of users whose name starts with
# USER_PREFIX (default: system:node:, every kubelet), over the last LAST_SECONDS (default: the
# whole time span the log covers).
cmd_audit_rate() {
  local prefix=${1:-system:node:} last=${2:-0} log_file="$LOGS/audit.log"
  [ -f "$log_file" ] || die "no audit log at $log_file"
  [[ "$last" =~ ^[0-9]+$ ]] || die "LAST_SECONDS must be a number: $last"
  command -v jq >/dev/null 2>&1 || die "audit-rate needs jq (apt-get install jq)"
  jq -r --arg p "$prefix" '
    select(.stage == "ResponseComplete" and (.user.username | startswith($p)))
    | [ (.stageTimestamp | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601),
        .verb,
        ((.objectRef.resource // (.requestURI | sub("\\?.*$"; "")))
          + (if .objectRef.subresource then "/" + .objectRef.subresource else "" end)) ]
    | @tsv' "$log_file" | awk -F'\t' -v now="$(date +%s)" -v last="$last" '
      last > 0 && $1 < now - last { next }
      { n[$2 " " $3]++; if (first == "" || $1 < first) first = $1; if ($1 > max) max = $1; total++ }
      END {
        if (total == 0) { print "no requests"; exit }
        span = (last > 0 ? last : max - first) / 60; if (span <= 0) span = 1 / 60
        printf "%d requests over %.1f min: %.1f/min\n", total, span, total / span
        for (k in n) printf "%8.1f/min  %s\n", n[k] / span, k | "sort -rn"
      }'
}

# source: Go 1.15 and the kubernetes tree, fetched once (what `build` uses).
cmd_source() {
  need_root
  install_packages
  install_go
  fetch_kubernetes_source
  echo "GOROOT=$GO_DIR/usr/lib/go-1.15 TREE=$SRC_DIR/kubernetes"
}

case "${1:-}" in
  build)
    take_lock
    cmd_build
    ;;
  source)
    take_lock
    cmd_source
    ;;
  bootstrap-token) cmd_bootstrap_token "${2:-}" ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  node-kubeconfig) cmd_node_kubeconfig "${2:-}" ;;
  audit-rate) cmd_audit_rate "${2:-}" "${3:-}" ;;
  apiserver-stop) cmd_apiserver_stop ;;
  apiserver-start) cmd_apiserver_start ;;
  *)
    echo "usage: $0 build|source|bootstrap-token [TTL]|up|down|status|env|node-kubeconfig NODE|audit-rate [USER_PREFIX] [LAST_SECONDS]|apiserver-stop|apiserver-start" >&2
    exit 2
    ;;
esac
