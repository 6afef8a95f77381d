#!/usr/bin/env bash
# Builds ddplab and its tests with Debian's clang into build-clang and runs every test there, then
# fails on any compiler warning (scripts/check-warnings.sh). The normal build uses gcc; a second
# compiler shows code whose result depends on what C++ leaves unspecified (the order in which a
# call's arguments or an overloaded operator's operands are evaluated: gcc goes right to left,
# clang left to right), tests that match one compiler's wording, and warnings gcc does not give.
# Not part of CI: a cold build is a second full build (41 minutes on 2 cores, 2026-12-03, at the
# lowest priority beside experiments; the tests then take 2.5 minutes); run it after changing lib/
# or tests/. docs/reliability.md lists what it found.
#
#   scripts/clang-check.sh                       build, every test (ctest), warnings
#   scripts/clang-check.sh --gtest_filter=X.*    build, then only these tests (ddplab_tests directly)
#
# Installs clang with apt when it is missing (as root). Exit status: the tests', else the
# warning check's.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang++ >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "clang-check: clang++ is missing. Run as root: apt-get install -y --no-install-recommends clang" >&2
    exit 2
  fi
  echo "clang-check: installing clang"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang >/dev/null
fi

build=build-clang
# CC and CXX only count when CMake first configures build-clang.
CC=clang CXX=clang++ DDPLAB_BUILD_DIR=$build DDPLAB_TARGETS="ddplab ddplab_tests" scripts/bootstrap.sh
if ! grep -q '^CMAKE_CXX_COMPILER:FILEPATH=.*clang' "$build/CMakeCache.txt"; then
  echo "clang-check: $build was configured with another compiler; remove it and run again" >&2
  exit 2
fi

if [ $# -gt 0 ]; then
  "$build/bin/ddplab_tests" "$@"
else
  ctest --test-dir "$build" -j 2 --output-on-failure --timeout 300
fi
scripts/check-warnings.sh "$build"
