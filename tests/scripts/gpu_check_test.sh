#!/usr/bin/env bash
# scripts/gpu-check.sh --dry-run: the GPU check's orchestration on the CPU backend, so that
# every commit proves what the one command on a lent GPU host will do. With its default
# deadline every step runs (or is skipped by itself: no GPU, no compute-sanitizer) and
# passes; OUT holds at most 4 plain files, the summary first among them, the headline
# comparison, the profile and the results' tarball with every step's log. With a deadline
# shorter than the 20 s a step needs, every step is skipped, named as such, and the
# command still ends within its deadline and leaves its files.
# Usage: gpu_check_test.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then ok; else bad "$what"; fi
}

# --- the whole check, dry -----------------------------------------------------------------------
out=$work/out
t0=$(date +%s)
"$src/scripts/gpu-check.sh" --dry-run --build "$build" "$out" >"$work/full.log" 2>&1
rc=$?
check "the dry run passes (exit $rc): $(tail -20 "$work/full.log")" test "$rc" -eq 0
files=$(find "$out" -mindepth 1 | wc -l)
check "OUT holds at most 4 entries, not $files: $(ls -R "$out")" test "$files" -le 4
check "OUT holds plain files only" test -z "$(find "$out" -mindepth 1 ! -type f)"
for f in summary.txt comparison.json profile.yaml results.tar.gz; do
  check "$f in OUT" test -s "$out/$f"
done
check "the summary opens with the check's line" grep -q '^gpu-check --dry-run: ' <(head -1 "$out/summary.txt")
# The headline first: its line and table come before the other steps'.
first=$(grep -nE '^(headline|kernel-tests|calibrate|profile|flash):' "$out/summary.txt" | head -1 | cut -d: -f2)
check "the headline is the first check after backends (got '$first')" test "$first" = headline
check "the headline's comparison table is in the summary" grep -q "prediction against measurement" "$out/summary.txt"
check "the headline comparison is validate's" grep -q '"schema": "parasim.comparison/' "$out/comparison.json"
check "the profile is calibrate's" grep -q '^device: cpu-core' "$out/profile.yaml"
for s in backends headline kernel-tests calibrate profile flash; do
  check "step $s passed or skipped itself" grep -Eq "^$s: (ok|skipped by the step|skipped, not built)" "$out/summary.txt"
done
check "the sanitizer is skipped on a dry run" grep -q '^sanitizer: skipped, a dry run' "$out/summary.txt"
tar -tzf "$out/results.tar.gz" >"$work/listing" || bad "results.tar.gz does not list"
for f in facts.txt backends.log headline.log calibrate.log headline/comparison.json flash/comparison.json; do
  check "$f in results.tar.gz" grep -q "^\./$f$" "$work/listing"
done
depth=$(awk -F/ '{print NF - 1}' "$work/listing" | sort -n | tail -1)
check "results.tar.gz at most 2 folders deep (got $depth)" test "$depth" -le 3
check "nothing in results.tar.gz over 4 MiB" test -z "$(tar -tvzf "$out/results.tar.gz" | awk '$3 > 4194304')"
full=$(($(date +%s) - t0))

# --- a deadline too short for all of it ------------------------------------------------------------
short=$work/short
t0=$(date +%s)
PARASIM_CHECK_BUDGET=15 "$src/scripts/gpu-check.sh" --dry-run --build "$build" "$short" >"$work/short.log" 2>&1
rc=$?
took=$(($(date +%s) - t0))
check "a short deadline still exits 0 (got $rc): $(tail -20 "$work/short.log")" test "$rc" -eq 0
check "a 15 s deadline ends within 15 s (took $took)" test "$took" -le 15
check "the headline is skipped for want of time" grep -q '^headline: skipped, [0-9-]* s left before the deadline' "$short/summary.txt"
check "steps past the deadline are skipped and say so" grep -q 'skipped, [0-9-]* s left before the deadline' "$short/summary.txt"
check "the short run leaves its summary and tarball" test -s "$short/summary.txt" -a -s "$short/results.tar.gz"
check "the short run says it is done" grep -q '^gpu-check done in ' "$short/summary.txt"

# --- bad usage ------------------------------------------------------------------------------------------
"$src/scripts/gpu-check.sh" --bogus >"$work/bad.log" 2>&1
check "an unknown option exits 2" test $? -eq 2
"$src/scripts/gpu-check.sh" --dry-run --build "$work/none" "$work/o3" >"$work/bad2.log" 2>&1
check "a missing build folder exits 2" test $? -eq 2

echo "gpu-check dry run: $pass passed, $fail failed (whole check $full s)"
[ "$fail" -eq 0 ]
