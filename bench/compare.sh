#!/usr/bin/env bash
# ddplab vs PyTorch's own DDP (bench/peer_ddp.py) vs the bare C++ loop (bench/bare_loop) on the
# quickstart workload (mnist_cnn, Fashion-MNIST, SGD momentum 0.9), alternating them for several
# rounds; prints the median training images/s of each. A benchmark, never a test.
#
#   bench/compare.sh [rounds=3] [train_limit=12800]
# Environment: BATCH (per replica, 64), WORLDS ("1 2"), DEVICE (cpu | cuda), BACKEND (gloo; nccl
# for world 1 on cuda), BUILD (build: where bin/ddplab and bin/bare_loop are), PYTHON (.venv/bin/python),
# DATA (the Fashion-MNIST directory; /usr/share/datasets/fashion-mnist).
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
data=${DATA:-/usr/share/datasets/fashion-mnist}
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A results
# CPU time the hypervisor gave to other guests ("steal", /proc/stat): on a shared VM it is what
# makes runs of the same code differ by 10-20%, so it is printed with the table.
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
read -r steal0 total0 < <(steal)
for round in $(seq "$rounds"); do
  for world in $worlds; do
    "$build/bin/ddplab" run experiments/quickstart.json epochs=1 replicas.count=$world batch.per_replica=$batch \
      replicas.device=$device replicas.backend=$backend dataset.train_limit=$limit dataset.test_limit=500 \
      dataset.root="$data" dataset.order=torch_sampler output="$out" name=cmp_$world --force >/dev/null
    d=$(python3 -c "import json,sys;print(json.loads(open(sys.argv[1]).readlines()[-1])['images_per_s'])" \
        "$out/cmp_$world/seed=1/epochs.jsonl")
    p=$("$python" bench/peer_ddp.py --world $world --per-replica $batch --train-limit $limit --device $device --root "$data" \
        --backend $backend 2>/dev/null | sed 's/.*images_per_s=//')
    results[ddplab_$world]+="$d "
    results[peer_$world]+="$p "
    echo "round $round world $world: ddplab $d peer $p" >&2
  done
  b=$("$build/bin/bare_loop" mnist_cnn $batch 200 "$cores" $device | sed 's/.*images_per_s=//')
  results[bare_1]+="$b "
  echo "round $round bare_loop $b" >&2
done
read -r steal1 total1 < <(steal)
# Medians of the rounds, and the median of the per-round ratios (each ratio compares runs made
# seconds apart, so it cancels most of the machine's drift).
stats() { python3 - "$@" <<'PY'
import statistics, sys
mode, a = sys.argv[1], [float(v) for v in sys.argv[2].split()]
if mode == "median":
    print(f"{statistics.median(a):.0f}")
else:
    b = [float(v) for v in sys.argv[3].split()]
    print(f"{statistics.median(x / y for x, y in zip(a, b)):.2f}")
PY
}
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); device: $device; rounds: $rounds; train images: $limit; batch per replica: $batch"
echo "steal (CPU time taken by other guests of the host) during the benchmark: $(( 100 * (steal1 - steal0) / (total1 - total0 + 1) ))%"
printf "%-6s %10s %10s %10s %12s %12s\n" world ddplab peer bare_loop ddplab/peer ddplab/bare
for world in $worlds; do
  d=$(stats median "${results[ddplab_$world]}"); p=$(stats median "${results[peer_$world]}")
  rp=$(stats ratio "${results[ddplab_$world]}" "${results[peer_$world]}")
  if [ "$world" = 1 ]; then
    b=$(stats median "${results[bare_1]}"); rb=$(stats ratio "${results[ddplab_$world]}" "${results[bare_1]}")
  else b="-"; rb="-"; fi
  printf "%-6s %10s %10s %10s %12s %12s\n" "$world" "$d" "$p" "$b" "$rp" "$rb"
done
echo "(images/s: medians of the rounds; ratios: medians of the per-round ratios)"
