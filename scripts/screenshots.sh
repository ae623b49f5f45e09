#!/usr/bin/env bash
# Renders every view of the dashboard on seed scenarios into docs/images/ (offscreen, no
# display needed): quickstart with a real measurement beside the prediction (the window's
# Run for real button runs `parasim validate`: two CPU ranks, a few seconds), then
# hybrid-32-gpus (prediction only: its plan needs 32 GPUs).
# Usage: scripts/screenshots.sh [BUILD_DIR]   (default build/release; needs parasim-gui)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
gui="$build/gui/parasim-gui"
cli="$build/cli/parasim"
for f in "$gui" "$cli"; do
  [ -x "$f" ] || { echo "error: $f is missing: build first (scripts/setup.sh build)" >&2; exit 2; }
done
export QT_QPA_PLATFORM=offscreen
runtime=$(mktemp -d)
trap 'rm -rf "$runtime"' EXIT
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$runtime}
export PARASIM_CLI="$cli"

rm -rf docs/images/quickstart docs/images/hybrid-32-gpus
"$gui" scenarios/quickstart.yaml --validate --plan --export docs/images/quickstart 2>/dev/null
"$gui" scenarios/hybrid-32-gpus.yaml --plan --export docs/images/hybrid-32-gpus 2>/dev/null
rm -f docs/images/hybrid-32-gpus/06-run-for-real.png  # nothing was run
