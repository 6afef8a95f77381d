#!/usr/bin/env python3
"""Time to a target test accuracy over a sweep's runs (the speed recipe's check).

    bench/time_to_accuracy.py RUNS_DIR TARGET [--floor F] [--within S]

For every run under RUNS_DIR (each folder with an epochs.jsonl, e.g. a repeats sweep's seed=1 ..
seed=5) prints the first epoch whose test accuracy reaches TARGET and its wall_s (seconds from the
start of training, ddplab's records), then the mean and the spread over the runs; and, for runs
whose manifest has train_start, the same from the run's start (the manifest's start, written when
ddplab made the run directory, after LibTorch loaded and the spec was read: the start-up from there,
prewarm included, plus wall_s). Exits 1 unless
every run reached TARGET; with --floor, also unless every run's last test accuracy is above F;
with --within, also unless the mean time is below S seconds (issue 29's criteria: 0.99, 0.989, 1.0).
"""
import argparse
import datetime
import json
import pathlib
import statistics
import sys


def startup_s(run: pathlib.Path):
    """The manifest's train_start - start in seconds; None without them, or when the run restarted
    (its wall_s then leaves out the time between its processes)."""
    try:
        m = json.loads((run / "manifest.json").read_text())
        if "restarts" in m:
            return None
        t = [datetime.datetime.fromisoformat(m[k].replace("Z", "+00:00")).timestamp() for k in ("start", "train_start")]
        return t[1] - t[0]
    except (OSError, KeyError, ValueError, AttributeError):
        return None


def report(label: str, times: list, runs: int) -> None:
    spread = f", min {min(times):.3f}, max {max(times):.3f}" if len(times) > 1 else ""
    print(f"time to {label}: mean {statistics.mean(times):.3f} s over {len(times)} of {runs} runs{spread}")


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
    times, from_start, ok = [], [], True
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
            startup = startup_s(f.parent)
            if startup is not None:
                from_start.append(startup + hit["wall_s"])
            print(f"{f.parent}: {a.target:.2%} at epoch {hit['epoch']}, {hit['wall_s']:.3f} s "
                  f"(test accuracy {hit['test_acc']:.4f}, {hit['images_per_s']:.0f} images/s; last epoch {last:.4f})"
                  + ("" if startup is None else f"; {startup + hit['wall_s']:.3f} s from the run's start"))
        if a.floor is not None and last <= a.floor:
            print(f"{f.parent}: last test accuracy {last:.4f} is not above {a.floor}")
            ok = False
    if times:
        report(f"{a.target:.2%}", times, len(files))
        if from_start:
            report(f"{a.target:.2%} from the runs' start (start-up and prewarm included)", from_start, len(files))
        if a.within is not None and statistics.mean(times) >= a.within:
            print(f"the mean is not below {a.within} s")
            ok = False
    return 0 if ok and len(times) == len(files) else 1


if __name__ == "__main__":
    sys.exit(main())
