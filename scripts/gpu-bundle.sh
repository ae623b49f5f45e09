#!/usr/bin/env bash
# Builds here what the GPU check runs and packs it for a GPU host (docs/gpu.md): the
# CUDA-enabled parasim, cuda_kernel_tests and the GPU GEMM benchmark, stripped, with every
# shared library they need but glibc, libstdc++ / libgcc (the GPU host has its own, newer)
# and the large CUDA libraries (cuBLAS, cuBLASLt, NCCL: the host's own, found by env.sh),
# and a relocatable Open MPI runtime (components, help texts, orterun and orted, PMIx), in
# one .tar.xz of about 10 MB. On the GPU host:
#
#   tar -xJf .gpu/parasim-gpu.tar.xz -C /tmp && source /tmp/parasim-gpu/env.sh
#   parasim backends        # (scripts/gpu-check.sh does this, and falls back to a build)
#
# Usage: scripts/gpu-bundle.sh [--from BUILD_DIR] [--out FILE]
#   --from  pack an existing CUDA-enabled build (the release preset's, as the test does)
#           instead of configuring and building the `gpu` preset (build/gpu: Release, CUDA
#           on, GUI off) for the three targets
#   --out   default .gpu/parasim-gpu.tar.xz (.gpu/ is ignored by git; name it to travel)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
from=""
out=$root/.gpu/parasim-gpu.tar.xz
while [ $# -gt 0 ]; do
  case "$1" in
    --from) from=${2:?--from needs a build directory}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "gpu-bundle: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for tool in patchelf xz ldd strip; do
  command -v "$tool" >/dev/null || { echo "gpu-bundle: needs $tool (scripts/setup.sh installs it)" >&2; exit 2; }
done

if [ -z "$from" ]; then
  cd "$root"
  cmake --preset gpu >/dev/null
  cmake --build --preset gpu -j "$(nproc)" --target parasim cuda_kernel_tests parasim_gpu_gemm_bench
  from=$root/build/gpu
fi
from=$(cd "$from" && pwd)
grep -q '^PARASIM_WITH_CUDA:BOOL=ON' "$from/CMakeCache.txt" 2>/dev/null ||
  { echo "gpu-bundle: $from is not a build with the CUDA backend (PARASIM_WITH_CUDA)" >&2; exit 2; }
exes=("$from/cli/parasim" "$from/tests/cuda_kernel_tests" "$from/bench/parasim_gpu_gemm_bench")
for e in "${exes[@]}"; do
  [ -x "$e" ] || { echo "gpu-bundle: $e is missing: build it first" >&2; exit 2; }
done

arch=x86_64-linux-gnu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
B=$stage/parasim-gpu
mkdir -p "$B/bin" "$B/lib"
cp "${exes[@]}" "$B/bin/"
strip --strip-unneeded "$B"/bin/*

# What the loader must not take from the bundle: the C library family and the C++ runtime
# (the GPU host's are newer, and a mix fails), and the CUDA libraries the host brings.
skip='^(libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libstdc\+\+|libgcc_s|ld-linux|linux-vdso|libcuda\.so|libcublas|libcublasLt|libnccl)'
copy_needed() {  # every library ldd resolves for the given files, but those above
  for f in "$@"; do ldd "$f" 2>/dev/null || true; done | awk '/=>/ && $3 ~ /^\//{print $1, $3}' | sort -u |
    while read -r name path; do
      [[ $name =~ $skip ]] && continue
      [ -e "$B/lib/$name" ] || cp -L "$path" "$B/lib/$name"
    done
}
copy_needed "$B"/bin/*

# Open MPI's runtime, laid out as Debian installs it under /usr, so that
# OPAL_PREFIX=<bundle>/ompi/usr relocates it. Components needing libraries a GPU host
# lacks (UCX, OFI, PSM, verbs, hcoll) are left out: one node, shared memory and TCP.
O=$B/ompi/usr
mkdir -p "$O/lib/$arch/openmpi/lib" "$O/share" "$O/bin" "$O/etc"
cp -a /usr/lib/$arch/openmpi/lib/openmpi3 "$O/lib/$arch/openmpi/lib/"
for c in sshmem_ucx pml_ucx osc_ucx spml_ucx atomic_ucx btl_openib btl_uct mtl_ofi btl_ofi mtl_psm mtl_psm2 \
  btl_usnic coll_hcoll coll_fca common_ucx common_ofi common_verbs common_verbs_usnic pmix_s1 pmix_s2; do
  rm -f "$O/lib/$arch/openmpi/lib/openmpi3/mca_$c.so"
done
cp -a /usr/share/openmpi "$O/share/"
[ -d /etc/openmpi ] && cp -a /etc/openmpi "$O/etc/"
cp /usr/bin/orted /usr/bin/orterun "$O/bin/"
ln -s orterun "$O/bin/mpirun"
ln -s orterun "$O/bin/mpiexec"
cp -a /usr/lib/$arch/pmix2 "$O/lib/$arch/"
rm -rf "$O/lib/$arch/pmix2/include" "$O/lib/$arch/pmix2/lib/libpmix.a"
copy_needed "$O"/lib/$arch/openmpi/lib/openmpi3/*.so "$O"/lib/$arch/pmix2/lib/pmix/*.so "$O/bin/orted" "$O/bin/orterun"
patchelf --set-rpath '$ORIGIN/../lib' "$B"/bin/*
patchelf --set-rpath '$ORIGIN/../../../lib' "$O/bin/orted" "$O/bin/orterun"

cat >"$B/env.sh" <<'ENV'
# Source this: the bundle's programs and libraries, its Open MPI (OPAL_PREFIX), and the
# host's CUDA libraries (cuBLAS, cuBLASLt, NCCL; the CUDA runtime if the bundle lacks it),
# wherever they are: /usr/local/cuda, the system's library folders, or PyTorch's wheels.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$here/ompi/usr
export PMIX_MCA_mca_base_component_path=$here/ompi/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export PATH=$here/bin:$here/ompi/usr/bin:$PATH
parasim_cuda_dirs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
  /usr/lib/x86_64-linux-gnu /usr/local/nccl/lib ${NCCL_HOME:+$NCCL_HOME/lib} \
  $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | tr ' ' '\n' |
    sed 's|$|/nvidia|' | while read -r n; do [ -d "$n" ] && ls -d "$n"/*/lib 2>/dev/null; done); do
  for lib in libcublasLt.so.13 libcublas.so.13 libnccl.so.2 libcudart.so.13; do
    if [ -e "$d/$lib" ]; then
      case ":$parasim_cuda_dirs:" in *":$d:"*) ;; *) parasim_cuda_dirs=$parasim_cuda_dirs:$d ;; esac
    fi
  done
done
export LD_LIBRARY_PATH=$here/lib${parasim_cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset parasim_cuda_dirs
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader,tcp OPENBLAS_NUM_THREADS=1
ENV

{
  echo "parasim GPU bundle"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), from $from"
  echo "cuda architectures: $(grep -o 'sm_[0-9]*' "$from/build.ninja" 2>/dev/null | sort -u | tr '\n' ' ')"
  echo "glibc: $(ldd --version | head -1)"
} >"$B/MANIFEST"

mkdir -p "$(dirname "$out")"
XZ_OPT=${XZ_OPT:--T0} tar -C "$stage" -cJf "$out.tmp" parasim-gpu
mv "$out.tmp" "$out"
echo "gpu-bundle: $out ($(du -h "$out" | cut -f1); $(du -sh "$B" | cut -f1) unpacked)"
