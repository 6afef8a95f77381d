#!/usr/bin/env bash
# ddplab vs PyTorch's own DDP (bench/peer_ddp.py) vs the bare C++ loop (bench/bare_loop) on the
# quickstart workload (mnist_cnn, Fashion-MNIST, SGD momentum 0.9), alternating them for several
# rounds; prints the median training images/s of each. A benchmark, never a test.
#
#   bench/compare.sh [rounds=3] [train_limit=12800]
# Environment: BATCH (per replica, 64), WORLDS ("1 2"), DEVICE (cpu | cuda), BACKEND (gloo; nccl
# for world 1 on cuda), BUILD (build: where bin/ddplab and bin/bare_loop are), PYTHON (.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
limit=${2:-12800}
batch=${BATCH:-64}
worlds=${WORLDS:-1 2}
device=${DEVICE:-cpu}
backend=${BACKEND:-gloo}
build=${BUILD:-build}
python=${PYTHON:-.venv/bin/python}
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A results
for round in $(seq "$rounds"); do
  for world in $worlds; do
    "$build/bin/ddplab" run experiments/quickstart.json epochs=1 replicas.count=$world batch.per_replica=$batch \
      replicas.device=$device replicas.backend=$backend dataset.train_limit=$limit dataset.test_limit=500 \
      output="$out" name=cmp_$world --force >/dev/null
    d=$(python3 -c "import json,sys;print(json.loads(open(sys.argv[1]).readlines()[-1])['images_per_s'])" \
        "$out/cmp_$world/seed=1/epochs.jsonl")
    p=$("$python" bench/peer_ddp.py --world $world --per-replica $batch --train-limit $limit --device $device \
        --backend $backend | sed 's/.*images_per_s=//')
    results[ddplab_$world]+="$d "
    results[peer_$world]+="$p "
  done
  b=$("$build/bin/bare_loop" mnist_cnn $batch 200 "$cores" $device | sed 's/.*images_per_s=//')
  results[bare_1]+="$b "
done
median() { python3 -c "import statistics,sys;print(f'{statistics.median(map(float,sys.argv[1:])):.0f}')" $1; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); device: $device; rounds: $rounds; train images: $limit; batch per replica: $batch"
printf "%-6s %10s %10s %10s %12s %12s\n" world ddplab peer bare_loop ddplab/peer ddplab/bare
for world in $worlds; do
  d=$(median "${results[ddplab_$world]}"); p=$(median "${results[peer_$world]}")
  if [ "$world" = 1 ]; then b=$(median "${results[bare_1]}"); rb=$(ratio "$d" "$b"); else b="-"; rb="-"; fi
  printf "%-6s %10s %10s %10s %12s %12s\n" "$world" "$d" "$p" "$b" "$(ratio "$d" "$p")" "$rb"
done
