#!/usr/bin/env bash
# Checks that every C++ source follows .clang-format (the CTest `format`). Prints each file that
# clang-format would change and how to fix them all; exit 1 if any.
#   scripts/check_format.sh [REPO_ROOT]
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"
command -v clang-format >/dev/null || { echo "check_format: clang-format not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
mapfile -t files < <(find common model placement api translate kube server agent webhook sim scheduler cmd \
                          testing e2e bench -name '*.cc' -o -name '*.h' | sort)
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf '%s: not formatted\n' "${bad[@]}"
  echo "${#bad[@]} of ${#files[@]} files differ from .clang-format; fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
