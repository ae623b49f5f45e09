#!/usr/bin/env bash
# Sets parasim up on a Debian 12 machine: installs the Debian packages that are missing,
# configures and builds. Then, by the first argument:
#   setup.sh            build only
#   setup.sh demo       build, then run the main job on scenarios/quickstart.yaml:
#                       measure this machine once (parasim calibrate), predict the step
#                       with that profile, train the plan for real on CPU ranks, and show
#                       prediction and measurement side by side (parasim validate)
#   setup.sh test       build, then run every test (ctest)
# Environment: PARASIM_PRESET (default "release"; "dev", "asan", "minimal" also work),
#              PARASIM_NO_INSTALL=1 to skip the package step.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
mode=${1:-build}
preset=${PARASIM_PRESET:-release}

packages=(
  build-essential cmake ninja-build pkg-config git zlib1g-dev
  libyaml-cpp-dev libboost-graph-dev libfmt-dev libcli11-dev nlohmann-json3-dev catch2
  libopenmpi-dev openmpi-bin libopenblas-dev
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev qt6-qpa-plugins libgl-dev
  protobuf-compiler
  patchelf xz-utils
)
# The sanitizer build is clang's (with the libFuzzer target, scripts/fuzz.sh).
[ "$preset" != asan ] || packages+=(clang)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#packages[@]} Debian packages present"
    return
  fi
  echo "setup: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

[ "${PARASIM_NO_INSTALL:-0}" = 1 ] || install_missing

jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$jobs"

case "$mode" in
  build) ;;
  demo)
    parasim="build/$preset/cli/parasim"
    if "$parasim" backends | grep -Eq '^cpu +yes +yes'; then
      profile="build/$preset/calibrate-cpu.yaml"
      if [ ! -s "$profile" ]; then
        echo "setup: measuring this machine once (parasim calibrate, under a minute; report in build/$preset/calibrate-cpu.txt)"
        "$parasim" calibrate --out "$profile" >"build/$preset/calibrate-cpu.txt"
      fi
      exec "$parasim" validate scenarios/quickstart.yaml --set hardware.profile="$profile" \
        --out "build/$preset/validate-quickstart"
    fi
    echo "setup: this build has no CPU executor (preset $preset); predicting only" >&2
    exec "$parasim" simulate scenarios/quickstart.yaml ;;
  test)
    # One test per core (tests that need more cores or the whole machine say so).
    CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$jobs} exec ctest --preset "$preset" ;;
  *)
    echo "setup: unknown mode '$mode' (expected build, demo or test)" >&2
    exit 2 ;;
esac
