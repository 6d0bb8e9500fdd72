#!/usr/bin/env bash
# The Go kubelet v1.20.2, built from Debian bookworm's `kubernetes` source package with Go 1.15
# from Debian bullseye, for side-by-side benchmarks (`cargo xtask bench-cri`).
#
#   scripts/go-kubelet.sh build   fetch + build once per machine; prints the binary's path
#   scripts/go-kubelet.sh path    prints the cached binary's path (exit 1 if not built yet)
#
# Never touches the system apt configuration: package lists, the download cache and the sources
# list are private (under $WORK_DIR). The binary is cached at $CACHE_DIR/kubelet, outside the
# repository, so later runs reuse it. Runs as root on Debian (amd64).
set -euo pipefail

CACHE_DIR=${KUBELET_RS_GO_KUBELET_CACHE:-/var/cache/kubelet-rs/go-kubelet}
WORK_DIR=${KUBELET_RS_GO_KUBELET_WORK:-$CACHE_DIR/work}
BIN="$CACHE_DIR/kubelet"
K8S_VERSION=v1.20.2
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

log() { echo "[go-kubelet] $*" >&2; }
# shellcheck source=debian.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/debian.sh"

# apt-get with a private sources list, list dir and cache; no system state changes.
apt_private() { apt_private_in "$WORK_DIR/apt" "$@"; }

fetch() {
    local MIRROR
    # The Debian mirror this machine's apt sources name (KUBELET_RS_DEBIAN_MIRROR overrides).
    MIRROR=$(debian_mirror)
    mkdir -p "$WORK_DIR/apt/lists/partial" "$WORK_DIR/apt/cache/archives/partial" "$WORK_DIR/dl"
    local signed=""
    [[ -f "$KEYRING" ]] && signed="[signed-by=$KEYRING] "
    cat >"$WORK_DIR/apt/sources.list" <<EOF
deb-src ${signed}$MIRROR bookworm main
deb ${signed}$MIRROR bullseye main
EOF
    log "apt lists (private) from $MIRROR"
    apt_private update >&2

    if [[ ! -x "$WORK_DIR/go/usr/lib/go-1.15/bin/go" ]]; then
        log "downloading golang-1.15-go and golang-1.15-src (bullseye)"
        (cd "$WORK_DIR/dl" && apt_private download golang-1.15-go golang-1.15-src >&2)
        rm -rf "$WORK_DIR/go"
        for deb in "$WORK_DIR"/dl/golang-1.15-*.deb; do dpkg -x "$deb" "$WORK_DIR/go"; done
    fi

    if [[ ! -f "$WORK_DIR/src/.unpacked" ]]; then
        log "downloading the kubernetes source package (bookworm)"
        rm -rf "$WORK_DIR/src" "$WORK_DIR/srcdl"
        mkdir -p "$WORK_DIR/srcdl"
        (cd "$WORK_DIR/srcdl" && apt_private source --download-only kubernetes >&2)
        local dsc
        dsc=$(ls "$WORK_DIR"/srcdl/kubernetes_*.dsc | head -n1)
        # dpkg-source unpacks the orig tarball and applies the Debian patches.
        dpkg-source --no-check -x "$dsc" "$WORK_DIR/src" >&2
        touch "$WORK_DIR/src/.unpacked"
    fi
}

build() {
    if [[ -x "$BIN" ]]; then
        log "cached: $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
        echo "$BIN"
        return
    fi
    mkdir -p "$CACHE_DIR" "$WORK_DIR"
    # The Kubernetes build copies binaries with rsync (a Build-Depends of the Debian package).
    install_missing rsync make dpkg-dev
    fetch
    local goroot="$WORK_DIR/go/usr/lib/go-1.15"
    # The Go distribution's src comes from golang-1.15-src (/usr/share/go-1.15/src), linked
    # from GOROOT by the -go package; repoint the link into the unpacked tree.
    if [[ -L "$goroot/src" || ! -e "$goroot/src" ]]; then
        ln -sfn "$WORK_DIR/go/usr/share/go-1.15/src" "$goroot/src"
    fi
    if [[ -e "$WORK_DIR/go/usr/share/go-1.15/test" && ( -L "$goroot/test" || ! -e "$goroot/test" ) ]]; then
        ln -sfn "$WORK_DIR/go/usr/share/go-1.15/test" "$goroot/test"
    fi
    cat >"$WORK_DIR/version.env" <<EOF
KUBE_GIT_COMMIT='faecb196815e248d3ecfb03c680a4507229c2a56'
KUBE_GIT_TREE_STATE='clean'
KUBE_GIT_VERSION='$K8S_VERSION'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
EOF
    log "building cmd/kubelet with $("$goroot/bin/go" version)"
    (
        cd "$WORK_DIR/src"
        # A failed earlier run can leave empty generator binaries that make thinks are current.
        rm -rf _output
        export GOROOT="$goroot" PATH="$goroot/bin:$PATH"
        export GOPROXY=off GOFLAGS=-mod=vendor GOCACHE="$WORK_DIR/gocache" GO111MODULE=off
        export KUBE_GIT_VERSION_FILE="$WORK_DIR/version.env"
        export KUBE_GIT_COMMIT=faecb196815e248d3ecfb03c680a4507229c2a56 KUBE_GIT_TREE_STATE=clean
        export KUBE_GIT_VERSION=$K8S_VERSION KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20
        export CGO_ENABLED=0 KUBE_BUILD_PLATFORMS=linux/amd64 KUBE_VERBOSE=${KUBE_VERBOSE:-2}
        make WHAT=cmd/kubelet >&2
    )
    local out
    out=$(ls "$WORK_DIR"/src/_output/local/bin/linux/amd64/kubelet "$WORK_DIR"/src/_output/bin/kubelet 2>/dev/null | head -n1)
    [[ -x "$out" ]] || { log "build produced no kubelet binary"; exit 1; }
    install -m 0755 "$out" "$BIN"
    log "built $BIN ($("$BIN" --version))"
    echo "$BIN"
}

case "${1:-}" in
build) build ;;
path)
    [[ -x "$BIN" ]] || { log "not built: run $0 build"; exit 1; }
    echo "$BIN"
    ;;
*)
    echo "usage: $0 build|path" >&2
    exit 2
    ;;
esac
