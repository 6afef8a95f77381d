"""The peer: PyTorch's own DistributedDataParallel (Python, gloo) on the same work as ddplab.

Same model (mnist_cnn: conv5x5x32-pool-conv5x5x64-pool-fc1024-dropout-fc10, "same" padding), same
data (the IDX files, normalized with the training set's mean/std), same order (randperm with seed +
epoch, contiguous shares of each global batch), same optimizer (SGD at a constant lr 0.05 with
momentum 0.9), same thread budget (cores / world), on CUDA the same pinned-memory asynchronous
copies. Prints training images/s of the last epoch, measured like ddplab's epoch_s (training steps
only, no evaluation), and train_s, the seconds of all epochs with their evaluations, as ddplab's
wall_s (bench/compare.sh subtracts them from the process's wall time to get what the peer spends
outside training: start-up above all). Like ddplab, rank 0 evaluates the first --test-limit test
images after each epoch; the line also gives the Unix times of the first step's start
(train_start_unix) and of the end of the first evaluation at or above --target test accuracy
(target_unix, "-" when none), from which compare.sh takes the seconds from the process's start to
the first step and to the target.

  .venv/bin/python bench/peer_ddp.py --world 2 --per-replica 64 --train-limit 20000
"""
import argparse
import gzip
import os
import socket
import struct
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def find(root, name):
    for candidate in (name, name + ".gz"):
        if os.path.exists(os.path.join(root, candidate)):
            return os.path.join(root, candidate)
    raise FileNotFoundError(os.path.join(root, name))


class MnistCnn(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 1024)
        self.fc2 = nn.Linear(1024, 10)
        self.dropout = dropout

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.dropout(x, self.dropout, self.training)
        return self.fc2(x)


def evaluate(model, x, y):
    """Test accuracy on (x, y), in batches of 1,000 as ddplab evaluates."""
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum()) for i in range(0, len(y), 1000))
    model.train()
    return correct / max(1, len(y))


def worker(rank, args, port, result):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(max(1, os.cpu_count() // args.world))
    device = torch.device("cuda", rank % torch.cuda.device_count()) if args.device == "cuda" else torch.device("cpu")
    if args.world > 1:
        dist.init_process_group(args.backend, rank=rank, world_size=args.world)
    images = read_idx(find(args.root, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.root, "train-labels-idx1-ubyte")).long()
    if args.train_limit:
        images, labels = images[: args.train_limit], labels[: args.train_limit]
    images = images.unsqueeze(1)
    mean = images.double().div(255).mean().item()
    std = images.double().div(255).std(unbiased=False).item()
    test_x = read_idx(find(args.root, "t10k-images-idx3-ubyte"))[: args.test_limit].unsqueeze(1)
    test_x = ((test_x.float().div(255) - mean) / std).to(device)
    test_y = read_idx(find(args.root, "t10k-labels-idx1-ubyte"))[: args.test_limit].long().to(device)
    torch.manual_seed(args.seed)
    model = MnistCnn(args.dropout).to(device)
    if args.world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    global_batch = args.per_replica * args.world
    steps = images.shape[0] // global_batch
    rate, train_s, train_start, target_time = 0.0, 0.0, None, None
    for epoch in range(args.epochs):
        perm = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(args.seed + epoch))
        model.train()
        start = time.perf_counter()
        train_start = train_start or time.time()
        for t in range(steps):
            idx = perm[t * global_batch + rank * args.per_replica: t * global_batch + (rank + 1) * args.per_replica]
            x = (images[idx].float().div(255) - mean) / std
            y = labels[idx]
            if device.type == "cuda":  # as DataLoader(pin_memory=True): an asynchronous copy
                x, y = x.pin_memory(), y.pin_memory()
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
        rate = steps * global_batch / elapsed
        if rank == 0 and evaluate(getattr(model, "module", model), test_x, test_y) >= args.target:
            target_time = target_time or time.time()
        train_s += time.perf_counter() - start  # the evaluation included, as in ddplab's wall_s
    if rank == 0:
        result.put((rate, train_s, train_start, target_time))
    if args.world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--per-replica", type=int, default=64)
    p.add_argument("--train-limit", type=int, default=20000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--test-limit", type=int, default=10000)
    p.add_argument("--target", type=float, default=0.75)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    result = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, port, result)) for r in range(args.world)]
    for pr in procs:
        pr.start()
    rate, train_s, train_start, target_time = result.get()
    for pr in procs:
        pr.join()
    print(f"peer_ddp world={args.world} per_replica={args.per_replica} device={args.device} "
          f"train_s={train_s:.3f} images_per_s={rate:.1f} train_start_unix={train_start:.3f} "
          f"target_unix={'-' if target_time is None else f'{target_time:.3f}'}")


if __name__ == "__main__":
    main()
