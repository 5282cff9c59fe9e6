#!/usr/bin/env python3
"""The DDP baseline of `gyre bench train --baseline ddp`: PyTorch DistributedDataParallel with the
gloo backend (Debian's python3-torch; --backend gyre: gyre's torch.distributed backend) training the same models on Fashion-MNIST as gyre_train_worker,
with the same flags for steps, warm-up and threads. The build copies it next to gyre as
gyre_ddp_train.py. It starts its own WORLD processes (torch.multiprocessing) on this host.

Threads: torch's intra-op threads come from --threads; OpenBLAS reads OPENBLAS_NUM_THREADS when it
loads, so the caller sets that (gyre bench train does). Each process reports both as it sees them.

Prints one JSON object per epoch on stdout (rank 0):
  {"runner": "ddp", "epoch", "world", "model", "batch", "samples_per_s", "seconds", "steps",
   "torch_threads", "blas_threads", "loss"[, "test_accuracy"]}
where `steps` and `seconds` are the timed ones (the first --skip-steps steps of epoch 1 are not),
and samples_per_s counts every worker's samples."""
import argparse
import ctypes
import gzip
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load(data_dir, split):
    x = idx(f"{data_dir}/{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    y = idx(f"{data_dir}/{split}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy((x - 0.2860) / 0.3530), torch.from_numpy(y)


def make_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def blas_threads():
    """OpenBLAS's thread count in this process (0 when no OpenBLAS is loaded)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line and ".so" in line.split()[-1]}
    for path in sorted(paths):
        try:
            return int(ctypes.CDLL(path).openblas_get_num_threads())
        except (OSError, AttributeError):
            continue
    return 0


def run(rank, a, init_file):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.backend == "gyre":
        import gyre.torch.distributed  # noqa: F401  registers the backend
    dist.init_process_group(a.backend, init_method=f"file://{init_file}", rank=rank, world_size=a.world)
    xtr, ytr = load(a.data_dir, "train")
    net = DDP(make_model(a.model))
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
    b = a.batch // a.world
    g = torch.Generator().manual_seed(a.seed)
    for epoch in range(a.epochs):
        perm = torch.randperm(len(xtr), generator=g)[rank::a.world]
        steps = len(perm) // b
        if a.max_steps > 0:
            steps = min(steps, a.max_steps)
        skip = min(a.skip_steps, steps - 1) if epoch == 0 else 0
        loss = None
        t0 = None
        for s in range(steps):
            if s == skip:
                dist.barrier()
                t0 = time.perf_counter()
            i = perm[s * b:(s + 1) * b]
            opt.zero_grad()
            loss = F.cross_entropy(net(xtr[i]), ytr[i])
            loss.backward()
            opt.step()
        dist.barrier()
        seconds = time.perf_counter() - t0
        timed = steps - skip
        if rank == 0:
            out = {"runner": "ddp", "backend": a.backend, "epoch": epoch + 1, "world": a.world, "model": a.model, "batch": a.batch,
                   "samples_per_s": timed * b * a.world / seconds, "seconds": seconds, "steps": timed,
                   "torch_threads": torch.get_num_threads(), "blas_threads": blas_threads(),
                   "loss": loss.item()}
            if a.eval:
                xte, yte = load(a.data_dir, "t10k")
                with torch.no_grad():
                    out["test_accuracy"] = (net.module(xte).argmax(1) == yte).float().mean().item()
            print(json.dumps(out), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--backend", choices=["gloo", "gyre"], default="gloo",
                   help="torch.distributed's backend: gloo, or gyre's (gyre.torch.distributed)")
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="steps per epoch (0: the whole shard)")
    p.add_argument("--skip-steps", type=int, default=5, help="first steps of epoch 1 not timed")
    p.add_argument("--batch", type=int, default=128, help="global batch; per process BATCH / WORLD")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    p.add_argument("--data-dir", default=DEFAULT_DATA)
    p.add_argument("--eval", action="store_true", help="test accuracy after each epoch")
    a = p.parse_args()
    if a.world < 1 or a.batch % a.world != 0 or a.batch < a.world:
        p.error(f"--batch {a.batch} must be a positive multiple of --world {a.world}")
    for split in ("train", "t10k"):
        for part in ("images-idx3", "labels-idx1"):
            path = f"{a.data_dir}/{split}-{part}-ubyte.gz"
            if not os.path.exists(path):
                sys.exit(f"ddp_train: Fashion-MNIST is missing: no {path} "
                         "(install Debian's dataset-fashion-mnist or pass --data-dir)")
    with tempfile.TemporaryDirectory(prefix="gyre-ddp-") as tmp:
        mp.spawn(run, args=(a, os.path.join(tmp, "rendezvous")), nprocs=a.world)


if __name__ == "__main__":
    main()
