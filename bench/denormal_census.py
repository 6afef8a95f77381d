#!/usr/bin/env python3
"""Where a CPU run's denormal (subnormal) floats are: the quickstart's work in PyTorch, counted.

    .venv/bin/python bench/denormal_census.py [--data DIR] [--images 40000] [--epochs 2]
                                              [--threads 2] [--flush]

Trains bench/peer_ddp.py's MnistCnn as experiments/quickstart.json does (SGD at lr 0.05, momentum
0.9, batch 64, dropout 0.5; the lr held constant) on the first --images Fashion-MNIST training
images, one process. Every 100th step it counts the subnormal values of each layer's output and
output gradient, of the softmax, and of each parameter, its gradient and its momentum buffer; and,
for fc1's weight, how many gradients were exactly 0, how many subnormal momentum values sat where
the gradient was 0, how many of those were 4 units in the last place or fewer (the values that
a momentum of 0.9 keeps: 0.9 x k rounds back to k), and how many of fc1's units (rows) and inputs
(columns) had an all-zero gradient. Prints each epoch's training images/s and the counts summed
over its probed steps.

--flush calls torch.set_flush_denormal(True), which sets the calling thread only: with --threads
above 1, the intra-op pool's other threads keep computing denormals. Under it the counts read 0
whatever the values (DAZ makes a comparison read a denormal as 0): count without it.
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F

from peer_ddp import MnistCnn, find, read_idx


def subnormal(t):
    return int(((t != 0) & (t.abs() < torch.finfo(torch.float32).tiny)).sum())


def census(model, opt, outputs, softmax):
    row = {"softmax": subnormal(softmax)}
    for name, out in outputs.items():
        row[f"output {name}"] = subnormal(out)
        row[f"output gradient {name}"] = subnormal(out.grad)
    for name, p in model.named_parameters():
        row[f"weight {name}"] = subnormal(p)
        row[f"gradient {name}"] = subnormal(p.grad)
        row[f"momentum {name}"] = subnormal(opt.state[p]["momentum_buffer"])
    g, m = model.fc1.weight.grad, opt.state[model.fc1.weight]["momentum_buffer"]
    tiny = (m != 0) & (m.abs() < torch.finfo(torch.float32).tiny)
    row["fc1.weight: gradients exactly 0"] = int((g == 0).sum())
    row["fc1.weight: subnormal momentum where the gradient is 0"] = int((tiny & (g == 0)).sum())
    # A float32 of k <= 4 units in the last place, times 0.9, rounds back to k units: stuck there.
    row["fc1.weight: subnormal momentum of 4 units in the last place or fewer"] = int(
        (tiny & (m.abs() <= 4 * torch.finfo(torch.float32).smallest_normal / 2**23)).sum())
    row["fc1.weight: units with an all-zero gradient row"] = int((g == 0).all(1).sum())
    row["fc1.weight: inputs with an all-zero gradient column"] = int((g == 0).all(0).sum())
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--images", type=int, default=40000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flush", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(args.flush)
    images = read_idx(find(args.data, "train-images-idx3-ubyte"))[:args.images]
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte"))[:args.images].long()
    mean, std = images.double().div(255).mean().item(), images.double().div(255).std(unbiased=False).item()
    model = MnistCnn(0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    outputs = {}
    for name in ("conv1", "conv2", "fc1", "fc2"):
        getattr(model, name).register_forward_hook(lambda m, i, o, name=name: outputs.__setitem__(name, o))
    steps = args.images // 64
    for epoch in range(args.epochs):
        perm = torch.randperm(args.images, generator=torch.Generator().manual_seed(1 + epoch))
        counts, start = {}, time.time()
        for s in range(steps):
            idx = perm[s * 64:(s + 1) * 64]
            out = model(((images[idx].float().div(255) - mean) / std).unsqueeze(1))
            probe = s % 100 == 99
            if probe:
                for o in outputs.values():
                    o.retain_grad()
            opt.zero_grad()
            F.cross_entropy(out, labels[idx]).backward()
            opt.step()
            if probe:
                for k, v in census(model, opt, outputs, F.softmax(out.detach(), 1)).items():
                    counts[k] = counts.get(k, 0) + v
        print(f"epoch {epoch + 1}: {steps * 64 / (time.time() - start):.0f} images/s (threads {args.threads}, "
              f"flush {args.flush}); over its {steps // 100} probed steps, summed:")
        for k, v in counts.items():
            if v:
                print(f"   {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
