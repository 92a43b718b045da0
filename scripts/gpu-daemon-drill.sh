#!/usr/bin/env bash
# The daemon's restart after a GPU breaks, on a real GPU (issue 19; src/daemon/restart.rs).
# No gRPC client is needed: the daemon proves a 2 KiB Window PoSt job given with
# --preload-job before it serves, and prints a ready line each time it serves.
#   1. fresh: the daemon proves the job on GPU 0 and serves; its CUDA file descriptors and GPU
#      memory are recorded; SIGTERM must end it with status 0.
#   2. drill: SNARKPIPE_DRILL_BREAK_GPU=1 makes the first kernel trap for real (a sticky
#      error: the process can never use the GPU again). The daemon must replace itself (same
#      PID), and the new process must prove the job on the same GPU and serve. Its CUDA file
#      descriptors and GPU memory must not exceed the fresh run's (a context of the broken
#      process that survived the exec would show here); SIGTERM must end it with status 0.
# Needs, carried in .gpu/: snarkpipe (release, built with nvcc), params/ (the 2 KiB Window PoSt
# .params and .vk, and its .snarkpipe-matrices if kept), window-post.json (the job).
# Writes under $OUT: fresh.log, drill.log (the daemons' logs), drill.txt (the verdict lines).
set -u
out=${OUT:-out}; mkdir -p "$out"
bin=.gpu/snarkpipe; params=${PARAMS:-.gpu/params}; job=${JOB:-.gpu/window-post.json}
for need in "$bin" "$params" "$job"; do
  [ -e "$need" ] || { echo "missing $need: see this script's header" >&2; exit 1; }
done
report=$out/drill.txt; : >"$report"
verdict() { echo "$*" | tee -a "$report"; }
failed=0

# Starts a daemon (env assignments as arguments), waits for `lines` ready lines or `cap`
# seconds; sets $pid.
start() {
  local name=$1 lines=$2 cap=$3; shift 3
  local sock=/tmp/snarkpipe-$name.sock
  rm -f "$sock"
  env SNARKPIPE_LOG=info NO_COLOR=1 "$@" "$bin" serve --listen "unix:$sock" --params-dir "$params" \
    --backend cuda --devices 0 --preload-job "$job" >"$out/$name.stdout" 2>"$out/$name.log" &
  pid=$!
  local waited=0
  while [ "$(grep -c 'listening on' "$out/$name.stdout" 2>/dev/null)" -lt "$lines" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then verdict "$name: the daemon exited before its ready line $lines"; return 1; fi
    if [ "$waited" -ge "$cap" ]; then verdict "$name: no ready line $lines within ${cap} s"; return 1; fi
    sleep 1; waited=$((waited + 1))
  done
  verdict "$name: ready line $lines after ${waited} s"
}

# CUDA device files the process holds, and its GPU memory in MiB.
holds() {
  local fds mem
  fds=$(ls -l "/proc/$1/fd" 2>/dev/null | grep -c '/dev/nvidia')
  mem=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', ' -v p="$1" '$1==p {print $2}')
  echo "${fds:-0} ${mem:-0}"
}

stop() {
  kill -TERM "$1"; wait "$1"; local rc=$?
  verdict "$2: exit status after SIGTERM $rc"
  [ $rc -eq 0 ] || failed=1
}

nvidia-smi --query-gpu=name,memory.used,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
if start fresh 1 180; then
  read -r fresh_fds fresh_mem < <(holds "$pid")
  verdict "fresh: pid $pid holds $fresh_fds CUDA file descriptors and $fresh_mem MiB of GPU memory"
  stop "$pid" fresh
else
  failed=1; kill "$pid" 2>/dev/null
fi

if start drill 2 300 SNARKPIPE_DRILL_BREAK_GPU=1; then
  first_pid=$pid
  read -r drill_fds drill_mem < <(holds "$pid")
  verdict "drill: pid $pid (one process throughout) holds $drill_fds CUDA file descriptors and $drill_mem MiB of GPU memory"
  grep -q 'trapped\|DeviceBroken\|broke' "$out/drill.log" && verdict "drill: the trap broke the GPU" || { verdict "drill: no sign of the trap in the log"; failed=1; }
  grep -q 'replacing the daemon' "$out/drill.log" && verdict "drill: the daemon replaced itself" || { verdict "drill: no restart in the log"; failed=1; }
  grep -q 'preloaded' "$out/drill.log" && verdict "drill: the restarted daemon proved the job on the GPU" || { verdict "drill: the job was not proven after the restart"; failed=1; }
  if [ "${drill_fds:-0}" -gt "${fresh_fds:-0}" ] || [ "${drill_mem:-0}" -gt $(( ${fresh_mem:-0} + 64 )) ]; then
    verdict "drill: the restarted process holds more than a fresh one: something of the broken process survived"; failed=1
  fi
  stop "$first_pid" drill
else
  failed=1; kill "$pid" 2>/dev/null
fi
verdict "result: $([ $failed -eq 0 ] && echo PASS || echo FAIL)"
grep -iE 'error|warn' "$out/drill.log" | head -20
exit $failed
