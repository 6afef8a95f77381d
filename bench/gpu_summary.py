#!/usr/bin/env python3
"""The figures of a scripts/gpu-check.sh log, as the rows docs/performance.md's GPU tables take.

    bench/gpu_summary.py <out_dir>/gpu-check.txt

Reads the log the check wrote and prints Markdown: the card and torch; the GPU table's rows
(compare.sh at batch 64 and 512, ddplab eager, and at 64 with its step in a CUDA graph: steady
images/s, ratios, seconds outside training, from the process's start to the first step and to the
target accuracy); the bare loop eager against the same loop replayed from a CUDA graph; the time to
the target accuracy and the speed recipe's seeds, eager and with replicas.cuda_graph (with seed 1's
images/s per epoch, eager against graphed), and its seed 1 without the prewarm (its epochs' images/s
and seconds from the start of training beside the prewarmed seed 1's), with each run's prewarm
seconds (outside the clock); the profile's table; which steps failed or were skipped. A step the log
does not hold (skipped, failed before its figures) prints as "not in the log". The check runs it
last, so that its output ends with this.
"""
import re
import sys


def sections(text: str) -> dict:
    """Each step's lines, by the step's name (the text after "== ")."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("== "):
            name = line[3:].split(": skipped")[0]
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def card(lines: list) -> str:
    for line in lines:
        m = re.match(r"\|\s+\d+\s+(NVIDIA [^|]*?)\s+(On|Off)\s+\|", line)
        if m:
            return m.group(1)
    return "no GPU (a dry run)"


CELL = re.compile(r"never \([^)]*\)|[\d.]+ \([^)]*\)|[\d.]+|-")


def compare_row(lines: list, batch: int, gpu: str, world: str = "1") -> str:
    """The GPU table's row for one compare.sh step and one of its rows ("1", or "1+graph": ddplab
    with replicas.cuda_graph), or a row saying it is missing. compare.sh prints four tables, each
    with a row per label: steady images/s (ddplab, peer, bare loop, ddplab/peer, ddplab/bare), then
    seconds outside training, to the first step and to the target (ddplab, peer, bare loop)."""
    label = f"{batch}" if world == "1" else f"{batch}, ddplab with replicas.cuda_graph"
    tables = [CELL.findall(l[len(world):]) for l in lines if re.match(rf"{re.escape(world)}\s", l)]
    if len(tables) < 4 or len(tables[0]) < 5 or any(len(t) < 3 for t in tables[1:4]):
        return f"| {gpu} | {label} | not in the log | | | | | | | |"

    def images(cell):
        m = re.match(r"([\d.]+) \(([\d.]+)-([\d.]+)\)", cell)
        return f"{int(float(m[1])):,} ({int(float(m[2])):,}-{int(float(m[3])):,})" if m else cell

    def median(cell):  # "0.85 (0.80-0.90, 1 of 3 never)" -> "0.85 (1 of 3 never)"
        m = re.match(r"([\d.]+) \([^,)]*(?:, (.*))?\)", cell)
        return cell if not m else m[1] if not m[2] else f"{m[1]} ({m[2]})"

    speed, outside, first, target = tables[:4]
    d, p, b = (images(c) for c in speed[:3])
    seconds = [" / ".join(median(c) for c in t[:3]) for t in (outside, first, target)]
    return f"| {gpu} | {label} | {d} | {p} | {b} | {speed[3]} | {speed[4]} | " + " | ".join(seconds) + " |"


def bare_rows(lines: list) -> list:
    runs = {}
    for line in lines:
        if line.startswith("bare_loop "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            runs[(int(f["batch"]), f["mode"])] = float(f["images_per_s"])
    rows = []
    for batch in sorted({b for b, _ in runs}):
        eager, graph = runs.get((batch, "eager")), runs.get((batch, "graph"))
        ratio = f"{graph / eager:.2f}" if eager and graph else "-"
        rows.append(f"| {batch} | {eager:,.0f} | " if eager else f"| {batch} | - | ")
        rows[-1] += (f"{graph:,.0f} | {ratio} |" if graph else "- | - |")
    return rows or ["| not in the log | | | |"]


def main() -> int:
    text = open(sys.argv[1]).read()
    steps = sections(text)
    gpu = card(steps.get("machine", []))
    torch_line = next((l for l in steps.get("machine", []) if l.startswith("torch ")), "torch: not in the log")
    print(f"# GPU check summary\n\n{gpu}; {torch_line}\n")
    print("| card | batch | ddplab images/s | peer images/s | bare loop images/s | ddplab/peer | ddplab/bare "
          "| outside training, ddplab / peer / bare (s) | process start to first step, ddplab / peer / bare (s) "
          "| process start to target accuracy, ddplab / peer / bare (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for world, batch in (("1", 64), ("1", 512), ("1+graph", 64)):
        print(compare_row(steps.get(f"compare batch {batch}", []), batch, gpu, world))
    print("\nThe bare loop, eager and replayed from a CUDA graph (images/s over the timed steps):\n")
    print("| batch | eager | graph | graph / eager |\n| --- | --- | --- | --- |")
    print("\n".join(bare_rows(steps.get("bare loop: eager vs CUDA graph", []))))
    print("\nTime to target:\n")
    for name, lines in steps.items():
        if name.startswith("time to ") or name.startswith("speed recipe "):
            found = [l for l in lines if l.startswith("time to ") or re.search(r"never reached|is not above|is not below", l)
                     or re.match(r"epoch \d+: [\d.]+ images/s", l)]
            prewarm = re.findall(r"replicas\.prewarm_steps: .* ([\d.]+) s$", "\n".join(lines), re.M)
            if prewarm:
                found.append(f"prewarmed before the clock: {', '.join(prewarm)} s")
            print(f"- {name}: {'; '.join(found) if found else 'not in the log'}")
    profile = steps.get("profile: ddplab's steps vs the bare loop's", [])
    head = next((i for i, l in enumerate(profile) if l.startswith("trace ") and "ops/step" in l), None)
    table = [] if head is None else profile[head:profile.index("", head) if "" in profile[head:] else None]
    print("\nThe profile (host ms, operators and kernels per step, GPU busy):\n")
    print("\n".join(f"    {l}" for l in table) if table else "    not in the log")
    ends = [l for l in text.splitlines() if l.startswith("== failed:") or l.startswith("== skipped for the budget")]
    print("\n" + "\n".join(ends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
