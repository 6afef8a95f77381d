#!/usr/bin/env bash
# Sets up ddplab (scripts/bootstrap.sh, building only build/bin/ddplab) and runs the quickstart:
# the seed CNN on Fashion-MNIST, about 3 minutes on 2 cores. Extra arguments are overrides, e.g.
# replicas.count=2. scripts/test.sh afterwards reuses every object built here (same flags) and
# compiles only the tests and benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
DDPLAB_TARGETS=ddplab scripts/bootstrap.sh
exec build/bin/ddplab run experiments/quickstart.json --force "$@"
