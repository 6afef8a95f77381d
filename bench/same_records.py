#!/usr/bin/env python3
"""Whether two runs wrote the same epoch records, the fields that time the machine aside.

    bench/same_records.py RUN_A RUN_B

Compares RUN_A/epochs.jsonl with RUN_B/epochs.jsonl field by field, leaving out the fields that
time or load the machine, known by their names as rundir::EpochRecord::machine_fields knows them
(ending in _s, or starting with host_).
Prints "same records" or every field that differs with both values, and each run's images/s and
wall_s (seconds from the start of training to the epoch's end) side by side, epoch by epoch: what
the one change between them bought. Exits 1 when they differ.
"""
import json
import pathlib
import sys


def records(run: pathlib.Path):
    return [json.loads(line) for line in (run / "epochs.jsonl").read_text().splitlines() if line.strip()]


def machine(field: str) -> bool:
    return field.endswith("_s") or field.startswith("host_")


def main() -> int:
    a_dir, b_dir = map(pathlib.Path, sys.argv[1:3])
    a, b = records(a_dir), records(b_dir)
    differ = [] if len(a) == len(b) else [f"{len(a)} epochs against {len(b)}"]
    for ra, rb in zip(a, b):
        for k in sorted(set(ra) | set(rb)):
            if not machine(k) and ra.get(k) != rb.get(k):
                differ.append(f"epoch {ra.get('epoch')}: {k} {ra.get(k)} against {rb.get(k)}")
    for ra, rb in zip(a, b):
        print(f"epoch {ra['epoch']}: {ra['images_per_s']:.0f} images/s, {ra['wall_s']:.2f} s of training ({a_dir}) "
              f"against {rb['images_per_s']:.0f} images/s, {rb['wall_s']:.2f} s ({b_dir})")
    print("same records, timing fields aside" if not differ else "\n".join(["records differ:"] + differ))
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
