#!/usr/bin/env python3
"""Per-step summary of traces written by ddplab's log.profile_steps (profile-rank-<r>.pt.trace.json)
or bench/bare_loop's trace argument: Chrome traces of LibTorch's profiler whose steps are
"ProfilerStep#<n>" ranges.

    bench/step_profile.py TRACE [TRACE ...] [--ops N]

For each trace, medians over its steps (min-max):
  host ms      the step's ProfilerStep range: the host's time for the step, from fetching its
               batch to queuing its last kernel (on a GPU the kernels may run later)
  ops          operators the host dispatched in the step, top-level only (an operator called by
               another is part of it), on every thread (a GPU's backward runs on its own thread)
  kernels      GPU kernels, copies and memsets launched in the step (none on a CPU)
  GPU busy     the time some kernel, copy or memset ran, as a share of the window from the first
               step's start to the end of the last GPU work launched in the window: well under
               100% means the GPU waited for the host (launch overhead, a sync, the data)
With --ops N: the N operators with most calls per step, side by side for every trace, so that
what ddplab dispatches beyond the bare loop shows by name. A benchmark aid, not a test.
"""
import argparse
import collections
import json
import statistics
import sys

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def load(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    steps = sorted((e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    if not steps:
        sys.exit(f"{path}: no ProfilerStep# range (not a trace of ddplab's log.profile_steps or bench/bare_loop)")
    return events, steps


def top_level_ops(events):
    """cpu_op events not inside another cpu_op of their thread, as (ts, end, name)."""
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e.get("dur", 0), e["name"]))
    out = []
    for ops in by_thread.values():
        ops.sort(key=lambda o: (o[0], -o[1]))
        end = float("-inf")
        for op in ops:
            if op[0] >= end:
                out.append(op)
                end = op[1]
    return sorted(out)


def step_of(ts, steps):
    for i, s in enumerate(steps):
        if s["ts"] <= ts < s["ts"] + s["dur"]:
            return i
    return None


def summarise(path):
    events, steps = load(path)
    ops_per_step = [collections.Counter() for _ in steps]
    for ts, _, name in top_level_ops(events):
        i = step_of(ts, steps)
        if i is not None:
            ops_per_step[i][name] += 1
    launches = {e["args"]["correlation"]: e["ts"] for e in events  # runtime or driver API calls
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [0] * len(steps)
    intervals = []
    for e in events:
        if e.get("cat") not in GPU_CATEGORIES:
            continue
        i = step_of(launches.get(e.get("args", {}).get("correlation"), float("nan")), steps)
        if i is not None:
            kernels[i] += 1
            intervals.append((e["ts"], e["ts"] + e.get("dur", 0)))
    busy = None
    if intervals:
        intervals.sort()
        start, end = steps[0]["ts"], max(steps[-1]["ts"] + steps[-1]["dur"], max(b for _, b in intervals))
        covered, reach = 0.0, start
        for a, b in intervals:
            a = max(a, reach)
            if b > a:
                covered += b - a
                reach = b
        busy = covered / (end - start)
    return {"path": path, "steps": len(steps), "host_ms": [s["dur"] / 1000 for s in steps],
            "ops": [sum(c.values()) for c in ops_per_step], "kernels": kernels, "busy": busy,
            "op_names": sum(ops_per_step, collections.Counter())}


def spread(values, fmt):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--ops", type=int, default=0, help="list the N most called operators per step")
    args = parser.parse_args()
    rows = [summarise(p) for p in args.traces]
    print(f"{'trace':<48} {'steps':>5} {'host ms/step':>22} {'ops/step':>16} {'kernels/step':>16} {'GPU busy':>9}")
    for r in rows:
        gpu = f"{100 * r['busy']:.0f}%" if r["busy"] is not None else "-"
        kernels = spread(r["kernels"], "{:.0f}") if any(r["kernels"]) else "-"
        print(f"{r['path'][-48:]:<48} {r['steps']:>5} {spread(r['host_ms'], '{:.2f}'):>22} "
              f"{spread(r['ops'], '{:.0f}'):>16} {kernels:>16} {gpu:>9}")
    if args.ops:
        names = sum((r["op_names"] for r in rows), collections.Counter())
        print(f"\ncalls per step (mean over the steps), the {args.ops} most called operators")
        print(f"{'operator':<40}" + "".join(f" {i + 1:>10}" for i in range(len(rows))))
        for name, _ in names.most_common(args.ops):
            print(f"{name[:40]:<40}" + "".join(f" {r['op_names'][name] / r['steps']:>10.2f}" for r in rows))


if __name__ == "__main__":
    main()
