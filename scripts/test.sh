#!/usr/bin/env bash
# Sets up ddplab (scripts/bootstrap.sh, all targets), fails if the compiler warned about anything
# (scripts/check-warnings.sh), and runs every test with CTest. It compiles with the quickstart's
# flags (no -Werror), so after scripts/quickstart.sh it builds only the tests and benchmarks.
# The report tests drive a real headless Chromium, so this also installs Debian's `chromium`;
# with DDPLAB_REQUIRE_BROWSER=1 (set here) a missing browser fails the test instead of skipping it.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DDPLAB_BUILD_DIR:-build}
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "test: installing chromium (headless browser for the report tests)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    echo "test: chromium is missing; the browser test will fail. Run: sudo apt-get install -y chromium" >&2
  fi
fi
export DDPLAB_REQUIRE_BROWSER=1
DDPLAB_TARGETS= scripts/bootstrap.sh
scripts/check-warnings.sh "$build_dir"
exec ctest --test-dir "$build_dir" --output-on-failure --timeout 300 -j "${DDPLAB_TEST_JOBS:-2}" "$@"
