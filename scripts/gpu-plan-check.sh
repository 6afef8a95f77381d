#!/usr/bin/env bash
# The planner's check on a machine with one GPU, a step of scripts/gpu-check.sh (docs/planner.md,
# "Checking at N = 4, 8 on GPUs"). One GPU cannot time 4 or 8 replicas (NCCL wants a GPU per rank),
# but steps to a target depend on the global batch, not on where the replicas run, so the
# statistics half of N = 4, 8 can be checked: `ddplab plan` calibrates on the quickstart (its steps
# runs: 2 replicas over gloo sharing the GPU at global batches 64 and 256; its timing runs: every
# other grid batch; its all-reduce probe: gloo), predicts the grid replicas 1, 2 x global batch 64,
# 256, 512, then 1 replica runs at 256 and 512 (the global batches of 4 and 8 replicas of 64) and
# `ddplab plan --check` scores the steps to the target there (512: beyond the batches run to it).
#
#   scripts/gpu-plan-check.sh BUILD OUT DEVICE FASHION_ROOT [key=value...]
#
# PLAN_TARGET_LOSS: the training-loss target (default 0.55). Writes OUT/plan/{plan,check}.{json,md},
# plan.html; the runs go to OUT/runs.
set -euo pipefail
build=$1 out=$2 dev=$3 root=$4
shift 4
target=${PLAN_TARGET_LOSS:-0.55}
mkdir -p "$out"
spec="$out/gpu_plan.json"
python3 - "$spec" "$out/runs" "$dev" "$root" "$@" <<'PY'
import json, sys
path, output, dev, root, *overrides = sys.argv[1:]
spec = json.load(open("experiments/quickstart.json"))
spec.update(name="gpu_plan", output=output)
spec["dataset"]["root"] = root
spec["replicas"].update(device=dev, backend="gloo")
spec["log"] = {"every_steps": 10}
for o in overrides:  # dataset.train_limit=3200
    key, value = o.split("=", 1)
    *parents, leaf = key.split(".")
    node = spec
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = json.loads(value)
json.dump(spec, open(path, "w"), indent=2)
PY
"$build/bin/ddplab" plan "$spec" --grid replicas=1,2 batch=64,256,512 --target-loss "$target" --out "$out/plan"
held=()
for b in 256 512; do
  "$build/bin/ddplab" run "$spec" batch.per_replica=$b name=gpu_plan_held_$b
  held+=("$out/runs/gpu_plan_held_$b")
done
"$build/bin/ddplab" plan --check "$out/plan/plan.json" "${held[@]}"
