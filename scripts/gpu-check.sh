#!/usr/bin/env bash
# The GPU checks of docs/validation.md, in phases that each fit one command of a lent GPU
# machine (under 8 minutes), the headline first:
#
#   1  backends, the CUDA kernel tests, and validate of scenarios/gpu-gpt-1b3.yaml (1.3B
#      GPT, one GPU) in bf16 (the headline: MFU, step and memory against the prediction)
#      and in tf32 (memory like for like)
#   2  calibrate (one rank per GPU, at most 2), validate bf16 again with the measured
#      profile, the GEMM benchmark
#   3  validate in fp16 (loss scaling), with full recompute and with the fused (flash)
#      attention, a tiny model run under
#      compute-sanitizer's memcheck; with 2 or more GPUs an 8-layer version under dp 2,
#      tp 2, tp 2 with sequence parallelism, and pp 2
#
# Each step runs under `timeout` with its own limit and fails softly (the phase goes on).
# A phase ends by its deadline: PARASIM_CHECK_DEADLINE (seconds since the epoch, for a
# command that built first), else PARASIM_CHECK_BUDGET seconds (default 420) after it
# starts; a step's limit is cut to what is left, and one with under 30 s left is skipped. The
# results of a phase are two files in OUT_DIR: summary-PHASE.txt (one line per step: exit
# code, seconds, command; then the prediction-against-measurement tables) and
# gpu-check-PHASE.tar.gz (every log and output; files over 4 MiB are left out and listed
# in the summary). Work files stay in PARASIM_CHECK_WORK (default /tmp/parasim-gpu-check),
# where phase 3 finds the profile phase 2 measured.
#
# Usage: scripts/gpu-check.sh PHASE BUILD_DIR [OUT_DIR]
#   PHASE: 1, 2, 3 or all; BUILD_DIR: a build with the CUDA backend (scripts/gpu-host.sh
#   build, or a release build); OUT_DIR: default $OUT, else gpu-check/
set -uo pipefail

phase=${1:?usage: scripts/gpu-check.sh PHASE BUILD_DIR [OUT_DIR]}
build=${2:?usage: scripts/gpu-check.sh PHASE BUILD_DIR [OUT_DIR]}
out=${3:-${OUT:-gpu-check}}
case "$phase" in
  1 | 2 | 3 | all) ;;
  *) echo "gpu-check: PHASE is 1, 2, 3 or all, not '$phase'" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$build" 2>/dev/null && pwd) || { echo "gpu-check: no build directory '$2'" >&2; exit 2; }
budget=${PARASIM_CHECK_BUDGET:-420}
base=${PARASIM_CHECK_WORK:-/tmp/parasim-gpu-check}
mkdir -p "$out" "$base"
out=$(cd "$out" && pwd)
parasim="$build/cli/parasim"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$name" in
  *H200*) device=h200 ;;
  *H100*) device=h100-sxm ;;
  *A100*) device=a100-80gb ;;
  *L40S*) device=l40s ;;
  *) device=${PARASIM_DEVICE:-h100-sxm} ;;
esac
scenario=$root/scenarios/gpu-gpt-1b3.yaml
sets=(--set cluster.device="$device")
multi=(--set cluster.gpus_per_node="$gpus" --set model.layers=8 --set training.global_batch=16)

run_phase() {
  local p=$1
  local work=$base/phase$p
  rm -rf "$work"
  mkdir -p "$work"
  local summary=$work/summary.txt
  local start deadline
  start=$(date +%s)
  deadline=${PARASIM_CHECK_DEADLINE:-$((start + budget))}
  note() { echo "$*" | tee -a "$summary"; }
  # step NAME LIMIT COMMAND...: the command under `timeout LIMIT`, its output in NAME.log.
  step() {
    local name=$1 limit=$2
    shift 2
    local left=$((deadline - $(date +%s)))
    if [ "$left" -lt 30 ]; then
      note "$name: skipped, $left s left before the phase's deadline: $*"
      return 0
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    local t0 rc
    t0=$(date +%s)
    timeout --kill-after=15 "$limit" "$@" >"$work/$name.log" 2>&1
    rc=$?
    local why=""
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why=" (past its $limit s limit)"
    note "$name: exit $rc$why in $(($(date +%s) - t0)) s: $*"
  }
  validate() {  # validate NAME LIMIT SETS...
    local name=$1 limit=$2
    shift 2
    step "$name" "$limit" "$parasim" validate "$scenario" "${sets[@]}" "$@" --out "$work/$name"
  }

  note "gpu-check phase $p: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' | tee -a "$summary"
  note "device preset: $device, $gpus GPU(s); build $build"
  case "$p" in
    1)
      step backends 60 "$parasim" backends
      step kernel-tests 180 env PARASIM_POISON_MEMORY=1 "$build/tests/cuda_kernel_tests"
      validate validate-bf16 240 --set training.precision=bf16
      validate validate-tf32 240
      ;;
    2)
      step calibrate 300 "$parasim" calibrate --backend cuda --device "$device" \
        --ranks "$([ "$gpus" -ge 2 ] && echo 2 || echo 1)" --out "$base/profile.yaml" --json "$work/calibrate.json"
      [ -s "$base/profile.yaml" ] && cp "$base/profile.yaml" "$work/"
      if [ -s "$base/profile.yaml" ]; then
        validate validate-bf16-profile 240 --set training.precision=bf16 --set hardware.profile="$base/profile.yaml"
      else
        note "validate-bf16-profile: skipped, calibrate wrote no profile"
      fi
      step gemm-bench 120 "$build/bench/parasim_gpu_gemm_bench" --device "$device"
      ;;
    3)
      validate validate-fp16 240 --set training.precision=fp16
      validate validate-recompute 240 --set training.precision=bf16 --set training.recompute=full
      validate validate-flash 240 --set training.precision=bf16 --set training.attention=flash
      # A tiny model under compute-sanitizer's memcheck: out-of-bounds and misaligned
      # accesses in the executor's kernels and copies.
      if command -v compute-sanitizer >/dev/null; then
        step sanitizer 180 compute-sanitizer --tool memcheck --error-exitcode 3 "$parasim" run "$scenario" "${sets[@]}" \
          --set model.layers=2 --set model.hidden=256 --set model.heads=4 --set model.vocab=512 \
          --set model.seq_len=64 --set training.global_batch=4 --set training.micro_batch=2 \
          --steps 2 --warmup 1 --json "$work/sanitizer.json"
      else
        note "sanitizer: skipped, no compute-sanitizer on the PATH"
      fi
      if [ "$gpus" -ge 2 ]; then
        validate validate-dp2 180 "${multi[@]}" --set plan.dp=2
        validate validate-tp2 180 "${multi[@]}" --set plan.tp=2
        validate validate-tp2-sp 180 "${multi[@]}" --set plan.tp=2 --set plan.sequence_parallel=true
        validate validate-pp2 180 "${multi[@]}" --set plan.pp=2
      else
        note "multi-GPU validations: skipped, $gpus GPU(s)"
      fi
      ;;
  esac

  # The comparison tables, from each validate's log.
  local log
  for log in "$work"/validate-*.log; do
    [ -f "$log" ] || continue
    note "--- $(basename "$log" .log)"
    sed -n '/prediction against measurement/,/^$/p' "$log" >>"$summary"
    grep -E '^(error|warning):' "$log" | head -5 >>"$summary"
  done
  # One tarball of everything small enough to travel.
  local big
  big=$(find "$work" -type f -size +4M)
  [ -n "$big" ] && note "left out of the tarball (over 4 MiB): $(echo $big | sed "s|$work/||g")"
  note "phase $p done in $(($(date +%s) - start)) s"
  tar -czf "$out/gpu-check-$p.tar.gz" -C "$work" --exclude-from=<(find "$work" -type f -size +4M -printf '%P\n') .
  cp "$summary" "$out/summary-$p.txt"
}

if [ "$phase" = all ]; then
  for p in 1 2 3; do run_phase "$p"; done
else
  run_phase "$phase"
fi
