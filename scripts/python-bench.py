#!/usr/bin/env python3
"""The Python package against the C++ trainer and PyTorch DDP: the same model, global batch,
learning rate, thread settings and epochs, trained by
  cpp     build/bin/gyre train --np W                          (the C++ trainer)
  python  gyre run -np W -- python3 examples/python/train_fashion_mnist.py   (import gyre.torch)
  ddp     python3 build/bin/gyre_ddp_train.py --world W        (PyTorch DDP, gloo)
  ddp-malloc   the same with glibc's malloc keeping freed memory, as gyre.init() sets it
               (MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824)
taking turns, --repeat times, every process with 1 torch and 1 OpenBLAS thread. Prints each
run's samples/s and test accuracy, then per model the best and median of each runner and the
ratios python/cpp and python/ddp of the medians (the targets: >= 0.95 and, on the mlp, >= 1.5). A benchmark, not a test: docs/python.md quotes a run.

  scripts/python-bench.py [--models mlp,cnn] [--np 2] [--epochs 1] [--max-steps 0] [--repeat 3]
      [--runners cpp,python,ddp,ddp-malloc] [--build build] [--json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def last_json(text, what):
    """The last JSON object on a line of `text` (gyre run prefixes rank 0's lines with [0]<stdout>:)."""
    for line in reversed(text.splitlines()):
        if "{" in line:
            try:
                return json.loads(line[line.index("{"):])
            except json.JSONDecodeError:
                continue
    raise RuntimeError(f"{what}: no JSON line in its output:\n{text[-2000:]}")


def run(runner, model, a, build):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(build / "python"))
    if runner == "ddp-malloc":
        env.update(MALLOC_MMAP_THRESHOLD_="33554432", MALLOC_TRIM_THRESHOLD_="1073741824")
    common = ["--model", model, "--epochs", str(a.epochs), "--max-steps", str(a.max_steps), "--threads", "1"]
    with tempfile.TemporaryDirectory(prefix="gyre-pybench-") as tmp:
        if runner == "cpp":
            cmd = [str(build / "bin" / "gyre"), "train", "--np", str(a.np), "--json", "--run-dir", tmp] + common
        elif runner == "python":
            cmd = [str(build / "bin" / "gyre"), "run", "-np", str(a.np), "--", "/usr/bin/python3",
                   str(ROOT / "examples" / "python" / "train_fashion_mnist.py")] + common
        else:
            cmd = ["/usr/bin/python3", str(build / "bin" / "gyre_ddp_train.py"), "--world", str(a.np), "--eval",
                   "--skip-steps", "0"] + common
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    out = last_json(p.stdout, runner)
    return {"runner": runner, "model": model, "samples_per_s": out["samples_per_s"],
            "test_accuracy": out.get("test_accuracy"), "command": " ".join(cmd)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--runners", default="cpp,python,ddp,ddp-malloc")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--json", action="store_true", help="also print every run as a JSON line")
    a = p.parse_args()
    build = Path(a.build).resolve()
    runners = a.runners.split(",")
    rows = []
    for model in a.models.split(","):
        for i in range(a.repeat):
            for runner in runners:
                r = run(runner, model, a, build)
                rows.append(r)
                acc = f"{100 * r['test_accuracy']:.2f}%" if r["test_accuracy"] is not None else "-"
                print(f"{model} {runner:6} run {i + 1}: {r['samples_per_s']:9.0f} samples/s, test accuracy {acc}",
                      flush=True)
                if a.json:
                    print(json.dumps(r), flush=True)
    print(f"\n| model | runner | best samples/s | median samples/s | median test accuracy |")
    print("|---|---|---|---|---|")
    medians = {}
    for model in a.models.split(","):
        for runner in runners:
            mine = [r for r in rows if r["model"] == model and r["runner"] == runner]
            sps = [r["samples_per_s"] for r in mine]
            accs = [r["test_accuracy"] for r in mine if r["test_accuracy"] is not None]
            medians[model, runner] = statistics.median(sps)
            acc = f"{100 * statistics.median(accs):.2f}%" if accs else "-"
            print(f"| {model} | {runner} | {max(sps):,.0f} | {statistics.median(sps):,.0f} | {acc} |")
    print()
    for model in a.models.split(","):
        parts = []
        if "python" in runners and "cpp" in runners:
            parts.append(f"python/cpp {medians[model, 'python'] / medians[model, 'cpp']:.2f}")
        for ddp in ("ddp", "ddp-malloc"):
            if "python" in runners and ddp in runners:
                parts.append(f"python/{ddp} {medians[model, 'python'] / medians[model, ddp]:.2f}")
        print(f"{model}: " + ", ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
