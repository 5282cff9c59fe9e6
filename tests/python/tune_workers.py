"""The driver side of tests/python/test_tune.py: Ray Tune programs on gyre.tune. `python3
tune_workers.py CASE [DIR]`; prints "CASE ok" at the end."""
import json
import os
import sys
import time

from gyre import tune
from workers import expect_error


def quadratic(config):
    """Reports a score that peaks at lr = 0.3 and grows with each iteration; keeps a checkpoint."""
    start = tune.start_iteration()
    for i in range(start + 1, 7):
        score = i - (config["lr"] - 0.3) ** 2 * 10 + (0.5 if config["opt"] == "adam" else 0) + config["layers"] * 0.01
        ckpt = os.path.join(tune.trial_dir(), "scratch")
        os.makedirs(ckpt, exist_ok=True)
        with open(os.path.join(ckpt, "state.json"), "w") as f:
            json.dump({"iteration": i, "lr": config["lr"]}, f)
        tune.report({"score": score}, checkpoint=tune.Checkpoint.from_directory(ckpt))
        time.sleep(config.get("pause", 0))


def case_fit(root):
    space = {"lr": tune.grid_search([0.1, 0.3, 0.9]), "opt": tune.choice(["sgd", "adam"]),
             "layers": tune.randint(1, 4), "momentum": tune.uniform(0.5, 0.9), "pause": 0}
    tuner = tune.Tuner(quadratic, param_space=space,
                       tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=2,
                                                   scheduler=tune.ASHAScheduler(max_t=6, grace_period=2,
                                                                                reduction_factor=2)),
                       run_config=tune.RunConfig(name="fit", storage_path=root, verbose=0))
    results = tuner.fit()
    assert len(results) == 6 and results.num_errors == 0, results
    for r in results:
        assert r.config["lr"] in (0.1, 0.3, 0.9) and r.config["opt"] in ("sgd", "adam"), r.config
        assert isinstance(r.config["layers"], int) and 1 <= r.config["layers"] < 4, r.config
        assert 0.5 <= r.config["momentum"] <= 0.9 and r.config["pause"] == 0, r.config
    stopped = [r for r in results if r.metrics["training_iteration"] < 6]
    assert stopped, "ASHA stopped no trial"
    best = results.get_best_result()
    assert best.config["lr"] == 0.3 and best.metrics["training_iteration"] == 6, (best.config, best.metrics)
    with open(os.path.join(best.checkpoint.path, "state.json")) as f:
        assert json.load(f)["iteration"] == 6, "the checkpoint is the last report's"
    worst = results.get_best_result(mode="min", scope="all")
    assert worst.metrics_history[0]["training_iteration"] == 1
    print("fit ok", flush=True)


def case_search(root):
    """TPE over loguniform and quniform parameters, then PBT (which hands trials each other's
    checkpoints: get_checkpoint in the trainable)."""
    space = {"lr": tune.loguniform(0.01, 1.0), "opt": "sgd", "layers": tune.quniform(1, 3, 1), "pause": 0}
    results = tune.Tuner(quadratic, param_space=space,
                         tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=4,
                                                     search_alg=tune.TPESearch(n_startup_trials=2)),
                         run_config=tune.RunConfig(name="tpe", storage_path=root, stop={"training_iteration": 2},
                                                   verbose=0)).fit()
    assert len(results) == 4 and results.num_errors == 0
    for r in results:
        assert 0.01 <= r.config["lr"] <= 1.0 and float(r.config["layers"]).is_integer(), r.config
    pbt = tune.PopulationBasedTraining(perturbation_interval=2, hyperparam_mutations=["lr"])
    results = tune.Tuner(resuming, param_space={"lr": tune.uniform(0.1, 0.5)},
                         tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=4, scheduler=pbt),
                         run_config=tune.RunConfig(name="pbt", storage_path=root, stop={"training_iteration": 4},
                                                   verbose=0)).fit()
    assert results.num_errors == 0 and all(r.metrics["training_iteration"] == 4 for r in results)
    # (whether PBT exploits here depends on the order the trials pause in: not asserted)
    # A run that fails is retried from its checkpoint (FailureConfig): get_checkpoint() gives it.
    results = tune.Tuner(fails_once, param_space={"lr": 0.5},
                         tune_config=tune.TuneConfig(metric="score", mode="max"),
                         run_config=tune.RunConfig(name="retry", storage_path=root, stop={"training_iteration": 4},
                                                   failure_config=tune.FailureConfig(max_failures=1),
                                                   verbose=0)).fit()
    r = results[0]
    assert results.num_errors == 0 and r.metrics["training_iteration"] == 4, (r.status, r.error)
    assert [m["score"] for m in r.metrics_history] == [0.5, 1.0, 1.5, 2.0], r.metrics_history
    print("search ok", flush=True)


def fails_once(config):
    """Reports lr x count; its first run dies after two reports, the retry goes on from the checkpoint."""
    checkpoint = tune.get_checkpoint()
    done = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "count")) as f:
            done = int(f.read())
    first_run = not os.path.exists(os.path.join(tune.trial_dir(), "ran"))
    open(os.path.join(tune.trial_dir(), "ran"), "w").close()
    for i in range(tune.start_iteration() + 1, 5):
        done += 1
        scratch = os.path.join(tune.trial_dir(), "scratch")
        os.makedirs(scratch, exist_ok=True)
        with open(os.path.join(scratch, "count"), "w") as f:
            f.write(str(done))
        tune.report({"score": config["lr"] * done}, checkpoint=tune.Checkpoint.from_directory(scratch))
        if first_run and i == 2:
            os._exit(3)  # as a crash: no cleanup


def resuming(config):
    """Counts its iterations in a checkpoint: a run handed a checkpoint (PBT, a retry) goes on from it."""
    checkpoint = tune.get_checkpoint()
    done = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "count")) as f:
            done = int(f.read())
    for i in range(tune.start_iteration() + 1, 5):
        done += 1
        os.makedirs(tune.checkpoint_dir(), exist_ok=True)
        with open(os.path.join(tune.checkpoint_dir(), "count"), "w") as f:
            f.write(str(done))
        tune.report(score=config["lr"] * done)


def failing(config):
    if config["x"] > 1:
        raise ValueError("x too large")
    tune.report(score=1.0)
    tune.report(score=2.0)


def case_errors(root):
    results = tune.Tuner(failing, param_space={"x": tune.grid_search([1, 2])},
                         tune_config=tune.TuneConfig(metric="score", mode="max"),
                         run_config=tune.RunConfig(name="errors", storage_path=root, stop={"training_iteration": 2},
                                                   verbose=0)).fit()
    assert results.num_errors == 1 and results[1].status == "ERROR", [(r.status, r.error) for r in results]
    assert "x too large" in open(os.path.join(results[1].path, "output.log")).read()
    assert results.get_best_result().config["x"] == 1
    expect_error(ValueError, ["metric= and mode="], tune.Tuner(failing).fit)
    expect_error(ValueError, ["0 < lower < upper"], tune.loguniform, 0, 1)
    expect_error(ValueError, ["training_iteration only"],
                 tune.Tuner(failing, param_space={"x": 1}, tune_config=tune.TuneConfig(metric="score", mode="max"),
                            run_config=tune.RunConfig(name="stop", storage_path=root, stop={"time": 3}))._command)
    print("errors ok", flush=True)


def case_slow(root):
    """For the interruption test: slow trials, one slot."""
    tune.Tuner(quadratic, param_space={"lr": tune.grid_search([0.1, 0.2, 0.3, 0.4]), "opt": "sgd", "layers": 1,
                                       "pause": 0.4},
               tune_config=tune.TuneConfig(metric="score", mode="max", max_concurrent_trials=1),
               run_config=tune.RunConfig(name="slow", storage_path=root, stop={"training_iteration": 6},
                                         verbose=0)).fit()


def case_restore(root):
    path = os.path.join(root, "slow")
    assert tune.Tuner.can_restore(path)
    results = tune.Tuner.restore(path).fit()
    assert len(results) == 4 and results.num_terminated == 4, [r.status for r in results]
    assert all(r.metrics["training_iteration"] == 6 for r in results)
    assert results.get_best_result().config["lr"] == 0.3
    print("restore ok", flush=True)


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]](sys.argv[2])
