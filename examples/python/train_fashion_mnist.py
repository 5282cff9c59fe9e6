#!/usr/bin/env python3
"""Data-parallel training of a PyTorch model on Fashion-MNIST with gyre: a plain PyTorch script
plus the Horovod-style lines marked `# gyre`.

    gyre run -np 2 /usr/bin/python3 examples/python/train_fashion_mnist.py --model cnn --epochs 1

(PYTHONPATH=build/python when gyre is used from its build tree.) Prints one JSON line per epoch
on rank 0: samples/s over every worker, the mean loss, and the test accuracy.
"""
import argparse
import gzip
import json
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, Dataset

import gyre.torch as gyre  # gyre

DATA = "/usr/share/datasets/fashion-mnist"


def load(data_dir, split):
    with gzip.open(f"{data_dir}/{split}-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    with gzip.open(f"{data_dir}/{split}-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy((x - 0.2860) / 0.3530), torch.from_numpy(y)


class Images(Dataset):
    """Images in memory; indexed by a whole batch of indices at once (one gather per batch)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, indices):
        return self.x[indices], self.y[indices]


def make_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128, help="global batch; each worker takes BATCH / workers")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--max-steps", type=int, default=0, help="steps per epoch (0: the whole shard)")
    p.add_argument("--seed", type=int, default=0, help="the model's initial weights and the data order")
    p.add_argument("--compression", choices=["none", "fp16", "bf16"], default="none")
    p.add_argument("--data-dir", default=DATA)
    a = p.parse_args()

    gyre.init()  # gyre
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.batch % gyre.size() != 0:
        p.error(f"--batch {a.batch} must be a multiple of the {gyre.size()} workers")
    train = Images(*load(a.data_dir, "train"))
    test_x, test_y = load(a.data_dir, "t10k")
    sampler = gyre.DistributedSampler(train, shuffle=True, seed=a.seed)  # gyre
    loader = DataLoader(train, sampler=BatchSampler(sampler, a.batch // gyre.size(), drop_last=True),
                        batch_size=None)

    model = make_model(a.model)
    # foreach: one kernel for all parameters' update instead of a Python loop over them.
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, foreach=True)
    optimizer = gyre.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),  # gyre
                                          compression=getattr(gyre.Compression, a.compression))
    gyre.broadcast_parameters(model.state_dict(), root_rank=0)  # gyre
    gyre.broadcast_optimizer_state(optimizer, root_rank=0)  # gyre

    for epoch in range(1, a.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        steps, loss_sum = 0, 0.0
        start = time.perf_counter()
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            steps += 1
            if steps == a.max_steps:
                break
        gyre.barrier()  # gyre: time the slowest worker
        seconds = time.perf_counter() - start
        mean_loss = gyre.allreduce(torch.tensor(loss_sum / max(steps, 1))).item()  # gyre
        model.eval()
        with torch.no_grad():
            accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
        if gyre.rank() == 0:
            print(json.dumps({"epoch": epoch, "workers": gyre.size(), "model": a.model, "batch": a.batch,
                              "steps": steps, "seconds": round(seconds, 3),
                              "samples_per_s": round(steps * a.batch / seconds, 1), "loss": round(mean_loss, 4),
                              "test_accuracy": round(accuracy, 4)}), flush=True)


if __name__ == "__main__":
    main()
