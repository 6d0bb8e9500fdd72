#!/usr/bin/env bash
# kubelet-rs test registry: Debian's docker-registry (distribution 2.8) on 127.0.0.1 with TLS
# from a throwaway CA and htpasswd basic auth, trusted by a node environment's containerd
# through its registry hosts directory (config_path, see scripts/node-env.sh).
#
#   scripts/registry.sh up      install what is missing, make the CA, the serving certificate
#                               and the htpasswd file (once), start the registry, write the
#                               containerd hosts.toml that trusts it, push the local images
#                               (as <registry>/kubelet-rs/{busybox,pause}:1.0); print the env lines
#   scripts/registry.sh down    stop the registry, remove its state and the hosts.toml
#   scripts/registry.sh status  print whether it runs (exit 1 when it does not answer, or when
#                               the node's containerd lacks its hosts.toml)
#   scripts/registry.sh env     print the shell exports (address, user, password, CA)
#   scripts/registry.sh push LOCAL REMOTE_PATH
#                               push a local image of the node's containerd (k8s.io namespace)
#                               as <registry>/REMOTE_PATH, authenticated
#
# Environment: KUBELET_RS_REGISTRY_DIR (state, default /var/lib/kubelet-rs/registry),
# KUBELET_RS_REGISTRY_PORT (default 5443), and the node environment's own variables
# (KUBELET_RS_NODE_INSTANCE, ...): the hosts.toml goes into that instance's hosts directory and
# images are pushed from its containerd.
#
# Runs as root on Debian 12. Idempotent: `up` twice leaves one registry running.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REG_DIR=${KUBELET_RS_REGISTRY_DIR:-/var/lib/kubelet-rs/registry}
PORT=${KUBELET_RS_REGISTRY_PORT:-5443}
ADDR="127.0.0.1:$PORT"
PKI="$REG_DIR/pki"
PID_FILE="$REG_DIR/registry.pid"
LOG_FILE="$REG_DIR/registry.log"
USER_NAME=kubelet-rs
PACKAGES=(docker-registry apache2-utils openssl curl)
# A scratch namespace of the node's containerd for tagging before a push: the k8s.io namespace
# never gets the registry's names, so pods really pull them.
PUSH_NS=kubelet-rs-registry-push

log() { printf '[registry] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }
# shellcheck source=debian.sh
. "$SCRIPT_DIR/debian.sh"

install_packages() { install_missing "${PACKAGES[@]}"; }

# The node environment this registry serves (its hosts directory, socket and ctr).
node_env() {
  bash "$SCRIPT_DIR/node-env.sh" env
}

node_var() {
  node_env | sed -n "s/^$1=//p" | tr -d '"'
}

hosts_dir() {
  node_var KUBELET_RS_REGISTRY_HOSTS_DIR
}

# Warns when the node's containerd was configured before it had a hosts directory.
check_node_config() {
  local cfg
  cfg="$(node_var KUBELET_RS_NODE_DIR)/containerd/config.toml"
  if [ -f "$cfg" ] && ! grep -q "config_path = \"$(hosts_dir)\"" "$cfg"; then
    log "warning: the node's containerd ($cfg) does not read $(hosts_dir): pulls will not trust the registry until the node environment is set up again (scripts/node-env.sh down; up)"
  fi
}

make_pki() {
  mkdir -p "$PKI"
  chmod 0700 "$PKI"
  if [ ! -f "$PKI/ca.crt" ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=kubelet-rs-registry-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$PKI/ca.crt" 2>/dev/null
  fi
  if [ ! -f "$PKI/registry.crt" ]; then
    local ext
    ext=$(mktemp)
    printf '[v3]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$ext"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/registry.key" 2>/dev/null
    openssl req -new -key "$PKI/registry.key" -subj "/CN=127.0.0.1" -out "$PKI/registry.csr" 2>/dev/null
    openssl x509 -req -in "$PKI/registry.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
      -CAcreateserial -CAserial "$PKI/ca.srl" -days 3650 -sha256 -extfile "$ext" -extensions v3 \
      -out "$PKI/registry.crt" 2>/dev/null
    rm -f "$ext" "$PKI/registry.csr"
  fi
  if [ ! -f "$REG_DIR/password" ]; then
    (umask 077 && openssl rand -hex 12 >"$REG_DIR/password")
  fi
  # distribution's htpasswd accepts bcrypt only.
  htpasswd -Bbc "$REG_DIR/htpasswd" "$USER_NAME" "$(cat "$REG_DIR/password")" 2>/dev/null
}

write_config() {
  cat >"$REG_DIR/config.yml" <<EOF
# Written by kubelet-rs scripts/registry.sh.
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $REG_DIR/data
  delete:
    enabled: true
http:
  addr: $ADDR
  tls:
    certificate: $PKI/registry.crt
    key: $PKI/registry.key
auth:
  htpasswd:
    realm: kubelet-rs-registry
    path: $REG_DIR/htpasswd
EOF
}

registry_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$REG_DIR/config.yml" || return 1
  echo "$pid"
}

answers() {
  # /v2/ answers 401 without credentials; with them, 200.
  curl -fsS --max-time 3 --cacert "$PKI/ca.crt" -u "$USER_NAME:$(cat "$REG_DIR/password")" \
    "https://$ADDR/v2/" >/dev/null 2>&1
}

start_registry() {
  if registry_pid >/dev/null; then
    return 0
  fi
  ss -Htln "sport = :$PORT" 2>/dev/null | grep -q . && die "port $PORT is in use (set KUBELET_RS_REGISTRY_PORT)"
  mkdir -p "$REG_DIR/data"
  log "starting docker-registry on $ADDR (log: $LOG_FILE)"
  setsid docker-registry serve "$REG_DIR/config.yml" >>"$LOG_FILE" 2>&1 </dev/null &
  local i d
  for i in $(seq 1 50); do
    for d in /proc/[0-9]*; do
      if [ "$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" = "docker-registry serve $REG_DIR/config.yml " ]; then
        echo "${d#/proc/}" >"$PID_FILE"
        break
      fi
    done
    if registry_pid >/dev/null && answers; then
      return 0
    fi
    sleep 0.2
  done
  tail -n 20 "$LOG_FILE" >&2
  die "the registry did not come up"
}

# containerd's CRI reads <config_path>/<host:port>/hosts.toml at every pull.
write_hosts_toml() {
  local dir
  dir="$(hosts_dir)/$ADDR"
  mkdir -p "$dir"
  cat >"$dir/hosts.toml.tmp" <<EOF
# Written by kubelet-rs scripts/registry.sh: trust the test registry's throwaway CA.
server = "https://$ADDR"

[host."https://$ADDR"]
  capabilities = ["pull", "resolve", "push"]
  ca = "$PKI/ca.crt"
EOF
  mv "$dir/hosts.toml.tmp" "$dir/hosts.toml"
}

# push LOCAL REMOTE_PATH: LOCAL from the node's k8s.io namespace to $ADDR/REMOTE_PATH.
cmd_push() {
  local local_ref=$1 remote="$ADDR/$2" ctr sock
  ctr=$(node_var KUBELET_RS_CTR)
  sock=$(node_var KUBELET_RS_CRI_ENDPOINT)
  sock=${sock#unix://}
  [ -n "$ctr" ] || ctr=ctr
  local tmp
  tmp=$(mktemp)
  "$ctr" -a "$sock" -n k8s.io images export "$tmp" "$local_ref" >/dev/null ||
    die "no local image $local_ref in the node's containerd"
  "$ctr" -a "$sock" -n "$PUSH_NS" images import "$tmp" >/dev/null
  "$ctr" -a "$sock" -n "$PUSH_NS" images tag --force "$local_ref" "$remote" >/dev/null
  "$ctr" -a "$sock" -n "$PUSH_NS" images push --hosts-dir "$(hosts_dir)" \
    --user "$USER_NAME:$(cat "$REG_DIR/password")" "$remote" >/dev/null
  "$ctr" -a "$sock" -n "$PUSH_NS" images rm "$remote" "$local_ref" >/dev/null 2>&1 || true
  rm -f "$tmp"
  log "pushed $local_ref as $remote"
}

cmd_up() {
  need_root
  install_packages
  mkdir -p "$REG_DIR"
  chmod 0700 "$REG_DIR"
  exec 9>"$REG_DIR.lock"
  flock 9
  make_pki
  write_config
  start_registry
  write_hosts_toml
  check_node_config
  cmd_push kubelet-rs.local/busybox:1.0 kubelet-rs/busybox:1.0
  cmd_push kubelet-rs.local/pause:1.0 kubelet-rs/pause:1.0
  cmd_env
}

cmd_down() {
  need_root
  local pid
  if pid=$(registry_pid); then
    log "stopping the registry (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      [ -d "/proc/$pid" ] || break
      sleep 0.1
    done
    [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$(hosts_dir)/$ADDR" "$REG_DIR"
  log "down"
}

cmd_status() {
  local pid
  if pid=$(registry_pid) && answers; then
    # Without its hosts.toml (a node environment set up again since `up`), containerd falls
    # back to plain HTTP for 127.0.0.1 and the registry answers 400: `up` must run again.
    if [ ! -f "$(hosts_dir)/$ADDR/hosts.toml" ]; then
      echo "registry: running (pid $pid) at https://$ADDR, but the node's containerd has no hosts.toml for it (run up)"
      return 1
    fi
    echo "registry: running (pid $pid) at https://$ADDR"
    return 0
  fi
  echo "registry: not running"
  return 1
}

cmd_env() {
  cat <<ENV
export KUBELET_RS_REGISTRY=$ADDR
export KUBELET_RS_REGISTRY_USER=$USER_NAME
export KUBELET_RS_REGISTRY_PASSWORD=$(cat "$REG_DIR/password" 2>/dev/null)
export KUBELET_RS_REGISTRY_CA=$PKI/ca.crt
ENV
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  push)
    [ $# -eq 3 ] || die "usage: $0 push LOCAL REMOTE_PATH"
    need_root
    cmd_push "$2" "$3"
    ;;
  *)
    echo "usage: $0 up|down|status|env|push LOCAL REMOTE_PATH" >&2
    exit 2
    ;;
esac
