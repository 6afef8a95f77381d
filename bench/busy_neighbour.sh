#!/usr/bin/env bash
# A sweep with an artificial load beside one of its runs: what the report says about speed when
# the machine, not the setting, changed. The quickstart's mnist_cnn on Fashion-MNIST, replicas
# {1, 2} x 3 seeds (one thread per replica), 2 epochs of `train_limit` images, report.target_acc
# `target`. While the run `replicas.count=1,seed=2` trains, one busy loop per core runs beside it
# (started when its manifest appears, stopped when the manifest leaves "running"). Prints the
# report's warnings, its "first to reach" line and the runs table; the report stays in `out`.
# A demonstration, never a test.
#
#   bench/busy_neighbour.sh [out=/tmp/ddplab-busy-neighbour] [train_limit=12800] [target=0.75]
# Environment: BUILD (build: where bin/ddplab is), DATA (the Fashion-MNIST directory; the spec's
# default when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/ddplab-busy-neighbour}
limit=${2:-12800}
target=${3:-0.75}
ddplab="${BUILD:-build}/bin/ddplab"
busy_run=replicas.count=1,seed=2
rm -rf "$out"
mkdir -p "$out"
args=(experiments/quickstart.json epochs=2 replicas.threads=1 "dataset.train_limit=$limit" dataset.test_limit=2000
      'sweep={"replicas.count":[1,2]}' repeats=3 seed=1 name=busy "output=$out" "report={\"target_acc\":$target}")
[ -n "${DATA:-}" ] && args+=("dataset.root=$DATA")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "ddplab: $("$ddplab" --version)"

# The neighbour: one busy loop per core for as long as $busy_run is running.
manifest="$out/busy/$busy_run/manifest.json"
(
  while [ ! -s "$manifest" ]; do sleep 0.1; done
  pids=()
  for ((c = 0; c < $(nproc); ++c)); do
    taskset -c "$c" sh -c 'while :; do :; done' &
    pids+=($!)
  done
  while grep -q '"status": *"running"' "$manifest" 2>/dev/null; do sleep 0.1; done
  kill "${pids[@]}"
  echo "neighbour: busy loops on $(nproc) cores stopped after $busy_run"
) &
neighbour=$!
trap 'kill $neighbour 2>/dev/null || true' EXIT

"$ddplab" run "${args[@]}" > "$out/sweep.log" 2>&1
wait $neighbour || true
grep -E "^\[|took" "$out/sweep.log"
md="$out/busy/report.md"
echo
sed -n '/^## Warnings/,/^## Summary/p' "$md" | grep '^- ' || echo "(no warnings)"
grep -E "first to reach|First to reach" "$md" || true
sed -n '/^## Runs/,$p' "$md" | grep '^|'
