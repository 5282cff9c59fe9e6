#!/usr/bin/env python3
"""torch.distributed's backend "gyre" against "gloo", in the same run (docs/python.md):

  ddp        the same DDP script (bench/ddp_train.py) with each backend, 2 processes, for each
             --models: samples/s and the final loss, runs alternating, the median of --repeat;
             beside them two 1-process runs at once with no communication, the bound of both;
  allreduce  dist.all_reduce from Python under `gyre run -np 2`, 4 KiB to 16 MiB, each backend:
             time and bus bandwidth; beside it gyre's C++ time at 4 KiB (`gyre bench collectives`).

    /usr/bin/python3 bench/torch_distributed.py [--build build] [--parts ddp,allreduce] [--json]

Prints one JSON object per row with --json, a table otherwise; the last rows are the ratios the
targets name (gyre/gloo samples/s per model; gyre/gloo bus bandwidth per size; Python's 4 KiB time
minus C++'s).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "/usr/bin/python3"

# The ranks' side of the allreduce part: `torch_distributed.py --allreduce-rank BACKEND ITERS`.
SIZES = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]


def allreduce_rank(backend, iters_cap):
    import torch
    import torch.distributed as dist
    import gyre.torch.distributed  # noqa: F401  registers "gyre"
    dist.init_process_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    for size in SIZES:
        t = torch.ones(size // 4)
        iters = max(10, min(iters_cap, (256 << 20) // size))
        for _ in range(max(3, iters // 10)):
            dist.all_reduce(t)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        seconds = (time.perf_counter() - start) / iters
        if rank == 0:
            print(json.dumps({"part": "allreduce", "backend": backend, "bytes": size, "iters": iters,
                              "time_us": seconds * 1e6, "busbw_GBps": size * 2 * (n - 1) / n / seconds / 1e9}),
                  flush=True)
    dist.destroy_process_group()


def environment(build, a=None):
    env = dict(os.environ)
    if a is not None and a.keep_freed_memory:  # glibc's own variables for what gyre.init() sets
        env.update(MALLOC_MMAP_THRESHOLD_="33554432", MALLOC_TRIM_THRESHOLD_="1073741824")
    env["PYTHONPATH"] = str(build / "python")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def rows_of(stdout):
    return [json.loads(line[line.index("{"):]) for line in stdout.splitlines() if "{" in line]


def ceiling(a, build, model):
    """Two 1-process runs of the script at once, 64 samples a step each, no communication: what two
    processes compute on this machine, the bound for any backend's 2-process samples/s."""
    procs = [subprocess.Popen([PYTHON, str(ROOT / "bench" / "ddp_train.py"), "--backend", "gloo", "--model", model,
                               "--max-steps", str(a.steps), "--world", "1", "--batch", "64"], env=environment(build, a),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    total = 0.0
    for p in procs:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            sys.exit(f"torch_distributed: the 1-process run failed:\n{err[-3000:]}")
        total += rows_of(out)[-1]["samples_per_s"]
    return total


def run_ddp(a, build):
    rows = []
    for model in a.models.split(","):
        bound = [ceiling(a, build, model) for _ in range(a.repeat)]
        got = {"gloo": [], "gyre": []}
        for _ in range(a.repeat):
            for backend in ("gloo", "gyre"):
                p = subprocess.run([PYTHON, str(ROOT / "bench" / "ddp_train.py"), "--backend", backend, "--model",
                                    model, "--max-steps", str(a.steps), "--world", "2"], env=environment(build, a),
                                   capture_output=True, text=True, timeout=1800)
                if p.returncode != 0:
                    sys.exit(f"torch_distributed: ddp_train.py --backend {backend} failed:\n{p.stderr[-3000:]}")
                got[backend].append(rows_of(p.stdout)[-1])
        for backend, runs in got.items():
            speeds = [r["samples_per_s"] for r in runs]
            rows.append({"part": "ddp", "model": model, "backend": backend, "world": 2,
                         "samples_per_s": statistics.median(speeds), "runs": [round(s) for s in speeds],
                         "loss": runs[-1]["loss"]})
        rows.append({"part": "ddp", "model": model, "backend": "none (2 independent processes)",
                     "samples_per_s": statistics.median(bound), "runs": [round(s) for s in bound]})
        rows.append({"part": "ddp", "model": model, "ratio": "gyre/gloo",
                     "value": rows[-2]["samples_per_s"] / rows[-3]["samples_per_s"],
                     "loss_difference": abs(rows[-2]["loss"] - rows[-3]["loss"])})
    return rows


def run_allreduce(a, build):
    gyre = str(build / "bin" / "gyre")
    rows = []
    for backend in ("gloo", "gyre"):
        p = subprocess.run([gyre, "run", "-np", "2", "--", PYTHON, __file__, "--allreduce-rank", backend,
                            str(a.iters)], env=environment(build), capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            sys.exit(f"torch_distributed: the {backend} all_reduce ranks failed:\n{p.stderr[-3000:]}")
        rows += rows_of(p.stdout)
    p = subprocess.run([gyre, "bench", "collectives", "--np", "2", "--min-bytes", "4096", "--max-bytes", "4096",
                        "--iters", str(a.iters), "--json"], env=environment(build), capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        sys.exit(f"torch_distributed: gyre bench collectives failed:\n{p.stderr[-3000:]}")
    cxx = rows_of(p.stdout)[-1]["time_us"]
    rows.append({"part": "allreduce", "backend": "gyre C++", "bytes": 4096, "time_us": cxx})
    by = {(r["backend"], r["bytes"]): r for r in rows}
    for size in SIZES:
        rows.append({"part": "allreduce", "bytes": size, "ratio": "gyre/gloo busbw",
                     "value": by[("gyre", size)]["busbw_GBps"] / by[("gloo", size)]["busbw_GBps"]})
    rows.append({"part": "allreduce", "bytes": 4096, "ratio": "python - C++ us",
                 "value": by[("gyre", 4096)]["time_us"] - cxx})
    return rows


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--allreduce-rank":
        return allreduce_rank(sys.argv[2], int(sys.argv[3]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"), help="gyre's build directory (bin/gyre, python/)")
    p.add_argument("--parts", default="ddp,allreduce")
    p.add_argument("--models", default="cnn,mlp")
    p.add_argument("--steps", type=int, default=300, help="DDP steps per run")
    p.add_argument("--repeat", type=int, default=3, help="DDP runs per backend and model (median)")
    p.add_argument("--keep-freed-memory", action="store_true",
                   help="run every DDP process with glibc keeping freed memory (what gyre.init() sets; "
                        "docs/python.md): the same for both backends")
    p.add_argument("--iters", type=int, default=2000, help="all_reduce calls per size, at most")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    build = Path(a.build).resolve()
    if not (build / "bin" / "gyre").exists() or not list((build / "python" / "gyre").glob("_C*.so")):
        p.error(f"{build} holds no gyre build with its Python package (bin/gyre, python/gyre/_C*.so)")
    parts = a.parts.split(",")
    unknown = set(parts) - {"ddp", "allreduce"}
    if unknown:
        p.error(f"unknown part(s) {', '.join(sorted(unknown))}: ddp, allreduce")
    rows = (run_ddp(a, build) if "ddp" in parts else []) + (run_allreduce(a, build) if "allreduce" in parts else [])
    for r in rows:
        if a.json:
            print(json.dumps(r))
        else:
            print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
