#!/usr/bin/env bash
# ddplab vs PyTorch's own DDP (bench/peer_ddp.py) vs the bare C++ loop (bench/bare_loop) on the
# quickstart workload (mnist_cnn, Fashion-MNIST, SGD at a constant lr 0.05 with momentum 0.9, as the
# peer trains; the quickstart's cosine decay is turned off), alternating them for several
# rounds. A benchmark, never a test.
#
#   bench/compare.sh [rounds=3] [train_limit=12800]
# Environment: BATCH (per replica, 64), WORLDS ("1 2"), DEVICE (cpu | cuda), BACKEND (gloo; nccl
# for world 1 on cuda), BUILD (build: where bin/ddplab and bin/bare_loop are), PYTHON (.venv/bin/python),
# DATA (the Fashion-MNIST directory; /usr/share/datasets/fashion-mnist), GRAPH (1: ddplab at world 1
# runs a second time with its step captured in a CUDA graph, replicas.cuda_graph, the row "1+graph";
# on a CPU that form runs eagerly), TARGET (the test accuracy for "to target", 0.75).
#
# What it measures, the same way for all three:
#   steady images/s  the second epoch's training images/s: each contender first runs one epoch's
#                    steps (train_limit / global batch) that are not timed, so CUDA context
#                    creation, the first calls of each kernel and the allocator's warm-up fall
#                    outside it (ddplab and the peer train 2 epochs; the bare loop runs that many
#                    warm-up steps, then times as many again)
#   outside s        the process's wall time minus its own training time: start-up (loading
#                    LibTorch, CUDA and the process group, reading the data) and teardown
#   to first step s  from the process's start (this script's clock just before it starts it) to
#                    its training clock's start: ddplab's manifest "train_start", the peer's and the
#                    bare loop's train_start_unix
#   to target s      from the process's start to the end of the first evaluation (after each epoch,
#                    on the first 500 test images) at or above TARGET test accuracy; ddplab's
#                    train_start + that epoch's wall_s. The bare loop trains on random batches and
#                    evaluates nothing: "-"
# Each line gives the median over rounds and the spread (min-max); ratios are medians of the
# per-round ratios, which compare runs made seconds apart.
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
target=${TARGET:-0.75}
data=${DATA:-/usr/share/datasets/fashion-mnist}
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
results=$out/results.tsv  # contender world round images_per_s outside_s first_step_s target_s ("-": none)
# CPU time the hypervisor gave to other guests ("steal", /proc/stat): on a shared VM it is what
# makes runs of the same code differ by 10-20%, so it is printed with the table.
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
now() { date +%s.%N; }
# field LINE KEY: the value of KEY=value in a program's one-line result.
field() { sed -n "s/.*[ ^]$2=\([^ ]*\).*/\1/p" <<<" $1"; }
# since T0 UNIX: UNIX - T0 in seconds, or "-" when UNIX is "-" or empty.
since() { python3 -c "import sys; print('-' if sys.argv[2] in ('', '-') else float(sys.argv[2]) - float(sys.argv[1]))" "$1" "$2"; }
read -r steal0 total0 < <(steal)
# said: the last result line, on stderr as the rounds go.
said() {
  tail -n 1 "$results" | awk 'function s(x) { return x == "-" ? "never" : sprintf("%.2f s", x) }
    { printf "round %s world %s: %s %.0f images/s, %.2f s outside, to the first step %s, to the target %s\n",
      $3, $2, $1, $4, $5, s($6), $1 == "bare" ? "- (it evaluates nothing)" : s($7) }' >&2
}
# record CONTENDER WORLD ROUND T0 T1 LINE: the result of a program that printed images_per_s, train_s,
# train_start_unix and, if it evaluates, target_unix, started at T0 and ended at T1.
record() {
  echo "$1 $2 $3 $(field "$6" images_per_s) $(python3 -c "print($5 - $4 - $(field "$6" train_s))")" \
    "$(since "$4" "$(field "$6" train_start_unix)") $(since "$4" "$(field "$6" target_unix)")" >>"$results"
  said
}
# run_ddplab CONTENDER WORLD ROUND [OVERRIDE...]: one ddplab run of the workload, its result line.
run_ddplab() {
  local who=$1 world=$2 round=$3 t0 t1 run figures
  shift 3
  run=$out/cmp_$who$world/seed=1
  t0=$(now)
  "$build/bin/ddplab" run experiments/quickstart.json epochs=2 replicas.count=$world batch.per_replica=$batch \
    replicas.device=$device replicas.backend=$backend dataset.train_limit=$limit dataset.test_limit=500 \
    dataset.root="$data" dataset.order=torch_sampler schedule.decay=constant output="$out" name=cmp_$who$world "$@" \
    --force >/dev/null
  t1=$(now)
  # An assignment, so that set -e stops the script if the records do not read.
  figures=$(python3 - "$run" "$t0" "$t1" "$target" <<'PY'
import datetime, json, sys
run, t0, t1, target = sys.argv[1], *map(float, sys.argv[2:])
r = [json.loads(line) for line in open(f"{run}/epochs.jsonl")]
start = json.load(open(f"{run}/manifest.json")).get("train_start")  # none before 2026-12-06's ddplab
start = start and datetime.datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp()
hit = next((e["wall_s"] for e in r if e["test_acc"] >= target), None)
print(r[-1]["images_per_s"], t1 - t0 - r[-1]["wall_s"], "-" if not start else start - t0,
      "-" if not start or hit is None else start + hit - t0)
PY
)
  echo "$who $world $round $figures" >>"$results"
  said
}
for round in $(seq "$rounds"); do
  for world in $worlds; do
    run_ddplab ddplab $world $round
    if [ "${GRAPH:-0}" = 1 ] && [ "$world" = 1 ]; then
      run_ddplab ddplab_graph 1 $round replicas.cuda_graph=true
    fi
    t0=$(now)
    line=$("$python" bench/peer_ddp.py --world $world --per-replica $batch --train-limit $limit --device $device \
           --root "$data" --backend $backend --epochs 2 --test-limit 500 --target "$target" 2>/dev/null)
    record peer $world $round "$t0" "$(now)" "$line"
  done
  steps=$(( limit / batch ))
  t0=$(now)
  line=$("$build/bin/bare_loop" mnist_cnn $batch $steps "$cores" $device $steps)
  record bare 1 $round "$t0" "$(now)" "$line"
done
read -r steal1 total1 < <(steal)
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); device: $device; rounds: $rounds;" \
  "train images per epoch: $limit; batch per replica: $batch; timed: epoch 2 (epoch 1 is warm-up for all three)"
echo "steal (CPU time taken by other guests of the host) during the benchmark: $(( 100 * (steal1 - steal0) / (total1 - total0 + 1) ))%"
python3 - "$results" "$target" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(dict)  # (contender, world) -> round -> (images/s, outside, to first step, to target)
for line in open(sys.argv[1]):
    who, world, rnd, *values = line.split()
    rows[(who, int(world))][int(rnd)] = tuple(None if v == "-" else float(v) for v in values)
def spread(who, world, i, fmt):
    runs = rows[(who, world)].values()
    v = [r[i] for r in runs if r[i] is not None]
    if not v:
        return f"never ({len(runs)} runs)" if runs and who != "bare" else "-"
    missed = f", {len(runs) - len(v)} of {len(runs)} never" if len(v) < len(runs) else ""
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))}{missed})"
def ratio(who, world, other, other_world):
    a, b = rows[(who, world)], rows[(other, other_world)]
    r = [a[k][0] / b[k][0] for k in a if k in b]
    return f"{statistics.median(r):.2f}" if r else "-"
# A row per ddplab run: each world, and "1+graph" (GRAPH=1) against the same peer and bare loop.
lines = [(str(w), "ddplab", w) for w in sorted({w for who, w in rows if who == "ddplab"})]
lines += [("1+graph", "ddplab_graph", 1)] if ("ddplab_graph", 1) in rows else []
head = "{:<8} {:>26} {:>26} {:>26} {:>11} {:>11}"
print("steady images/s, median (min-max) over rounds; ratios: medians of the per-round ratios")
print(head.format("world", "ddplab", "peer", "bare_loop", "ddplab/peer", "ddplab/bare"))
for label, who, world in lines:
    bare = spread("bare", 1, 0, "{:.0f}") if world == 1 else "-"
    print(head.format(label, spread(who, world, 0, "{:.0f}"), spread("peer", world, 0, "{:.0f}"), bare,
                      ratio(who, world, "peer", world), ratio(who, world, "bare", 1) if world == 1 else "-"))
seconds = [("seconds outside training (process wall time minus its own training time)", 1),
           ("seconds from the process's start to its first step", 2),
           (f"seconds from the process's start to test accuracy {sys.argv[2]} (the bare loop evaluates nothing)", 3)]
for title, i in seconds:
    print(f"{title}, median (min-max)")
    print("{:<8} {:>26} {:>26} {:>26}".format("world", "ddplab", "peer", "bare_loop"))
    for label, who, world in lines:
        bare = spread("bare", 1, i, "{:.2f}") if world == 1 else "-"
        print("{:<8} {:>26} {:>26} {:>26}".format(label, spread(who, world, i, "{:.2f}"),
                                                  spread("peer", world, i, "{:.2f}"), bare))
PY
