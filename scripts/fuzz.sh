#!/usr/bin/env bash
# Fuzzes scenario loading, checking, the memory model and the simulator with libFuzzer
# under AddressSanitizer and UndefinedBehaviorSanitizer (docs/reliability.md).
#   scripts/fuzz.sh [SECONDS]     default 60; CI runs it for a fixed time
# Installs clang if missing, builds the libFuzzer target of the asan preset (build/asan,
# the build whose whole suite also runs under the sanitizers), seeds the corpus from
# scenarios/ and tests/data/fuzz, and stops at the first crash, timeout or memory blow-up:
# the input is saved under build/asan/fuzz-findings/ (add it to tests/data/fuzz once
# fixed, so every test run replays it). Environment: PARASIM_NO_INSTALL=1 skips the
# package step.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-60}

if [ "${PARASIM_NO_INSTALL:-0}" != 1 ] && ! command -v clang++ >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang
fi

cmake --preset asan >/dev/null
cmake --build --preset fuzz -j "$(nproc 2>/dev/null || echo 2)"

work=build/asan
corpus=$work/fuzz-corpus
findings=$work/fuzz-findings
mkdir -p "$corpus" "$findings"
cp -n scenarios/*.yaml tests/data/fuzz/* "$corpus"/ 2>/dev/null || true

# Per input: 60 s and 2 GiB at most (the seed scenarios simulate in up to 20 s under ASan on
# 2 cores: GPT-3 13B with tp overlap on 16 GPUs); a larger input than 16 KiB is not generated.
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$work/fuzz/parasim_fuzz" "$corpus" -dict=fuzz/scenario.dict -max_total_time="$seconds" -timeout=60 \
  -rss_limit_mb=2048 -max_len=16384 -artifact_prefix="$findings/" -print_final_stats=1 2>&1 | tail -25
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "fuzz: found a failing input (exit $status): $(ls "$findings")" >&2
  exit 1
fi
echo "fuzz: no crash, hang or runaway in $seconds s"
