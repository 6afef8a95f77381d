#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan) into build-fuzz and runs each
# for a bounded time. Not part of CI: run it after changing a parser, and for longer before a
# release.
#
#   scripts/fuzz.sh                     every target for 60 s
#   scripts/fuzz.sh 600                 every target for 600 s
#   scripts/fuzz.sh 300 fuzz_idx        one target
#
# Each target starts from its seeds, tests/fuzz/corpus/<target>/ (read only), and from what
# earlier runs found, build-fuzz/corpus/<target>/ (kept between runs). Every input runs under
# -timeout=5 (s) and -rss_limit_mb=2048. A crash, sanitizer report, hang or out-of-memory stops
# that target and leaves the input as build-fuzz/artifacts/<target>/{crash,timeout,oom,leak}-*;
# reproduce with `build-fuzz/bin/<target> <file>`. The script prints one summary line per target
# and exits 1 when any target found something, 0 otherwise. Needs clang and libFuzzer:
#   apt-get install clang libclang-rt-14-dev      (Debian 12)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-14-dev (libFuzzer)" >&2
  exit 2
fi

build=build-fuzz
CC=clang CXX=clang++ DDPLAB_BUILD_DIR=$build DDPLAB_CMAKE_ARGS="-DDDPLAB_FUZZ=ON -DDDPLAB_BUILD_TESTS=OFF" \
  DDPLAB_TARGETS="${targets[*]}" scripts/bootstrap.sh

found=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t" "$build/logs"
  log=$build/logs/$t.log
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  before=$(ls "$build/artifacts/$t" | wc -l)
  echo "fuzz: $t for ${seconds} s (log: $log)"
  rc=0
  "$build/bin/$t" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t/" "${dict[@]}" "$build/corpus/$t" "tests/fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  new=$(( $(ls "$build/artifacts/$t" | wc -l) - before ))
  if [ "$rc" -ne 0 ] || [ "$new" -gt 0 ]; then
    found=1
    echo "fuzz: $t FAILED (exit $rc); the report:" >&2
    grep -A40 -m1 -E '^==[0-9]+==ERROR|runtime error|fuzz check failed|uncaught exception|terminate called|ALARM|out-of-memory' \
      "$log" >&2 || tail -40 "$log" >&2
  fi
  summary+=("$(printf '%-16s %12s execs  cov %6s  corpus %5s  new crashes %s' "$t" "${execs:-?}" "${cov:-?}" \
    "$(ls "$build/corpus/$t" | wc -l)" "$new")")
done
echo "fuzz: summary (${seconds} s per target)"
printf '  %s\n' "${summary[@]}"
find "$build/artifacts" -type f | grep -q . && echo "fuzz: inputs that failed are in $build/artifacts/"
exit "$found"
