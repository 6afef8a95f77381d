#!/usr/bin/env bash
# One sweep of 8 one-replica, one-thread runs (the quickstart's mnist_cnn on Fashion-MNIST, 2
# learning rates x 4 seeds), run in turn (`ddplab run`) and packed (`ddplab run --jobs 2`) side
# by side, alternating for `rounds`; prints each wall time, their ratio, how busy the cores were
# (CPU time of the sweep and its runs / cores x wall) and whether every run's epochs.jsonl is
# the same in both (all fields but the wall-clock ones epoch_s, wall_s, images_per_s,
# comm_wait_s, host load). A benchmark, never a test.
#
#   bench/sweep_packing.sh [train_limit=6000] [epochs=1] [rounds=1]
# Environment: BUILD (build: where bin/ddplab is), JOBS (2), DATA (the Fashion-MNIST directory;
# the spec's default when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-6000}
epochs=${2:-1}
rounds=${3:-1}
build=${BUILD:-build}
jobs=${JOBS:-2}
ddplab="$build/bin/ddplab"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(experiments/quickstart.json "epochs=$epochs" replicas.count=1 replicas.threads=1 "dataset.train_limit=$limit"
      dataset.test_limit=1000 'sweep={"optimizer.lr":[0.02,0.05]}' repeats=4 name=pack)
[ -n "${DATA:-}" ] && args+=("dataset.root=$DATA")
# CPU time the hypervisor gave to other guests ("steal", /proc/stat) and the load average: what
# else was running, printed with the figures.
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ddplab: $("$ddplab" --version)"
# Runs one sweep into $out/$1 with the extra flags "${@:2}"; prints "wall_s cpu_s" (the CPU time
# of ddplab and every process it waited for, i.e. the runs and their workers).
sweep() {
  local dir=$out/$1
  shift
  python3 - "$dir" "$ddplab" run "${args[@]}" "output=$dir" "$@" <<'PY'
import resource, subprocess, sys, time
log = open(sys.argv[1] + ".log", "w")
t = time.monotonic()
rc = subprocess.run(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT).returncode
wall = time.monotonic() - t
if rc != 0:
    sys.exit(f"{' '.join(sys.argv[2:])}: exit code {rc}; see {log.name}")
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{wall:.1f} {ru.ru_utime + ru.ru_stime:.1f}")
PY
}
read -r steal0 total0 < <(steal)
printf "%-6s %-10s %8s %8s %10s\n" round mode wall_s cpu_s cores_busy
for round in $(seq "$rounds"); do
  read -r seq_wall seq_cpu < <(sweep "seq$round")
  read -r pk_wall pk_cpu < <(sweep "packed$round" --jobs "$jobs")
  busy() { python3 -c "print(f'{100*$1/($(nproc)*$2):.0f}%')"; }
  printf "%-6s %-10s %8s %8s %10s\n" "$round" sequential "$seq_wall" "$seq_cpu" "$(busy "$seq_cpu" "$seq_wall")"
  printf "%-6s %-10s %8s %8s %10s\n" "$round" "--jobs $jobs" "$pk_wall" "$pk_cpu" "$(busy "$pk_cpu" "$pk_wall")"
  python3 -c "print(f'round $round: packed is {$seq_wall/$pk_wall:.2f}x faster than sequential')"
done
read -r steal1 total1 < <(steal)
python3 -c "print(f'CPU steal during the benchmark: {100*($steal1-$steal0)/max(1,$total1-$total0):.1f}%')"
grep -h "took" "$out"/packed*.log || true
# Metrics identity: every run's records, wall-clock fields aside, the same in both sweeps of round 1.
# Each round writes its own directories (a second sweep into the same one would skip done runs).
python3 - "$out/seq1/pack" "$out/packed1/pack" <<'PY'
import json, pathlib, sys
timing = {"epoch_s", "wall_s", "images_per_s", "comm_wait_s", "host_cpu_wait_pct", "host_steal_pct"}  # EpochRecord::machine_fields
a, b = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
runs = sorted(p.parent.name for p in a.glob("*/epochs.jsonl"))
def records(d):
    return [{k: v for k, v in json.loads(l).items() if k not in timing} for l in (d / "epochs.jsonl").read_text().splitlines() if l]
same = [r for r in runs if records(a / r) == records(b / r)]
print(f"metrics identical (all fields but {', '.join(sorted(timing))}): {len(same)} of {len(runs)} runs")
for r in runs:
    if r not in same:
        print(f"  differs: {r}")
sys.exit(0 if len(same) == len(runs) == 8 else 1)
PY
