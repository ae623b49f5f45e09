#!/usr/bin/env bash
# A rank stopped (SIGSTOP) or killed (SIGKILL) in each phase of a run: launch (before its
# first heartbeat), start-up (MPI), clock alignment, a step, between steps, the final gather. Every time, the job must end,
# every rank and the launcher, within the stall timeout + 5 s, with exit 1 and a message
# naming the rank that stopped or died and the phase.
# Usage: stopped_rank_test.sh PARASIM SOURCE_DIR [TRIALS] [SIGNALS]
# (SIGNALS: "STOP KILL" by default; docs/reliability.md records a run of 50 trials per
# phase).
set -u
parasim=$1
src=$2
trials=${3:-1}
signals=${4:-STOP KILL}
stall=3
q=$src/scenarios/quickstart.yaml
pass=0
fail=0
# Each job's command line carries this file's name, so that only this test's processes are
# looked for (and killed) as leftovers, never another suite's `parasim run`.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
marker=$work/stopped-rank-$$.json
for trial in $(seq "$trials"); do
  for signal in $signals; do
    for rank in 0 1; do
      for phase in "launch" "start-up" "clock alignment" "step:2" "between steps:2" "final gather"; do
        start=$(date +%s%N)
        out=$(PARASIM_STOP="$rank:$phase" PARASIM_STOP_SIGNAL=$signal timeout 60 "$parasim" run "$q" --steps 4 --warmup 1 --stall-timeout $stall --json="$marker" 2>&1)
        rc=$?
        ms=$((($(date +%s%N) - start) / 1000000))
        name=${phase%%:*}
        said="stopped responding in $name"
        [ "$signal" = KILL ] && said="ended in $name"
        # No heartbeat yet: "never started" (stopped), or "ended before its first heartbeat"
        # (killed; also "never started" where the launcher's look comes before mpirun's).
        [ "$name" = launch ] && said="(never started|ended before its first heartbeat)"
        leftover=$(pgrep -f "$marker" || true)
        if [ "$rc" -eq 1 ] && grep -Eq "rank $rank $said" <<<"$out" &&
          [ "$ms" -lt $(((stall + 5) * 1000)) ] && [ -z "$leftover" ]; then
          pass=$((pass + 1))
        else
          fail=$((fail + 1))
          printf 'FAILED: rank %s SIG%s in %s (trial %s): exit %s after %s ms, leftover [%s]\n%s\n' \
            "$rank" "$signal" "$phase" "$trial" "$rc" "$ms" "$leftover" "$(tail -5 <<<"$out")"
          [ -n "$leftover" ] && kill -9 $leftover 2>/dev/null
        fi
      done
    done
  done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
