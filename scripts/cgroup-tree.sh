# shellcheck shell=bash
# remove_cgroup_tree DIR: the cgroup directory DIR of one hierarchy and everything below it,
# deepest first, killing what still runs in each. Sourced by scripts/node-env.sh and
# scripts/node-e2e.sh; needs their `log`.
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
