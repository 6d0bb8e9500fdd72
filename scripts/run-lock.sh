# shellcheck shell=bash
# one_run_at_a_time DIR WHAT: a run that uses DIR (its cluster, ports, namespaces) waits for
# another one still using it. The lock is a directory naming the running script's pid, free again
# once that process is gone (no descriptor that the daemons a run starts could inherit and keep).
# Sourced by scripts/conformance.sh and scripts/node-e2e.sh; needs their `log`.
one_run_at_a_time() {
  local dir=$1 what=$2 lock="$1/run.lock" pid waited=0
  mkdir -p "$dir"
  until mkdir "$lock" 2>/dev/null; do
    pid=$(cat "$lock/pid" 2>/dev/null || true)
    if [ -n "$pid" ] && [ "$pid" != "$$" ] && ! [ -d "/proc/$pid" ]; then
      rm -rf "$lock"
      continue
    fi
    [ "$pid" = "$$" ] && return 0
    [ "$waited" = 1 ] || log "another $what run (pid ${pid:-?}) is using $dir: waiting for it"
    waited=1
    sleep 5
  done
  echo "$$" >"$lock/pid"
}
