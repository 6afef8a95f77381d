#!/usr/bin/env bash
# Sets up ddplab (scripts/bootstrap.sh, warnings as errors) and runs every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
DDPLAB_WERROR=ON scripts/bootstrap.sh
exec ctest --test-dir build --output-on-failure --timeout 300 -j "${DDPLAB_TEST_JOBS:-2}" "$@"
