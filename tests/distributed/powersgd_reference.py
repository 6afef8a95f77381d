"""PyTorch's own powerSGD_hook, recorded for tests/distributed/powersgd_test.cpp.

Two gloo ranks train a small fixed model with DistributedDataParallel and
torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook for a few steps on fixed batches, once
per configuration below. A wrapper around the hook records every bucket it was given, in call
order: its index, whether it is the last, its parameters (indices into model.parameters()), its
flat gradients before the hook and what the hook's future returned.

Writes into OUT_DIR: meta.json (configurations, parameter shapes, records without tensors, where
the seeds came from) and <config>_rank<r>.pt (torch.save of the list [input_0, output_0, input_1,
...] in record order).

PowerSGDState draws its seeds with NumPy's RandomState. Without NumPy (the project's venv has
torch only) a stand-in with NumPy's legacy algorithm is installed for that one use: MT19937
seeded by init_genrand, randint(high) as 32-bit draws masked to the bits of high - 1, those >=
high drawn again (checked equal to numpy 2.4.6 for seeds 0, 1, 7, 12345 and 2^32 - 1, 2000 draws
each). meta.json says which one ran.

Usage: python powersgd_reference.py OUT_DIR
"""
import json
import os
import random
import socket
import sys
import types

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

CONFIGS = [
    # Gram-Schmidt, error feedback and warm start across 4 compressed steps.
    {"name": "rank1", "rank": 1, "start_iter": 2, "error_feedback": True, "warm_start": True, "seed": 0},
    # QR (rank > 2), new random Qs every step, a conv weight and a 4 x 32 matrix left uncompressed.
    {"name": "rank4_cold", "rank": 4, "start_iter": 3, "error_feedback": True, "warm_start": False, "seed": 7},
    {"name": "rank2_no_feedback", "rank": 2, "start_iter": 2, "error_feedback": False, "warm_start": True, "seed": 3},
]
STEPS = 6
WORLD = 2


def has_numpy():
    try:
        import numpy  # noqa: F401

        return True
    except ImportError:
        return False


class StandInRandomState:
    """numpy.random.RandomState(seed).randint(high) for high <= 2^32, NumPy's legacy algorithm."""

    def __init__(self, seed):
        mt = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
        self._mt = random.Random()
        self._mt.setstate((3, tuple(mt) + (624,), None))

    def randint(self, high):
        mask = (1 << (high - 1).bit_length()) - 1
        while True:
            v = self._mt.getrandbits(32) & mask
            if v < high:
                return v


def power_sgd_state(psgd, **kwargs):
    """PowerSGDState(**kwargs); without NumPy, a stand-in module for its one `import numpy` (only
    while it is made: torch's other modules would take it for NumPy)."""
    if has_numpy():
        return psgd.PowerSGDState(**kwargs)
    stand_in = types.ModuleType("numpy")
    stand_in.random = types.SimpleNamespace(RandomState=StandInRandomState)
    sys.modules["numpy"] = stand_in
    try:
        return psgd.PowerSGDState(**kwargs)
    finally:
        del sys.modules["numpy"]


class Net(nn.Module):
    """Matrices of several shapes: two 32 x 32 apart (grouped by shape), a conv weight, 1-D biases
    and a 3 x 4 weight (never worth compressing). About 1.1 MB: DDP makes two buckets."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, padding=1)
        self.fc1 = nn.Linear(1024, 256)
        self.fc2 = nn.Linear(256, 32)
        self.fc3 = nn.Linear(32, 32)
        self.fc4 = nn.Linear(32, 16)
        self.fc5 = nn.Linear(32, 32)
        self.fc6 = nn.Linear(32, 4)
        self.fc7 = nn.Linear(4, 3)

    def forward(self, x):
        h = torch.flatten(F.relu(self.conv(x)), 1)
        h = F.relu(self.fc2(F.relu(self.fc1(h))))
        h = F.relu(self.fc4(F.relu(self.fc3(h))))
        h = F.relu(self.fc5(torch.cat([h, h], 1)))
        return self.fc7(F.relu(self.fc6(h)))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)


def run_config(config, rank, out_dir):
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

    torch.manual_seed(0)
    model = Net()
    index_of = {p.data_ptr(): i for i, p in enumerate(model.parameters())}
    ddp = DistributedDataParallel(model)
    state = power_sgd_state(
        psgd,
        process_group=None,
        matrix_approximation_rank=config["rank"],
        start_powerSGD_iter=config["start_iter"],
        use_error_feedback=config["error_feedback"],
        warm_start=config["warm_start"],
        random_seed=config["seed"],
    )
    records = []

    def recording_hook(state, bucket):
        record = {
            "index": bucket.index(),
            "last": bucket.is_last(),
            "params": [index_of[p.data_ptr()] for p in bucket.parameters()],
            "input": bucket.buffer().detach().clone(),
        }
        records.append(record)

        # Waited for here: the hook's later rounds are issued from callbacks, and with gloo a
        # second bucket's all-reduce could then be issued between them in another order on each
        # rank (a collective mismatch). Waiting changes no value.
        value = psgd.powerSGD_hook(state, bucket).wait()
        out = value if isinstance(value, torch.Tensor) else value[0]
        record["output"] = out.detach().clone()
        done = torch.futures.Future()
        done.set_result(out)
        return done

    ddp.register_comm_hook(state, recording_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = batch(step, rank)
        optimizer.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        optimizer.step()
    tensors = []
    for r in records:
        tensors += [r["input"], r["output"]]
    torch.save(tensors, os.path.join(out_dir, f"{config['name']}_rank{rank}.pt"))
    return [{k: r[k] for k in ("index", "last", "params")} for r in records], [list(p.shape) for p in model.parameters()]


def worker(rank, port, out_dir):
    seeds = "numpy" if has_numpy() else "stand-in for numpy.random.RandomState"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    meta = {"seeds": seeds, "world": WORLD, "steps": STEPS, "configs": []}
    for config in CONFIGS:
        records, shapes = run_config(config, rank, out_dir)
        meta["configs"].append(dict(config, records=records))
        meta["shapes"] = shapes
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(os.path.join(out_dir, "meta.json"), "w") as f:
            json.dump(meta, f)


def main():
    out_dir = sys.argv[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port, out_dir), nprocs=WORLD)


if __name__ == "__main__":
    main()
