#!/usr/bin/env bash
# Renders every view of the dashboard on seed scenarios into docs/images/ (offscreen, no
# display needed): quickstart with a real measurement beside the prediction (the window's
# Run for real button runs `parasim validate`: two CPU ranks, a few seconds), then
# hybrid-32-gpus (prediction only: its plan needs 32 GPUs).
# Fails (exit 3) when the step time it captured is more than 10 % off the measurement.
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
"$gui" scenarios/quickstart.yaml --validate --plan --export docs/images/quickstart 2>/dev/null | tee "$runtime/quickstart.log"
"$gui" scenarios/hybrid-32-gpus.yaml --plan --export docs/images/hybrid-32-gpus 2>/dev/null
rm -f docs/images/hybrid-32-gpus/06-run-for-real.png  # nothing was run

# The Run for real view shows a measurement: on a loaded host, or with a profile from another
# day, its errors say more about the host than about the model. Say so, and fail.
step=$(grep -m1 '^captured: step time:' "$runtime/quickstart.log" | sed 's/.*error \([-+0-9.]*\) %.*/\1/')
if [ -z "$step" ]; then
  echo "error: the quickstart's Run for real captured no step time" >&2
  exit 1
fi
if awk -v e="$step" 'BEGIN { exit !(e > 10 || e < -10) }'; then
  echo "error: the captured step time is ${step} % off the measured one (over 10 %): make the screenshots on an" \
    "idle host, with a profile calibrated there the same day (parasim calibrate); grep captured: above for every row" >&2
  exit 3
fi
echo "captured step time error: ${step} % (within 10 %)"
