#!/usr/bin/env bash
# Fails (exit 1) when the compiler warned about any object of the build: scripts/test.sh's
# replacement for -Werror, which would change every compile command. scripts/compiler-launcher.sh
# (the build's compiler launcher) saves each object's compiler stderr as <object>.warnings; this
# lists every such file that holds "warning:" with its first warnings.
#
#   scripts/check-warnings.sh [build dir, default build]
#
# Objects of bundled third-party code (googletest staged by scripts/stage-offline-deps.sh) are not
# checked: -Werror never applied to them either.
set -euo pipefail
build=${1:-build}
build=${build%/}
if [ ! -d "$build" ]; then
  echo "check-warnings: no build directory $build" >&2
  exit 2
fi
mapfile -t found < <(find "$build" -name '*.warnings' -type f -not -path "$build/googletest/*" | sort)
# Only objects the build still makes: a file renamed or moved to another layer leaves its old
# object and record behind, which must not fail the check.
declare -A outputs=()
if targets=$(ninja -C "$build" -t targets all 2>/dev/null); then
  while IFS= read -r line; do outputs["${line%: *}"]=1; done <<< "$targets"
fi
records=()
for f in "${found[@]}"; do
  object=${f%.warnings}
  if [ ${#outputs[@]} -eq 0 ] || [ -n "${outputs[${object#"$build"/}]:-}" ]; then
    records+=("$f")
  fi
done
if [ ${#records[@]} -eq 0 ]; then
  echo "check-warnings: no compiler output recorded under $build/ (no <object>.warnings files), so" \
       "warnings cannot be checked: configure with the default CMAKE_CXX_COMPILER_LAUNCHER" \
       "(scripts/compiler-launcher.sh, CMakeLists.txt)" >&2
  exit 1
fi
warned=()
for f in "${records[@]}"; do
  grep -q 'warning:' "$f" && warned+=("$f")
done
if [ ${#warned[@]} -eq 0 ]; then
  echo "check-warnings: no compiler warnings in ${#records[@]} objects"
  exit 0
fi
{
  echo "check-warnings: the compiler warned about ${#warned[@]} of ${#records[@]} objects; warnings fail" \
       "the tests (as -Werror would). Files (each holds that object's compiler output):"
  printf '  %s\n' "${warned[@]}"
  echo "First warnings:"
  for f in "${warned[@]:0:5}"; do
    grep -m 3 'warning:' "$f" | sed 's/^/  /'
  done
} >&2
exit 1
