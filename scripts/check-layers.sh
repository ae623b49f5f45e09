#!/usr/bin/env bash
# The folders in the order data flows through them (docs/architecture.md); a folder may
# include only folders above it, never one beside or below it:
#
#   topology  scenario  workload  program  report  sim | exec  planner  cli | gui
#
# sim and exec stand side by side (neither includes the other), as do cli and gui.
# bench/, fuzz/ and tests/ sit above everything. Exit 1 and a line per include that points
# the wrong way; 0 when none does.
# Usage: scripts/check-layers.sh [ROOT] (default: the repository this script is in)
set -uo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root" || exit 2

rank() {
  case "$1" in
    topology) echo 0 ;;
    scenario) echo 1 ;;
    workload) echo 2 ;;
    program) echo 3 ;;
    report) echo 4 ;;
    sim | exec) echo 5 ;;
    planner) echo 6 ;;
    cli | gui) echo 7 ;;
    *) echo -1 ;;
  esac
}

bad=0
checked=0
for folder in topology scenario workload program report sim exec planner cli gui; do
  mine=$(rank "$folder")
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    target=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/.*/\1/p' <<<"${rest#*:}")
    [ -n "$target" ] || continue
    theirs=$(rank "$target")
    [ "$theirs" -ge 0 ] || continue  # not one of the layered folders
    checked=$((checked + 1))
    if [ "$target" != "$folder" ] && [ "$theirs" -ge "$mine" ]; then
      echo "$file:$line: $folder includes $target/, which is not above it"
      bad=1
    fi
  done < <(grep -rn --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.cu' --include='*.cuh' \
    -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$folder" 2>/dev/null)
done
if [ "$bad" -eq 0 ]; then
  echo "layers: $checked includes between folders, every one pointing up"
fi
exit $bad
