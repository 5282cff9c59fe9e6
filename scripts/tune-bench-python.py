#!/usr/bin/env python3
"""gyre.tune's Tuner from Python against `gyre tune` on the same grid (docs/tune.md, "Measured"): the
mlp on Fashion-MNIST for 9 epochs, lr x momentum x batch (27 configurations), ASHA with eta 3 (Ray's
ASHAScheduler, gyre tune's asha-stop), 2 slots of one thread each. gyre tune trains with its
built-in trials (gyre train); the Tuner with a function trainable in PyTorch (the model and data of
examples/python/train_fashion_mnist.py). Prints each one's best test accuracy and the difference
(target: within 0.5 pt).

    PYTHONPATH=build/python /usr/bin/python3 scripts/tune-bench-python.py [OUT] [--quick]
"""
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "python"))

from gyre import tune  # noqa: E402

GRID = {"lr": [0.01, 0.03, 0.1], "momentum": [0, 0.5, 0.9], "batch": [32, 64, 128]}


def trainable(config):
    import torch
    import torch.nn.functional as F
    spec = importlib.util.spec_from_file_location("example", config["example"])
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = example.load(example.DATA, "train")
    test_x, test_y = example.load(example.DATA, "t10k")
    model = example.make_model("mlp")
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"], foreach=True)
    generator = torch.Generator().manual_seed(0)
    for epoch in range(1, config["epochs"] + 1):
        model.train()
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y) - config["batch"] + 1, config["batch"]):
            idx = order[start:start + config["batch"]]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
        tune.report(accuracy=accuracy)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else
               f"runs/tune-bench-python-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    epochs = 3 if "--quick" in sys.argv else 9
    out.mkdir(parents=True, exist_ok=True)
    gyre = ROOT / "build" / "bin" / "gyre"
    start = time.monotonic()
    cli = subprocess.run([str(gyre), "tune", "--model", "mlp", "--slots", "2", "--threads", "1", "--max-t", str(epochs),
                          "--metric", "accuracy", "--mode", "max", "--progress", "off", "--json",
                          "--scheduler", "asha-stop", "--eta", "3", "--dir", str(out / "cli")]
                         + [a for k, v in GRID.items() for a in ("--param", f"{k}=grid:{','.join(map(str, v))}")],
                         capture_output=True, text=True, check=True)
    cli_summary = json.loads([line for line in cli.stdout.splitlines() if line.startswith("{")][-1])
    cli_s = time.monotonic() - start
    start = time.monotonic()
    space = {k: tune.grid_search(v) for k, v in GRID.items()}
    space.update(epochs=epochs, example=str(ROOT / "examples" / "python" / "train_fashion_mnist.py"))
    results = tune.Tuner(trainable, param_space=space,
                         tune_config=tune.TuneConfig(metric="accuracy", mode="max", max_concurrent_trials=2,
                                                     scheduler=tune.ASHAScheduler(max_t=epochs, grace_period=1,
                                                                                  reduction_factor=3)),
                         run_config=tune.RunConfig(name="python", storage_path=str(out), verbose=0)).fit()
    py_s = time.monotonic() - start
    best = results.get_best_result(scope="all")
    py_best = max(m["accuracy"] for m in best.metrics_history)
    py_epochs = sum(len(r.metrics_history) for r in results)
    row = {"gyre_tune_best_accuracy": cli_summary["best_accuracy"], "gyre_tune_config": cli_summary["best_config"],
           "gyre_tune_worker_epochs": cli_summary["worker_iterations"], "gyre_tune_wall_s": round(cli_s, 1),
           "python_best_accuracy": py_best, "python_config": {k: best.config[k] for k in GRID},
           "python_worker_epochs": py_epochs, "python_wall_s": round(py_s, 1),
           "difference_pt": round(100 * (py_best - cli_summary["best_accuracy"]), 2)}
    print(json.dumps(row), flush=True)
    verdict = "PASS" if abs(row["difference_pt"]) <= 0.5 else "MISS"
    print(f"gyre tune (asha-stop, gyre train): {100 * row['gyre_tune_best_accuracy']:.2f}% in {cli_s:.0f} s; "
          f"gyre.tune.Tuner (ASHAScheduler, PyTorch): {100 * py_best:.2f}% in {py_s:.0f} s; "
          f"{row['difference_pt']:+.2f} pt ({verdict}, target within 0.5)")


if __name__ == "__main__":
    main()
