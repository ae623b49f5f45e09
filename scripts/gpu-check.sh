#!/usr/bin/env bash
# Every GPU check of docs/validation.md in one run, for a GPU host: the CUDA kernel tests,
# the GEMM benchmark, a calibration, validate on one GPU (tf32, bf16, fp16, full
# recompute) and, with two or more GPUs, validate under dp, tp, pp and sequence
# parallelism. Logs and every output file go to OUT_DIR (default $OUT, else gpu-check/);
# the summary lines (one per check) to OUT_DIR/summary.txt.
#
# Usage: scripts/gpu-check.sh BUILD_DIR [OUT_DIR]
#   BUILD_DIR: a build with the CUDA backend (scripts/gpu-host.sh build, or a release build)
set -uo pipefail

build=${1:?usage: scripts/gpu-check.sh BUILD_DIR [OUT_DIR]}
out=${2:-${OUT:-gpu-check}}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
parasim="$build/cli/parasim"
summary="$out/summary.txt"
: >"$summary"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

note() { echo "$*" | tee -a "$summary"; }
# step NAME COMMAND...: runs it with its output in OUT_DIR/NAME.log; notes the exit code
# and wall time.
step() {
  local name=$1
  shift
  local t0 rc
  t0=$(date +%s)
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  note "$name: exit $rc in $(($(date +%s) - t0)) s: $*"
  return $rc
}

note "date: $(date -u +%Y-%m-%dT%H:%MZ)"
note "host: $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' | tee -a "$summary"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$name" in
  *H200*) device=h200 ;;
  *H100*) device=h100-sxm ;;
  *A100*) device=a100-80gb ;;
  *L40S*) device=l40s ;;
  *) device=${PARASIM_DEVICE:-h100-sxm} ;;
esac
note "device preset: $device, $gpus GPU(s)"

step backends "$parasim" backends
step kernel-tests "$build/tests/cuda_kernel_tests"
step gemm-bench "$build/bench/parasim_gpu_gemm_bench" --device "$device"
step calibrate "$parasim" calibrate --backend cuda --device "$device" --ranks "$([ "$gpus" -ge 2 ] && echo 2 || echo 1)" \
  --out "$out/profile.yaml" --json "$out/calibrate.json"
profile=$out/profile.yaml
[ -s "$profile" ] || profile=""
scenario=$root/scenarios/gpu-gpt-1b3.yaml
sets=(--set cluster.device="$device")
[ -n "$profile" ] && sets+=(--set hardware.profile="$(cd "$(dirname "$profile")" && pwd)/profile.yaml")

# One GPU, no mpirun: tf32 (like-for-like memory), bf16, fp16 (loss scaling), full recompute.
step validate-1gpu-tf32 "$parasim" validate "$scenario" "${sets[@]}" --out "$out/v-tf32"
step validate-1gpu-bf16 "$parasim" validate "$scenario" "${sets[@]}" --set training.precision=bf16 --out "$out/v-bf16"
step validate-1gpu-fp16 "$parasim" validate "$scenario" "${sets[@]}" --set training.precision=fp16 --out "$out/v-fp16"
step validate-1gpu-recompute "$parasim" validate "$scenario" "${sets[@]}" --set training.recompute=full --out "$out/v-recompute"

if [ "$gpus" -ge 2 ]; then
  multi=(--set cluster.gpus_per_node="$gpus" --set model.layers=8 --set training.global_batch=16)
  step validate-dp2 "$parasim" validate "$scenario" "${sets[@]}" "${multi[@]}" --set plan.dp=2 --out "$out/v-dp2"
  step validate-tp2 "$parasim" validate "$scenario" "${sets[@]}" "${multi[@]}" --set plan.tp=2 --out "$out/v-tp2"
  step validate-tp2-sp "$parasim" validate "$scenario" "${sets[@]}" "${multi[@]}" --set plan.tp=2 \
    --set plan.sequence_parallel=true --out "$out/v-tp2sp"
  step validate-pp2 "$parasim" validate "$scenario" "${sets[@]}" "${multi[@]}" --set plan.pp=2 --out "$out/v-pp2"
fi

# The comparison tables, side by side in the summary.
for d in "$out"/v-*; do
  [ -f "$d/comparison.json" ] || continue
  note "--- $(basename "$d")"
  sed -n '/prediction against measurement/,/^$/p' "$out/validate-1gpu-${d##*/v-}.log" "$out/validate-${d##*/v-}.log" 2>/dev/null | tee -a "$summary" >/dev/null
done
note "done"
