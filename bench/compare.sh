#!/usr/bin/env bash
# ddplab vs PyTorch's own DDP (bench/peer_ddp.py) vs the bare C++ loop (bench/bare_loop) on the
# quickstart workload (mnist_cnn, Fashion-MNIST, batch 64 per replica), alternating them for
# several rounds; prints the median images/s. A benchmark, never a test.
#   bench/compare.sh [rounds=3] [train_limit=12800]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
limit=${2:-12800}
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A results
for round in $(seq "$rounds"); do
  for world in 1 2; do
    build/bin/ddplab run experiments/quickstart.json epochs=1 replicas.count=$world dataset.train_limit=$limit \
      dataset.test_limit=500 output="$out" name=cmp_$world --force >/dev/null
    d=$(python3 -c "import json,sys;print(json.loads(open(sys.argv[1]).readlines()[-1])['images_per_s'])" \
        "$out/cmp_$world/seed=1/epochs.jsonl")
    p=$(.venv/bin/python bench/peer_ddp.py --world $world --train-limit $limit | sed 's/.*images_per_s=//')
    results[ddplab_$world]+="$d "
    results[peer_$world]+="$p "
  done
  b=$(build/bin/bare_loop mnist_cnn 64 200 "$cores" | sed 's/.*images_per_s=//')
  results[bare_1]+="$b "
done
median() { python3 -c "import statistics,sys;print(f'{statistics.median(map(float,sys.argv[1:])):.0f}')" $1; }
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); rounds: $rounds; train images: $limit"
printf "%-6s %10s %10s %10s %14s %14s\n" world ddplab peer bare_loop ddplab/peer ddplab/bare
for world in 1 2; do
  d=$(median "${results[ddplab_$world]}"); p=$(median "${results[peer_$world]}")
  if [ $world = 1 ]; then b=$(median "${results[bare_1]}"); else b="-"; fi
  rb=$([ "$b" = "-" ] && echo "-" || python3 -c "print(f'{$d/$b:.2f}')")
  printf "%-6s %10s %10s %10s %14s %14s\n" $world "$d" "$p" "$b" "$(python3 -c "print(f'{$d/$p:.2f}')")" "$rb"
done
