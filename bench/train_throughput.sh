#!/usr/bin/env bash
# Training throughput of the quickstart configuration (mnist_cnn, Fashion-MNIST, batch 64 per
# replica) for 1 and 2 replicas: images/s and the share of the epoch spent blocked on all-reduce.
# A benchmark, never a test. Usage: bench/train_throughput.sh [rounds] [train_limit]
# Environment: BUILD (build: where bin/ddplab is).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
limit=${2:-20000}
build=${BUILD:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "ddplab: $("$build"/bin/ddplab --version)"
printf "%-9s %-6s %12s %12s %14s\n" replicas round images/s epoch_s comm_wait_%
for round in $(seq "$rounds"); do
  for n in 1 2; do
    "$build"/bin/ddplab run experiments/quickstart.json epochs=1 replicas.count=$n dataset.train_limit=$limit \
      dataset.test_limit=1000 output="$out" name=bench_$n --force >/dev/null
    python3 - "$out/bench_$n/seed=1/epochs.jsonl" "$n" "$round" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readlines()[-1])
print(f"{sys.argv[2]:<9} {sys.argv[3]:<6} {r['images_per_s']:12.0f} {r['epoch_s']:12.2f} {100*r['comm_wait_s']/r['epoch_s']:14.1f}")
PY
  done
done
