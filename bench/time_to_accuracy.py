#!/usr/bin/env python3
"""Time to a target test accuracy over a sweep's runs (the speed recipe's check).

    bench/time_to_accuracy.py RUNS_DIR TARGET [--floor F] [--within S]

For every run under RUNS_DIR (each folder with an epochs.jsonl, e.g. a repeats sweep's seed=1 ..
seed=5) prints the first epoch whose test accuracy reaches TARGET and its wall_s (seconds from the
start of training, ddplab's records), then the mean and the spread over the runs. Exits 1 unless
every run reached TARGET; with --floor, also unless every run's last test accuracy is above F;
with --within, also unless the mean time is below S seconds (issue 29's criteria: 0.99, 0.989, 1.0).
"""
import argparse
import json
import pathlib
import statistics
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=pathlib.Path)
    ap.add_argument("target", type=float)
    ap.add_argument("--floor", type=float)
    ap.add_argument("--within", type=float)
    a = ap.parse_args()
    files = sorted(a.runs.glob("**/epochs.jsonl"))
    if not files:
        print(f"{a.runs}: no run (no epochs.jsonl below it)")
        return 1
    times, ok = [], True
    for f in files:
        records = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        if not records:
            print(f"{f.parent}: no epoch record")
            ok = False
            continue
        hit = next((r for r in records if r["test_acc"] >= a.target), None)
        last = records[-1]["test_acc"]
        if hit is None:
            print(f"{f.parent}: never reached {a.target:.2%} (last epoch {last:.4f})")
            ok = False
        else:
            times.append(hit["wall_s"])
            print(f"{f.parent}: {a.target:.2%} at epoch {hit['epoch']}, {hit['wall_s']:.3f} s "
                  f"(test accuracy {hit['test_acc']:.4f}, {hit['images_per_s']:.0f} images/s; last epoch {last:.4f})")
        if a.floor is not None and last <= a.floor:
            print(f"{f.parent}: last test accuracy {last:.4f} is not above {a.floor}")
            ok = False
    if times:
        spread = f", min {min(times):.3f}, max {max(times):.3f}" if len(times) > 1 else ""
        print(f"time to {a.target:.2%}: mean {statistics.mean(times):.3f} s over {len(times)} of {len(files)} runs{spread}")
        if a.within is not None and statistics.mean(times) >= a.within:
            print(f"the mean is not below {a.within} s")
            ok = False
    return 0 if ok and len(times) == len(files) else 1


if __name__ == "__main__":
    sys.exit(main())
