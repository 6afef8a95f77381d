#!/usr/bin/env bash
# ddplab's CMAKE_CXX_COMPILER_LAUNCHER (CMakeLists.txt): runs one compile command, through ccache
# when CMake found it, and saves what the compiler wrote to stderr next to the object, as
# <object>.warnings (empty when it said nothing); the output still reaches the build log.
# ccache stores a compile's stderr with the object and replays it on a hit, so an object taken
# from the cache records the same warnings as one compiled now.
#
#   compiler-launcher.sh [ccache] <compiler> <args...> -o <object> ...    (as CMake calls it)
#
# scripts/check-warnings.sh fails the test command when any of these files holds a warning. That
# replaces -Werror there: the same compile flags for the quickstart and the tests, so the test
# command reuses every object the quickstart built (docs/performance.md, "The front door").
set -uo pipefail
# As scripts/bootstrap.sh sets them, so that a build started by hand (cmake --build) can use the
# cache too: without these ccache refuses every compile that includes the precompiled header.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd "$(dirname "$0")/.." && pwd)}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
object=""
prev=""
for arg in "$@"; do
  [ "$prev" = "-o" ] && object=$arg
  prev=$arg
done
if [ -z "$object" ]; then
  exec "$@"
fi
tmp="$object.warnings.$$"
"$@" 2>"$tmp"
rc=$?
cat "$tmp" >&2
mv -f "$tmp" "$object.warnings"
exit "$rc"
