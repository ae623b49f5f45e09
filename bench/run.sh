#!/usr/bin/env bash
# Runs the simulator benchmark at each size (one process per size) and prints one JSON
# line per size. Usage: bench/run.sh [BUILD_DIR] [SIZES...]
set -euo pipefail
build=${1:-build/release}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64 256 1024 4096 16384)
for n in "${sizes[@]}"; do
  "$build/bench/parasim_sim_bench" --gpus "$n" --json
done
