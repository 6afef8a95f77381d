#!/usr/bin/env bash
# Does a stopped and resumed local SGD / EASGD run give the uninterrupted run's records? For each
# sync, trains Fashion-MNIST's mlp on 2 processes for 3 epochs uninterrupted, then the same spec
# stopped by debug fault `stop` (rank 1, step 13, between averaging points) and run again, and
# prints the test accuracy, test loss and replica drift of each epoch of both (docs/ddp-semantics.md,
# "Second review", item 1).
#   scripts/resume-exactness.sh [ddplab binary, default build/bin/ddplab] [work dir, default a temp dir]
set -euo pipefail
bin=$(realpath "${1:-build/bin/ddplab}")
work=${2:-$(mktemp -d)}
cd "$work"
for sync in '{"local_sgd": {"period": 4}}' '{"easgd": {"period": 4, "alpha": 0.25}}'; do
  name=$(echo "$sync" | grep -o '"[a-z_]*"' | head -1 | tr -d '"')
  SYNC="$sync" NAME="$name" python3 - <<'PY'
import json, os
s = {"name": "full_" + os.environ["NAME"], "dataset": {"name": "fashion-mnist"},
     "model": {"name": "mlp", "hidden": 128, "dropout": 0.0},
     "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9}, "batch": {"global": 128},
     "replicas": {"count": 2, "threads": 1, "sync": json.loads(os.environ["SYNC"])}, "epochs": 3, "seed": 1}
json.dump(s, open("full.json", "w"))
s["name"] = "stopped_" + os.environ["NAME"]
s["debug"] = {"fault": "stop", "rank": 1, "step": 13}
json.dump(s, open("stopped.json", "w"))
PY
  "$bin" run full.json --force >/dev/null 2>&1
  "$bin" run stopped.json --force >/dev/null 2>&1 || true  # stops with 143 on purpose
  "$bin" run stopped.json >/dev/null 2>&1
  NAME="$name" python3 - <<'PY'
import json, os
n = os.environ["NAME"]
for label, run in (("uninterrupted", "full_" + n), ("resumed", "stopped_" + n)):
    recs = [json.loads(l) for l in open(f"runs/{run}/seed=1/epochs.jsonl")]
    print(f"{n:9} {label:13}", [(round(100 * r["test_acc"], 2), r["test_loss"], r["replica_drift"]) for r in recs])
PY
done
echo "runs in $work/runs"
