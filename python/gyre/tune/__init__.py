"""gyre.tune: Ray Tune's Python API on gyre tune (docs/tune.md).

    from gyre import tune

    def train(config):
        for epoch in range(1, 10):
            tune.report(accuracy=fit_one_epoch(config["lr"]))

    tuner = tune.Tuner(train, param_space={"lr": tune.loguniform(1e-4, 1e-1)},
                       tune_config=tune.TuneConfig(metric="accuracy", mode="max", num_samples=8,
                                                   scheduler=tune.ASHAScheduler(max_t=9)),
                       run_config=tune.RunConfig(name="lr", storage_path="runs"))
    best = tuner.fit().get_best_result()
    print(best.config, best.metrics["accuracy"])

A program that `gyre tune ... -- python3 train.py --lr {lr}` runs as its trials reports with the same
gyre.tune.report()."""
from ._report import (Checkpoint, checkpoint_dir, get_checkpoint, in_trial, report, start_iteration, stop_at,
                      trial_dir, trial_id)
from ._space import choice, grid_search, loguniform, quniform, randint, uniform
from ._tuner import (ASHAScheduler, AsyncHyperBandScheduler, BasicVariantGenerator, FailureConfig, FIFOScheduler,
                     HyperBandScheduler, MedianStoppingRule, PopulationBasedTraining, Result, ResultGrid, RunConfig,
                     TPESearch, TuneConfig, TuneError, Tuner)

__all__ = ["report", "in_trial", "start_iteration", "stop_at", "checkpoint_dir", "trial_dir", "trial_id", "Checkpoint",
           "get_checkpoint", "choice", "grid_search", "loguniform", "quniform", "randint", "uniform", "Tuner",
           "TuneConfig", "RunConfig", "FailureConfig", "ResultGrid", "Result", "FIFOScheduler", "ASHAScheduler",
           "AsyncHyperBandScheduler", "HyperBandScheduler", "MedianStoppingRule", "PopulationBasedTraining",
           "BasicVariantGenerator", "TPESearch", "TuneError"]
