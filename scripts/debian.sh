# shellcheck shell=bash
# The Debian package helpers the kubelet-rs scripts share; sourced, never run:
#
#   . "$SCRIPT_DIR/debian.sh"
#
# The sourcing script defines `log` first (its messages keep the script's own prefix).
#
#   install_missing PKG...        apt-get install those of PKG that dpkg does not list as
#                                 installed (one apt-get update first, only when some are missing)
#   debian_mirror                 the Debian mirror this machine's apt sources name
#                                 (KUBELET_RS_DEBIAN_MIRROR overrides; else deb.debian.org)
#   apt_private_in DIR ARGS...    apt-get ARGS with the source list DIR/sources.list and package
#                                 lists and cache under DIR: nothing of /etc/apt or /var/lib/apt
#                                 changes (how the scripts fetch Go 1.15, the kubernetes source
#                                 package and trixie's containerd without touching the system's sources)

install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

debian_mirror() {
  local m=${KUBELET_RS_DEBIAN_MIRROR:-}
  if [ -n "$m" ]; then
    echo "${m%/}"
    return 0
  fi
  m=$(grep -h -E '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -o -E 'https?://[^ ]+/debian/?' |
    grep -v -- '-security' | head -n 1 || true)
  m=${m:-http://deb.debian.org/debian}
  echo "${m%/}"
}

apt_private_in() {
  local dir=$1
  shift
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  apt-get -q \
    -o Dir::Etc::sourcelist="$dir/sources.list" \
    -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists="$dir/lists" \
    -o Dir::Cache="$dir/cache" \
    -o Dir::Cache::Archives="$dir/cache/archives" \
    -o APT::Get::List-Cleanup=0 \
    -o APT::Sandbox::User=root \
    "$@"
}
