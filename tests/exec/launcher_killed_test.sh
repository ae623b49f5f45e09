#!/usr/bin/env bash
# The launcher (parasim itself) SIGKILLed in the middle of a run: mpirun is told to end
# (PR_SET_PDEATHSIG) and ends its ranks; with mpirun killed too, the ranks notice their
# launcher is gone and end themselves. Within 5 s nothing of the job runs, and the next
# launch removes the job folder the killed one left (docs/reliability.md).
# Usage: launcher_killed_test.sh PARASIM SOURCE_DIR
set -u
parasim=$1
src=$2
q=$src/scenarios/quickstart.yaml
work=$(mktemp -d)
export TMPDIR=$work
pass=0
fail=0
cleanup() {
  pkill -9 -f "$work/marker" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# Starts a long run (its command line carries a marker to find its processes by) and
# waits until both its ranks beat in its own job folder; prints the launcher's pid.
start_run() {
  "$parasim" run "$q" --steps 100000 --warmup 1 --json="$work/marker-$1.json" >"$work/log-$1" 2>&1 &
  local pid=$! i d
  for i in $(seq 300); do
    for d in "$work"/parasim-job-*; do
      if [ "$(cut -d' ' -f1 "$d/launcher" 2>/dev/null)" = "$pid" ] && [ -e "$d/rank-0" ] && [ -e "$d/rank-1" ]; then
        echo "$pid"
        return
      fi
    done
    sleep 0.1
  done
  echo "start_run: no heartbeat of both ranks in 30 s: $(cat "$work/log-$1")" >&2
  echo "$pid"
}

# ends_within SECONDS WHAT: no process of the job may be left after SECONDS.
ends_within() {
  local i
  for i in $(seq $(($1 * 10))); do
    if ! pgrep -f "$work/marker" >/dev/null; then
      pass=$((pass + 1))
      return
    fi
    sleep 0.1
  done
  fail=$((fail + 1))
  echo "FAILED: $2: left running after $1 s:"
  pgrep -af "$work/marker"
  pkill -9 -f "$work/marker"
}

# 1. The launcher alone: mpirun gets SIGTERM from the kernel and ends the ranks.
pid=$(start_run a)
kill -9 "$pid"
ends_within 5 "parasim killed"

# 2. The launcher and mpirun: the ranks see their launcher gone.
pid=$(start_run b)
mpirun_pid=$(pgrep -P "$pid" mpirun)
kill -9 "$pid" $mpirun_pid
ends_within 5 "parasim and mpirun killed"

# 3. The folders the killed launchers left go at the next launch; a folder that is not a
# job's, or whose launcher still runs, stays.
stale=$(compgen -G "$work/parasim-job-*" | wc -l)  # run b's (run b's launch removed run a's)
mkdir "$work/parasim-job-other" && echo x >"$work/parasim-job-other/notes"
echo "4194305 1" >"$work/parasim-job-other/launcher"  # no such pid (past pid_max)
mkdir "$work/parasim-job-live" && cut -d' ' -f1,22 /proc/$$/stat >"$work/parasim-job-live/launcher"
"$parasim" run "$q" --steps 1 --warmup 0 >/dev/null 2>&1
left=$(compgen -G "$work/parasim-job-*" | sort | tr '\n' ' ')
if [ -n "$mpirun_pid" ] && [ "$stale" -eq 1 ] && [ "$left" = "$work/parasim-job-live $work/parasim-job-other " ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAILED: stale job folders ($stale before) not removed, or others removed; left: $left"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
