#!/usr/bin/env bash
# The shipped kubelet-rs binary: the `ship` profile optimised with the profile of a training run
# (profile-guided optimisation, PGO).
#
#   scripts/pgo-build.sh    build (or reuse) it; its path is the last line printed
#
# Why: a kubelet at rest runs a few MB of its ~28 MB of code, but spread over the whole binary,
# so the kernel maps most of it (each page fault maps the 64 KiB around it): 22 MiB of code
# resident at 110 pods. With a profile, LLVM marks the code the training never ran as cold and
# lld puts it apart (`-z keep-text-section-prefix`: .text.unlikely, .text.hot, .text), so the
# code a node runs sits together. Issue #38 has the figures.
#
# Steps: (1) an instrumented `ship` build; (2) training: `bench-cri` starts 110 static pods on a
# private containerd with it, idles 70 s (the periodic work: container GC every minute, the heap
# trim, housekeeping), restarts the kubelet (adoption) and removes the pods; (3) `llvm-profdata
# merge` (rustup's llvm-tools, added when missing); (4) the `ship` build with `-Cprofile-use`,
# linked a second time with the functions the training ran first (run_order below), its
# relative relocations packed (glibc 2.36+). The
# training is a standalone node's: what only a cluster node runs (the API client, its watches,
# node status) is laid out as cold code.
# Each build has a target directory of its own under $PGO_DIR (their RUSTFLAGS differ, so
# sharing one would rebuild everything each time); `--target` keeps build scripts and proc
# macros out of the instrumentation. The result is reused while the sources, Cargo.lock and
# the toolchain are unchanged. Cold on the 2-core machine: about 39-40 minutes (the instrumented
# build 18, the training 2.5, the optimised build 10, its second link 8; 2,388 s on a new
# machine with other builds beside it); after a change about 18 (a new profile rebuilds every
# crate of the optimised build).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/kubelet-rs/target}
export CARGO_INCREMENTAL=0
PGO_DIR=${KUBELET_RS_PGO_DIR:-/var/cache/kubelet-rs/pgo}
log() { printf '[pgo-build] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# What the binary is made of, by content (committed or not): the kubelet's crates, the training
# (bench-cri), this script, the manifests and the lock file; and the toolchain. A change elsewhere (the
# README, the `tests` crate, another benchmark) keeps the binary; one to a kubelet crate's own
# tests does not (they are in its directory).
KEY_PATHS=(Cargo.toml Cargo.lock .cargo kubelet-core kubelet-sources kubelet-runtime-cri
  kubelet-cm kubelet-server kubelet-bin xtask/Cargo.toml xtask/src/bench_cri scripts/pgo-build.sh)
source_key() {
  (
    cd "$REPO"
    rustc -vV
    git ls-files --cached --others --exclude-standard -z -- "${KEY_PATHS[@]}" |
      sort -z | xargs -0 -r sha256sum 2>/dev/null
  ) | sha256sum | cut -d' ' -f1
}

llvm_profdata() {
  local sysroot tool
  sysroot=$(rustc --print sysroot)
  tool=$(ls "$sysroot"/lib/rustlib/*/bin/llvm-profdata 2>/dev/null | head -n 1 || true)
  if [ -z "$tool" ]; then
    log "adding rustup's llvm-tools (llvm-profdata)"
    rustup component add llvm-tools >&2
    tool=$(ls "$sysroot"/lib/rustlib/*/bin/llvm-profdata 2>/dev/null | head -n 1 || true)
  fi
  [ -x "$tool" ] || die "no llvm-profdata in $sysroot (rustup component add llvm-tools)"
  echo "$tool"
}

# build DIR RUSTFLAGS: the ship kubelet in target directory DIR, for the host target ($HOST,
# set by main); prints its path.
build() {
  local dir=$1 flags=$2
  (cd "$REPO" && CARGO_TARGET_DIR="$dir" RUSTFLAGS="$flags" \
    cargo build -q --profile ship --target "$HOST" -p kubelet-bin) >&2
  echo "$dir/$HOST/ship/kubelet"
}

# run_order LLVM_PROFDATA BINARY: the functions of BINARY the training ran, for lld's
# --symbol-ordering-file. The profile marks what the training never ran as cold
# (.text.unlikely), but LLVM merges identical functions (the copies of a generic or inline
# function each crate has) after the profile is applied, and the copy kept may be one the
# training never called, with the others' callers now calling it: such functions run on every
# node yet sit among the cold code, one per 64 KiB the kernel maps. Listing every copy whose
# name (less LTO's `.N` suffix) ran in the training puts them together at the start of their
# section. The second link sees the same object (same sources and flags), so the same names.
run_order() {
  local profdata=$1 binary=$2
  awk '
    FNR == NR {
      if ($0 ~ /^  [^ ].*:$/) { name = substr($0, 3, length($0) - 3); sub(/^.*;/, "", name) }
      else if ($0 ~ /^    Block counts:/ && $0 ~ /[1-9]/) ran[name] = 1
      next
    }
    $2 ~ /^[tT]$/ { base = $3; sub(/\.[0-9]+$/, "", base); if (base in ran) print $3 }
  ' <("$profdata" show --all-functions --counts "$PGO_DIR/kubelet.profdata") \
    <(nm --defined-only "$binary")
}

main() {
  [ "$(id -u)" = 0 ] || die "run as root (the training runs a kubelet)"
  [ $# = 0 ] || die "usage: $0"
  mkdir -p "$PGO_DIR"
  local key out="$PGO_DIR/kubelet"
  key=$(source_key)
  if [ -x "$out" ] && [ "$(cat "$PGO_DIR/key" 2>/dev/null)" = "$key" ]; then
    log "up to date: $out"
    echo "$out"
    return
  fi
  local profdata gen use t0=$SECONDS
  profdata=$(llvm_profdata)
  HOST=$(rustc -vV | sed -n 's/^host: //p')
  log "(1/4) the instrumented build (cache $PGO_DIR/gen)"
  gen=$(build "$PGO_DIR/gen" "-Cprofile-generate=$PGO_DIR/raw")
  rm -rf "$PGO_DIR/raw"

  log "(2/4) training: 110 static pods on a private containerd (log $PGO_DIR/train.log)"
  bash "$REPO/scripts/node-env.sh" up >&2
  (cd "$REPO" && cargo build -q --release -p xtask) >&2
  "$CARGO_TARGET_DIR/release/xtask" bench-cri --skip-go --skip-backend --pods 110 \
    --idle-secs 70 --kubelet "$gen" >"$PGO_DIR/train.log" 2>&1 ||
    die "the training run failed; see $PGO_DIR/train.log"

  log "(3/4) merging the profile"
  compgen -G "$PGO_DIR/raw/*.profraw" >/dev/null || die "the training wrote no profile"
  "$profdata" merge -o "$PGO_DIR/kubelet.profdata" "$PGO_DIR"/raw/*.profraw

  log "(4/4) the optimised build (cache $PGO_DIR/use), then linked again in the profile's order"
  local flags="-Cprofile-use=$PGO_DIR/kubelet.profdata -Clink-arg=-Wl,-z,keep-text-section-prefix"
  flags="$flags -Clink-arg=-Wl,--symbol-ordering-file=$PGO_DIR/order.txt"
  flags="$flags -Clink-arg=-Wl,--no-warn-symbol-ordering"
  # Relative relocations packed (DT_RELR, glibc 2.36+): the position-independent binary's
  # 0.8 MiB of `.rela.dyn`, read once at start and resident after, becomes a few KiB. The binary
  # then needs glibc 2.36 (Debian bookworm's); an older loader refuses it by name
  # (GLIBC_ABI_DT_RELR).
  flags="$flags -Clink-arg=-Wl,-z,pack-relative-relocs"
  : >"$PGO_DIR/order.txt"
  use=$(build "$PGO_DIR/use" "$flags")
  run_order "$profdata" "$use" >"$PGO_DIR/order.txt"
  log "$(wc -l <"$PGO_DIR/order.txt") functions the training ran placed first in their section"
  (cd "$REPO" && CARGO_TARGET_DIR="$PGO_DIR/use" cargo clean -q -p kubelet-bin --profile ship \
    --target "$HOST") >&2
  use=$(build "$PGO_DIR/use" "$flags")
  cp "$use" "$out.tmp" && mv "$out.tmp" "$out"
  echo "$key" >"$PGO_DIR/key"
  log "done in $((SECONDS - t0)) s: $out"
  echo "$out"
}

# The whole file is read before anything runs (main and exit are one command line), so editing
# the script during a build cannot change it.
main "$@"; exit
