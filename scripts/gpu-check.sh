#!/usr/bin/env bash
# The whole GPU check in ONE command with one deadline, the headline first (docs/gpu.md):
#
#   facts        the GPU, driver, glibc, where cuBLAS / NCCL live, compute-sanitizer
#   binaries     the bundle (.gpu/parasim-gpu.tar.xz, scripts/gpu-bundle.sh) unpacked and
#                loaded; if it does not load, a build from the carried .deps
#                (scripts/gpu-host.sh) inside the same deadline
#   backends     `parasim backends`
#   headline     validate scenarios/gpu-gpt-1b3.yaml in bf16: prediction against
#                measurement, MFU from the measured FLOPs; its comparison.json to OUT at once
#   kernels      cuda_kernel_tests (every kernel against the host's, the tensor-core attention
#                against its host model, FP8 GEMMs, a training run against the CPU executor)
#   calibrate    calibrate --backend cuda --quick; profile.yaml to OUT
#   profile      validate bf16 again on the measured profile
#   flash        validate bf16 with the fused attention (tensor cores)
#   sanitizer    a 2-layer model's run under compute-sanitizer's memcheck
#   gemm-bench   the GEMM benchmark
#
# Every step runs under `timeout` with its own limit, cut to what is left before the
# deadline (PARASIM_CHECK_DEADLINE, seconds since the epoch, else PARASIM_CHECK_BUDGET
# seconds from the start, default 480); a step with under 20 s left is skipped. A failing
# step is noted and the check goes on. OUT receives at most 4 files, written as the check
# goes (what a killed command leaves still tells): summary.txt (the facts, a line per step,
# the comparison tables), comparison.json (the headline), profile.yaml (the calibration),
# results.tar.gz (every log and output under 4 MiB, refreshed after each step).
#
# Usage: scripts/gpu-check.sh [--dry-run] [--build DIR] [--bundle FILE] [OUT]
#   --dry-run  the same orchestration on the CPU backend with the CPU build (default
#              build/release) and a small model: what CI runs to prove the script, its
#              deadline logic and its files
#   --build    use this CUDA-enabled build instead of the bundle
#   --bundle   default .gpu/parasim-gpu.tar.xz
#   OUT        default $OUT, else gpu-check-out/
# Exit status: 0 when every step that ran passed (or was skipped), 1 otherwise, 2 on bad usage.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dry=0
build=""
bundle=$root/.gpu/parasim-gpu.tar.xz
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --bundle) bundle=${2:?--bundle needs a file}; shift 2 ;;
    -h | --help) sed -n '2,37p' "$0"; exit 0 ;;
    -*) echo "gpu-check: unknown option '$1'" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "gpu-check: one OUT folder, not '$1' too" >&2; exit 2; }; out=$1; shift ;;
  esac
done
out=${out:-${OUT:-gpu-check-out}}
start=$(date +%s)
deadline=${PARASIM_CHECK_DEADLINE:-$((start + ${PARASIM_CHECK_BUDGET:-480}))}
min_step=20
work=${PARASIM_CHECK_WORK:-$(mktemp -d /tmp/parasim-gpu-check.XXXXXX)}
mkdir -p "$out" "$work/results" || { echo "gpu-check: cannot make $out or $work" >&2; exit 2; }
out=$(cd "$out" && pwd)
res=$work/results
summary=$out/summary.txt
: >"$summary"
failed=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

note() { echo "$*" | tee -a "$summary"; }
left() { echo $((deadline - $(date +%s))); }
# Everything under 4 MiB in the results folder, as one tarball in OUT (replaced whole).
pack() {
  tar -czf "$out/results.tar.gz.tmp" -C "$res" --exclude-from=<(find "$res" -type f -size +4M -printf '%P\n') . 2>/dev/null &&
    mv "$out/results.tar.gz.tmp" "$out/results.tar.gz"
}
# step NAME LIMIT COMMAND...: the command under `timeout`, its output in NAME.log.
# Sets step_rc (77: skipped, as ctest's convention, by the step or for want of time).
step() {
  local name=$1 limit=$2
  shift 2
  local t0 remaining why=""
  remaining=$(left)
  if [ "$remaining" -lt "$min_step" ]; then
    note "$name: skipped, $remaining s left before the deadline"
    step_rc=77
    return
  fi
  [ "$remaining" -lt "$limit" ] && limit=$remaining
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$res/$name.log" 2>&1
  step_rc=$?
  case $step_rc in
    0) why="ok" ;;
    77) why="skipped by the step (exit 77)" ;;
    124 | 137) why="FAILED: past its $limit s limit"; failed=1 ;;
    *) why="FAILED: exit $step_rc"; failed=1 ;;
  esac
  note "$name: $why in $(($(date +%s) - t0)) s: $*"
  [ "$step_rc" -eq 0 ] || [ "$step_rc" -eq 77 ] || tail -5 "$res/$name.log" | sed 's/^/    /' >>"$summary"
  pack
}

note "gpu-check$([ $dry = 1 ] && echo ' --dry-run'): $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), deadline in $(left) s"

# --- facts ------------------------------------------------------------------------------------
{
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)"
  echo "gpus: $(nvidia-smi -L 2>/dev/null | wc -l), cuda (driver): $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"
  echo "glibc: $(ldd --version 2>/dev/null | head -1)"
  echo "cores: $(nproc), memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  for lib in libcublasLt.so.13 libcublas.so.13 libnccl.so.2 libcudart.so.13; do
    echo "$lib: $( (ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF}'; \
      find /usr/local/cuda/ /usr/lib/x86_64-linux-gnu /usr/local/lib/python3*/ /usr/lib/python3/ -name "$lib" 2>/dev/null) | sort -u | head -3 | tr '\n' ' ')"
  done
  echo "nvcc: $(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) $(nvcc --version 2>/dev/null | tail -1)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo none)"
  echo "dpkg: $(command -v dpkg || echo none), zlib.h: $(ls /usr/include/zlib.h 2>/dev/null || echo none), python: $(python3 --version 2>&1)"
} >"$res/facts.txt" 2>&1
sed 's/^/  /' "$res/facts.txt" >>"$summary"
pack

# --- binaries ------------------------------------------------------------------------------------
# bin_of NAME: the program, from the build or the bundle's bin.
bindir=""
bin_of() {
  case "$1" in
    parasim) echo "$bindir/cli/parasim" ;;
    cuda_kernel_tests) echo "$bindir/tests/cuda_kernel_tests" ;;
    parasim_gpu_gemm_bench) echo "$bindir/bench/parasim_gpu_gemm_bench" ;;
  esac
}
if [ $dry = 1 ] && [ -z "$build" ]; then build=$root/build/release; fi
if [ -n "$build" ]; then
  bindir=$(cd "$build" 2>/dev/null && pwd) || { note "binaries: no build folder '$build'"; exit 2; }
else
  loaded=0
  if [ -s "$bundle" ]; then
    mkdir -p "$work/bundle"
    step unpack 60 tar -xJf "$bundle" -C "$work/bundle"
    if [ "$step_rc" -eq 0 ]; then
      # shellcheck disable=SC1091
      source "$work/bundle/parasim-gpu/env.sh"
      step load 30 parasim --version
      [ "$step_rc" -eq 0 ] && loaded=1
      sed 's/^/  /' "$work/bundle/parasim-gpu/MANIFEST" >>"$summary"
      ldd "$work/bundle/parasim-gpu/bin/parasim" >"$res/ldd.txt" 2>&1
    fi
  else
    note "binaries: no bundle at $bundle"
  fi
  if [ $loaded = 1 ]; then
    bin_of() { echo "$work/bundle/parasim-gpu/bin/$1"; }
  elif ls "$root"/.deps/*.deb >/dev/null 2>&1; then
    note "binaries: building from .deps instead"
    step build 300 env PARASIM_DEPS="$work/deps" \
      PARASIM_BUILD_TARGETS="parasim cuda_kernel_tests parasim_gpu_gemm_bench" "$root/scripts/gpu-host.sh" build "$work/build"
    [ "$step_rc" -eq 0 ] || { note "gpu-check: no binaries, stopping"; pack; exit 1; }
    eval "$(PARASIM_DEPS="$work/deps" "$root/scripts/gpu-host.sh" env)"
    bindir=$work/build
  else
    note "gpu-check: the bundle does not load and no .deps came to build from; stopping"
    pack
    exit 1
  fi
fi
parasim=$(bin_of parasim)

# --- the checks ----------------------------------------------------------------------------------
scenario=$root/scenarios/gpu-gpt-1b3.yaml
if [ $dry = 1 ]; then
  backend=cpu
  # A model the CPU runs in seconds, on the same scenario file and the same steps.
  sets=(--set cluster=cpu-host --set run.backend=cpu --set model.layers=2 --set model.hidden=128 --set model.heads=4
    --set model.vocab=512 --set model.seq_len=64 --set training.global_batch=8 --set training.micro_batch=4)
  run_steps=(--steps 2 --warmup 1)
  device=cpu-core
  calibrate_args=(--backend cpu --ranks 1 --max-size 64KiB)
else
  backend=cuda
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$name" in
    *H200*) device=h200 ;;
    *H100*) device=h100-sxm ;;
    *A100*) device=a100-80gb ;;
    *L40S*) device=l40s ;;
    *) device=${PARASIM_DEVICE:-h100-sxm} ;;
  esac
  sets=(--set cluster.device="$device")
  run_steps=(--steps 6 --warmup 2)
  calibrate_args=(--backend cuda --ranks 1)
fi
note "device preset: $device, backend $backend, binaries: $parasim"

validate() {  # validate NAME LIMIT SETS...: one validate, its folder under the results
  local name=$1 limit=$2
  shift 2
  step "$name" "$limit" "$parasim" validate "$scenario" --backend "$backend" "${sets[@]}" "$@" "${run_steps[@]}" \
    --out "$res/$name"
  # The comparison table and the measured throughput, from its log.
  {
    sed -n '/prediction against measurement/,/^$/p' "$res/$name.log"
    grep -E '^(achieved|step time .* median|peak memory|kernels|warning|error)' "$res/$name.log" | head -8
  } | sed 's/^/    /' >>"$summary"
}
# MFU of the headline run: the measured model FLOPs per second over the device's dense
# peak in the precision, both from the comparison (measured tflops_per_device, the
# prediction's peak) where they are there.
mfu_line() {
  local json=$1
  [ -s "$json" ] || return
  local measured predicted
  measured=$(grep -A6 '"id": "mfu"' "$json" | sed -n 's/.*"measured": \([0-9.eE+-]*\).*/\1/p' | head -1)
  predicted=$(grep -A6 '"id": "mfu"' "$json" | sed -n 's/.*"predicted": \([0-9.eE+-]*\).*/\1/p' | head -1)
  [ -n "$measured" ] && note "headline MFU: measured $(awk -v m="$measured" 'BEGIN {printf "%.1f %%", 100 * m}'), predicted $(awk -v p="$predicted" 'BEGIN {printf "%.1f %%", 100 * p}')"
}

step backends 30 "$parasim" backends
sed 's/^/    /' "$res/backends.log" >>"$summary"

validate headline 240 --set training.precision=bf16
if [ -s "$res/headline/comparison.json" ]; then
  cp "$res/headline/comparison.json" "$out/comparison.json"
  mfu_line "$out/comparison.json"
fi

kernel_tests=$(bin_of cuda_kernel_tests)
if [ -x "$kernel_tests" ]; then
  step kernel-tests 180 env PARASIM_POISON_MEMORY=1 "$kernel_tests"
  grep -E "^(test cases|All tests|no usable GPU)" "$res/kernel-tests.log" | sed 's/^/    /' >>"$summary"
else
  note "kernel-tests: skipped, not built ($kernel_tests)"
fi

step calibrate 180 "$parasim" calibrate "${calibrate_args[@]}" --device "$device" --quick --out "$res/profile.yaml" \
  --json "$res/calibrate.json"
if [ -s "$res/profile.yaml" ]; then
  cp "$res/profile.yaml" "$out/profile.yaml"
  validate profile 180 --set training.precision=bf16 --set hardware.profile="$res/profile.yaml"
else
  note "profile: skipped, calibrate wrote no profile"
fi

validate flash 180 --set training.precision=bf16 --set training.attention=flash

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ $dry = 0 ] && [ -n "$sanitizer" ]; then
  step sanitizer 150 "$sanitizer" --tool memcheck --error-exitcode 3 "$parasim" run "$scenario" "${sets[@]}" \
    --set model.layers=2 --set model.hidden=256 --set model.heads=4 --set model.vocab=512 --set model.seq_len=64 \
    --set training.global_batch=4 --set training.micro_batch=2 --set training.precision=bf16 \
    --set training.attention=flash --steps 2 --warmup 1
  grep -E "ERROR SUMMARY" "$res/sanitizer.log" | sed 's/^/    /' >>"$summary"
else
  note "sanitizer: skipped, $([ $dry = 1 ] && echo 'a dry run' || echo 'no compute-sanitizer')"
fi

bench=$(bin_of parasim_gpu_gemm_bench)
if [ -x "$bench" ]; then
  step gemm-bench 90 "$bench" --device "$device"
  grep -E "GEMM|TFLOP" "$res/gemm-bench.log" | head -12 | sed 's/^/    /' >>"$summary"
else
  note "gemm-bench: skipped, not built ($bench)"
fi

big=$(find "$res" -type f -size +4M -printf '%P ')
[ -n "$big" ] && note "left out of results.tar.gz (over 4 MiB): $big"
note "gpu-check done in $(($(date +%s) - start)) s$([ $failed = 1 ] && echo ', with failures' || echo ', every step passed or was skipped')"
pack
[ -n "${PARASIM_CHECK_WORK:-}" ] || rm -rf "$work"
exit $failed
