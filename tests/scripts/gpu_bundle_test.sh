#!/usr/bin/env bash
# scripts/gpu-bundle.sh packs this build, and the bundle runs on its own: unpacked into a
# fresh folder, with only its env.sh's paths, every library its programs load resolves into
# the bundle or is one the GPU host brings (glibc, libstdc++ / libgcc, cuBLAS / cuBLASLt /
# NCCL); `parasim backends` answers, a one-rank CPU run trains without mpirun, and a two-rank
# run goes through the bundle's own mpirun and Open MPI (OPAL_PREFIX inside the bundle).
# Usage: gpu_bundle_test.sh BUILD_DIR SOURCE_DIR (a build with the CUDA backend and MPI).
set -u
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }

if ! "$src/scripts/gpu-bundle.sh" --from "$build" --out "$work/b.tar.xz" >"$work/bundle.log" 2>&1; then
  cat "$work/bundle.log"
  echo "FAILED: gpu-bundle.sh"
  exit 1
fi
size=$(stat -c %s "$work/b.tar.xz")
# About 10 MB packed: well inside the 64 MiB a GPU host's trip carries.
if [ "$size" -gt 1000000 ] && [ "$size" -lt 40000000 ]; then ok; else bad "bundle of $size bytes"; fi
mkdir "$work/x"
tar -xJf "$work/b.tar.xz" -C "$work/x" || { echo "FAILED: unpacking"; exit 1; }
B=$work/x/parasim-gpu
for f in bin/parasim bin/cuda_kernel_tests bin/parasim_gpu_gemm_bench env.sh MANIFEST ompi/usr/bin/orted ompi/usr/bin/mpirun; do
  if [ -e "$B/$f" ]; then ok; else bad "$f missing from the bundle"; fi
done

# A clean environment: nothing of this shell's library path, Open MPI settings or PATH
# beyond the system's, then the bundle's env.sh.
run_bundled() {
  env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="${TMPDIR:-/tmp}" bash -c 'source "$1/env.sh"; shift; "$@"' _ "$B" "$@"
}

# Every library resolves, into the bundle or onto what the GPU host brings.
host_libs='^(libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libstdc\+\+\.so|libgcc_s\.so|ld-linux|linux-vdso|libcuda\.so|libcublas\.so|libcublasLt\.so|libnccl\.so)'
for f in "$B"/bin/parasim "$B"/bin/cuda_kernel_tests "$B"/bin/parasim_gpu_gemm_bench "$B"/ompi/usr/bin/orted \
  "$B"/ompi/usr/bin/orterun "$B"/ompi/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so; do
  out=$(run_bundled ldd "$f")
  stray=$(awk '/=>/ {print $1, $3}' <<<"$out" | while read -r name path; do
    case "$path" in "$B"/*) continue ;; esac
    [[ $name =~ $host_libs ]] && continue
    echo "$name => $path"
  done)
  if [ -z "$stray" ]; then ok; else bad "$(basename "$f") loads from outside the bundle: $stray"; fi
  if grep -q "not found" <<<"$out"; then bad "$(basename "$f"): $(grep 'not found' <<<"$out" | head -3)"; else ok; fi
done

expect_run() {  # expect_run PATTERN COMMAND...: exit 0 and PATTERN in the output
  local pattern=$1
  shift
  local out rc
  out=$(run_bundled "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ] && grep -Eq -- "$pattern" <<<"$out"; then ok; else bad "$* (exit $rc): $(tail -15 <<<"$out")"; fi
}
q=$src/scenarios/quickstart.yaml
expect_run '^cpu +yes +yes' parasim backends
expect_run "$B/ompi/usr/bin/mpirun" bash -c 'command -v mpirun'
expect_run 'loss +[0-9.]+ -> [0-9.]+' parasim run "$q" --set plan.dp=1 --steps 1 --warmup 0
expect_run 'peak memory +0: .*, 1: ' parasim run "$q" --steps 1 --warmup 0
# The check's kernel tests exit 77 here (no GPU), as ctest's skip.
out=$(run_bundled cuda_kernel_tests 2>&1)
rc=$?
if [ "$rc" -eq 77 ] || [ "$rc" -eq 0 ]; then ok; else bad "cuda_kernel_tests exit $rc: $(tail -5 <<<"$out")"; fi

echo "gpu bundle: $pass passed, $fail failed ($(du -h "$work/b.tar.xz" | cut -f1) packed)"
[ "$fail" -eq 0 ]
