# shellcheck shell=bash
# The control plane's kubernetes v1.20.2 source tree and its Go 1.15 (scripts/control-plane.sh
# fetches both once), for the suites built from it. Sourced by scripts/conformance.sh and
# scripts/node-e2e.sh; needs their `die`, `SCRIPT_DIR` and `CONF_CACHE`.

# tree_of: sets GOROOT_1_15 and TREE.
tree_of() {
  local src
  src=$(bash "$SCRIPT_DIR/control-plane.sh" source | tail -n 1)
  GOROOT_1_15=${src#GOROOT=}
  GOROOT_1_15=${GOROOT_1_15%% TREE=*}
  TREE=${src##* TREE=}
  [ -x "$GOROOT_1_15/bin/go" ] && [ -d "$TREE/test/e2e" ] || die "no Go 1.15 / kubernetes tree ($src)"
}

# in_tree LOG COMMAND...: COMMAND in the tree with its Go 1.15, offline, output appended to LOG.
# The tree's own build (make) keeps its Go cache in the tree (_output/local/go/cache), shared by
# every build from it: one at a time.
in_tree() {
  local logf=$1
  shift
  mkdir -p "$CONF_CACHE"
  (
    exec 8>"$CONF_CACHE/build.lock"
    flock 8
    cd "$TREE"
    export GOROOT="$GOROOT_1_15" PATH="$GOROOT_1_15/bin:$PATH"
    export GOPROXY=off GOSUMDB=off CGO_ENABLED=0 GOTOOLCHAIN=local
    export KUBE_GIT_VERSION_FILE="$CONF_CACHE/version.env" KUBE_VERBOSE=1
    export KUBE_BUILD_PLATFORMS=linux/amd64
    unset GOBIN
    "$@" >>"$logf" 2>&1
  )
}
