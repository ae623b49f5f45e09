#!/usr/bin/env bash
# Building parasim on a GPU host that has CUDA (nvcc, cuBLAS, NCCL), CMake and a compiler
# but none of the Debian build dependencies and no network (docs/gpu.md):
#
#   scripts/gpu-host.sh fetch        on a Debian 12 machine with its package mirror: download
#                                    the packages the build needs into .deps/ (copy .deps/ to
#                                    the GPU host with the source tree)
#   scripts/gpu-host.sh build [DIR]  on the GPU host: unpack .deps/ into $PARASIM_DEPS
#                                    (default /opt/parasim-deps; nothing goes into /),
#                                    configure with the CUDA backend and without the GUI, build
#                                    into DIR (default build/gpu)
#   scripts/gpu-host.sh env          print the environment lines a shell on the GPU host needs
#                                    to run what `build` made (libraries, OpenMPI's prefix)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
deps=${PARASIM_DEPS:-/opt/parasim-deps}
arch=x86_64-linux-gnu

# The build's libraries and tools, with the runtime libraries they pull in (what
# `apt-get install` would add; the GPU host has libc, libstdc++ and CUDA already).
packages=(
  libyaml-cpp-dev libyaml-cpp0.7 libboost1.74-dev libboost-graph1.74-dev libboost-graph1.74.0
  libboost-regex1.74.0 libfmt-dev libfmt9 catch2 libcli11-dev nlohmann-json3-dev zlib1g-dev zlib1g
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200
  libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libnuma1 libltdl7 libxnvctrl0 libudev1
  libopenblas0-pthread libopenblas-dev libopenblas0 libopenblas-pthread-dev libblas3 liblapack3
  libgfortran5 libquadmath0 libicu72
)

environment() {
  cat <<EOF
export OPAL_PREFIX=$deps/usr
export PATH=$deps/usr/bin:\$PATH
export LD_LIBRARY_PATH=$deps/usr/lib/$arch:$deps/usr/lib/$arch/openmpi/lib:$deps/usr/lib/$arch/openblas-pthread:\${LD_LIBRARY_PATH:-}
EOF
}

case "${1:-}" in
  fetch)
    mkdir -p .deps  # ignored (.gitignore)
    (cd .deps && apt-get download "${packages[@]}" >/dev/null)
    echo "gpu-host: $(ls .deps/*.deb | wc -l) packages in .deps/ ($(du -sh .deps | cut -f1))"
    ;;
  build)
    dir=${2:-build/gpu}
    ls .deps/*.deb >/dev/null 2>&1 || { echo "gpu-host: no .deps/*.deb: run 'scripts/gpu-host.sh fetch' first" >&2; exit 2; }
    mkdir -p "$deps"
    for f in .deps/*.deb; do dpkg -x "$f" "$deps"; done
    # Debian's alternatives links (libblas.so.3 and the like) are made by postinst scripts,
    # which dpkg -x does not run; the build is given the libraries' paths instead, and
    # MPI's headers and library directly (its compiler wrappers need an installed prefix).
    lib=$deps/usr/lib/$arch
    for t in mpirun mpiexec; do ln -sf "$t.openmpi" "$deps/usr/bin/$t"; done
    eval "$(environment)"
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$deps/usr" \
      -DPARASIM_WITH_GUI=OFF -DPARASIM_WITH_CUDA=ON -DPARASIM_WERROR=OFF \
      -DMPI_C_HEADER_DIR="$lib/openmpi/include" -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$lib/openmpi/lib/libmpi.so" \
      -DBLAS_LIBRARIES="$lib/openblas-pthread/libblas.so" \
      -DPARASIM_CBLAS_INCLUDE_DIR="$deps/usr/include/$arch/openblas-pthread"
    # PARASIM_BUILD_TARGETS: only these (the GPU check's: parasim cuda_kernel_tests
    # parasim_gpu_gemm_bench), else everything.
    # shellcheck disable=SC2086
    cmake --build "$dir" -j "$(nproc)" ${PARASIM_BUILD_TARGETS:+--target $PARASIM_BUILD_TARGETS}
    echo "gpu-host: built $dir; in a new shell: eval \"\$(scripts/gpu-host.sh env)\""
    ;;
  env) environment ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
