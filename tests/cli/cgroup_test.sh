#!/usr/bin/env bash
# The command line inside a small cgroup (memory and pids limits, as a shared CI runner or a
# container gives): large but legal scenarios, each command ending within its documented
# bounds (docs/reliability.md) with one of parasim's own exit codes, never killed by the
# OOM killer (137) or aborted (134), and promptly. Needs a writable cgroup v1 or v2
# hierarchy (root); skips (77) without one.
# Usage: cgroup_test.sh PARASIM SOURCE_DIR
set -u
parasim=$1
src=$2
memory_mib=${PARASIM_CGROUP_MEMORY_MIB:-4096}
pids=${PARASIM_CGROUP_PIDS:-64}
name=parasim-test-$$
work=$(mktemp -d)

# Makes the cgroup and moves this shell into it; v2 first, then v1's memory and pids.
groups=()
enter() {
  local v2=/sys/fs/cgroup
  [ -f /sys/fs/cgroup/unified/cgroup.controllers ] && v2=/sys/fs/cgroup/unified
  if [ -f "$v2/cgroup.controllers" ] && grep -qw memory "$v2/cgroup.controllers" && grep -qw pids "$v2/cgroup.controllers" &&
    mkdir "$v2/$name" 2>/dev/null; then
    groups+=("$v2/$name")
    echo $((memory_mib << 20)) >"$v2/$name/memory.max" && echo 0 >"$v2/$name/memory.swap.max" 2>/dev/null
    echo "$pids" >"$v2/$name/pids.max" && echo $$ >"$v2/$name/cgroup.procs" && return 0
    return 1
  fi
  mkdir "/sys/fs/cgroup/memory/$name" 2>/dev/null && mkdir "/sys/fs/cgroup/pids/$name" 2>/dev/null || return 1
  groups+=("/sys/fs/cgroup/memory/$name" "/sys/fs/cgroup/pids/$name")
  echo $((memory_mib << 20)) >"/sys/fs/cgroup/memory/$name/memory.limit_in_bytes" || return 1
  echo "$pids" >"/sys/fs/cgroup/pids/$name/pids.max" || return 1
  echo $$ >"/sys/fs/cgroup/memory/$name/cgroup.procs" && echo $$ >"/sys/fs/cgroup/pids/$name/cgroup.procs"
}
leave() {
  local g root
  for g in "${groups[@]}"; do
    root=$(dirname "$g")
    echo $$ >"$root/cgroup.procs" 2>/dev/null
    rmdir "$g" 2>/dev/null
  done
  rm -rf "$work"
}
trap leave EXIT
if ! enter; then
  echo "skipped: no writable cgroup hierarchy with memory and pids controllers here"
  exit 77
fi
echo "in a cgroup of $memory_mib MiB and $pids pids: ${groups[*]}"

pass=0
fail=0
# within SECONDS CODES -- COMMAND...: exits with one of CODES (a regex) within SECONDS.
within() {
  local limit=$1 codes=$2
  shift 3
  local start rc ms out
  start=$(date +%s%N)
  out=$(timeout -s KILL $((limit * 3)) "$@" 2>&1)
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  if [[ $rc =~ ^($codes)$ ]] && [ "$ms" -le $((limit * 1000)) ]; then
    pass=$((pass + 1))
    printf 'ok   %6d ms  exit %s  %s\n' "$ms" "$rc" "${*:2}"
  else
    fail=$((fail + 1))
    printf 'FAILED: %s: exit %s after %s ms (expected %s within %s s)\n%s\n' "$*" "$rc" "$ms" "$codes" "$limit" "$(tail -5 <<<"$out")"
  fi
}

q=$src/scenarios/quickstart.yaml
big=$src/scenarios/llama3-70b-8xh100.yaml
on8k="--set cluster.nodes=1024 --set training.global_batch=16384 --set plan.tp=8 --set plan.pp=4 --set plan.dp=256"
# A search on 256 GPUs, its threads under the pids limit.
within 120 0 -- "$parasim" plan "$big" --set cluster.nodes=32 --set training.global_batch=256 --top 3 --resimulate 2
# check's advice bounded on 8,192 GPUs; simulate folded on 8,192 and on 65,536 GPUs.
within 30 0 -- "$parasim" check "$big" --set cluster.nodes=1024 --set training.global_batch=16384 --set plan.tp=1 --set plan.pp=1 --set plan.dp=8192
within 120 0 -- "$parasim" simulate "$big" $on8k
within 120 0 -- "$parasim" simulate "$big" --set cluster.nodes=8192 --set training.global_batch=16384 --set plan.tp=8 --set plan.pp=8 --set plan.dp=1024
# Past the limits: refused at once.
within 10 2 -- "$parasim" simulate "$big" --set cluster.nodes=8193
within 10 2 -- "$parasim" simulate "$q" --set model.layers=65537
# A trace of a large folded run, and a sweep.
within 240 0 -- "$parasim" simulate "$big" $on8k --trace "$work/t.json.gz"
within 120 0 -- "$parasim" sweep "$big" --vary plan.dp=1,2 --set plan.tp=8 --set plan.pp=1 --set training.global_batch=64
# A step past the simulator's op limit (Llama 3 70B on tp 8 with 8,192 micro-batches: 95
# million ops) is refused at its key before it takes the cgroup's memory.
within 60 2 -- "$parasim" simulate "$big" --set plan.dp=1 --set plan.tp=8 --set plan.pp=1 --set training.global_batch=8192
# CPU ranks: a run the host's memory (the cgroup's) holds, and one it does not, refused
# before any rank starts.
within 120 0 -- "$parasim" run "$q" --steps 2 --warmup 1
within 30 2 -- "$parasim" run "$q" --set cluster.nodes=64 --set plan.dp=128 --set training.global_batch=512 --steps 1
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
