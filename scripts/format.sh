#!/usr/bin/env bash
# Formats ddplab's C++ (lib/, app/, tests/, bench/) with clang-format as .clang-format says, or with
# --check reports every file that is not formatted and fails. The version is pinned (the PyPI wheel,
# installed into the project's .venv) so every machine formats alike: another clang-format
# version breaks lines differently.
#   scripts/format.sh           format in place
#   scripts/format.sh --check   change nothing; exit 1 naming the files that differ
set -euo pipefail
cd "$(dirname "$0")/.."
version=23.1.3
tool=.venv/bin/clang-format
if ! { [ -x "$tool" ] && "$tool" --version | grep -q " $version"; }; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  echo "format: pip install clang-format==$version"
  .venv/bin/pip install -q "clang-format==$version"
fi
mapfile -t files < <(git ls-files 'lib/*.h' 'lib/*.cpp' 'app/*.h' 'app/*.cpp' 'tests/*.h' 'tests/*.cpp' 'bench/*.h' 'bench/*.cpp')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    "$tool" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "format: ${#bad[@]} of ${#files[@]} files are not formatted (run scripts/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted as .clang-format says (clang-format $version)"
else
  "$tool" -i "${files[@]}"
fi
