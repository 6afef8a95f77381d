#!/usr/bin/env bash
# The byte-identity set: the runs a refactoring must leave unchanged. Trains each with one ddplab
# binary into OUT; run it with the binary before a change and after, then compare the two folders:
#
#   scripts/identity-set.sh BINARY OUT          (e.g. a copy of last commit's build/bin/ddplab)
#   scripts/identity-set.sh --compare OUT_A OUT_B   every epochs.jsonl and steps.jsonl equal but
#                                                   for the machine fields (bench/same_records.py)
#
# The runs: the quickstart cut to 2 epochs of 3,200 images at 1 process; 2 processes; 2 simulated;
# local SGD (period 4) at 2; EASGD (period 4, alpha 0.25) at 2 with accumulation 2; validation +
# early stop + step records + evaluation points + weight EMA; PowerSGD (rank 2, from step 10) at 2;
# a clean stop at step 30 (2 processes) and its resume. Takes about 4 minutes on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--compare" ]; then
  status=0
  for run in "$2"/runs/identity/*/; do
    id=$(basename "$run")
    same=1
    other="$3/runs/identity/$id"
    if ! out=$(python3 "$root/bench/same_records.py" "$run" "$other"); then
      echo "$id: epochs.jsonl differs"; echo "$out" | head -5; same=0
    fi
    if [ -f "$run/steps.jsonl" ] && ! cmp -s <(python3 - "$run/steps.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print({k: v for k, v in r.items() if not (k.endswith("_s") or k.startswith("host_"))})
PY
    ) <(python3 - "$other/steps.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print({k: v for k, v in r.items() if not (k.endswith("_s") or k.startswith("host_"))})
PY
    ); then
      echo "$id: steps.jsonl differs"; same=0
    fi
    if [ $same = 1 ]; then echo "$id: same"; else status=1; fi
  done
  exit $status
fi
bin=$(realpath "$1")
out=$2
mkdir -p "$out"
cd "$out"
spec="$root/experiments/quickstart.json"
base=(name=identity output="$out/runs" epochs=2 dataset.train_limit=3200 dataset.test_limit=2000)
run() {
  local id=$1
  shift
  "$bin" run "$spec" "${base[@]}" "$@" --run-id "$id" --force >"$id.log" 2>&1
}
run one
run two replicas.count=2
run simulated replicas.count=2 replicas.mode=simulated
run local_sgd replicas.count=2 'replicas.sync={"local_sgd": {"period": 4}}'
run easgd replicas.count=2 'replicas.sync={"easgd": {"period": 4, "alpha": 0.25}}' batch.accumulate_steps=2
run validation dataset.validation=0.1 early_stop.patience=1 log.every_steps=10 log.eval_every_steps=20 \
  model.ema_decay=0.9
run powersgd replicas.count=2 replicas.compression=powersgd replicas.powersgd.rank=2 \
  replicas.powersgd.start_iter=10
run stopped replicas.count=2 debug.fault=stop debug.rank=0 debug.step=30 || true  # exits 143 on purpose
"$bin" run "$spec" "${base[@]}" replicas.count=2 debug.fault=stop debug.rank=0 debug.step=30 \
  --run-id stopped >stopped-resume.log 2>&1
echo "identity set in $out/runs/identity"
