#!/usr/bin/env bash
# Sets up ddplab (scripts/bootstrap.sh) and runs the quickstart: the seed CNN on Fashion-MNIST,
# about 3 minutes on 2 cores. Extra arguments are overrides, e.g. replicas.count=2.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec build/bin/ddplab run experiments/quickstart.json --force "$@"
