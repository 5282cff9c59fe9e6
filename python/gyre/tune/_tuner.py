"""gyre.tune.Tuner: Ray Tune's Tuner on gyre tune (docs/tune.md). fit() writes the trainable and the
space into the experiment's directory and runs `gyre tune` there with a trial command that calls
the trainable (python3 -m gyre.tune._trial), so every scheduler, searcher and executor of gyre tune
(local slots, hosts, Slurm) and its restore work as they do from the command line; the ResultGrid
is read from the experiment's state.json."""
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gyre.rt import _serialization

from ._space import Domain

__all__ = ["Tuner", "TuneConfig", "RunConfig", "FailureConfig", "ResultGrid", "Result", "FIFOScheduler",
           "ASHAScheduler", "AsyncHyperBandScheduler", "HyperBandScheduler", "MedianStoppingRule",
           "PopulationBasedTraining", "BasicVariantGenerator", "TPESearch", "TuneError"]

TRAINABLE = "trainable.pkl"
_NO_SEARCH = "gyre_constants_only"  # the grid point of a space without search (_command)


class TuneError(RuntimeError):
    """gyre tune failed (a trainable that reports no metric, a bad option): its own words."""


# Schedulers: each is gyre tune's --scheduler and its options.
@dataclasses.dataclass
class FIFOScheduler:
    def args(self):
        return ["--scheduler", "fifo"]


@dataclasses.dataclass
class ASHAScheduler:
    """Asynchronous successive halving (Ray's ASHAScheduler): trials below the top 1/reduction_factor
    of their rung stop."""
    max_t: int = 100
    grace_period: int = 1
    reduction_factor: float = 4
    time_attr: str = "training_iteration"
    metric: str = None
    mode: str = None

    def args(self):
        _iterations(self.time_attr)
        return ["--scheduler", "asha-stop", "--grace-period", str(self.grace_period), "--eta",
                str(self.reduction_factor)]


AsyncHyperBandScheduler = ASHAScheduler


@dataclasses.dataclass
class HyperBandScheduler:
    max_t: int = 81
    reduction_factor: float = 3
    time_attr: str = "training_iteration"
    metric: str = None
    mode: str = None

    def args(self):
        _iterations(self.time_attr)
        return ["--scheduler", "hyperband", "--eta", str(self.reduction_factor)]


@dataclasses.dataclass
class MedianStoppingRule:
    grace_period: int = 1
    min_samples_required: int = 3
    time_attr: str = "training_iteration"
    metric: str = None
    mode: str = None

    def args(self):
        _iterations(self.time_attr)
        return ["--scheduler", "median", "--grace-period", str(self.grace_period), "--min-samples",
                str(self.min_samples_required)]


@dataclasses.dataclass
class PopulationBasedTraining:
    perturbation_interval: int = 1
    quantile_fraction: float = 0.25
    resample_probability: float = 0.25
    hyperparam_mutations: object = None  # the names to mutate (a dict's keys, or a list); default all
    time_attr: str = "training_iteration"
    metric: str = None
    mode: str = None

    def args(self):
        _iterations(self.time_attr)
        a = ["--scheduler", "pbt", "--perturbation-interval", str(self.perturbation_interval), "--quantile",
             str(self.quantile_fraction), "--resample-probability", str(self.resample_probability)]
        if self.hyperparam_mutations:
            a += ["--pbt-mutate", ",".join(self.hyperparam_mutations)]
        return a


def _iterations(time_attr):
    if time_attr != "training_iteration":
        raise ValueError(f"gyre.tune: schedulers count reports (training_iteration), not {time_attr!r}")


@dataclasses.dataclass
class BasicVariantGenerator:
    """Random draws, with grids crossed (Ray's default)."""
    random_state: int = 0

    def args(self):
        return ["--search", "random", "--seed", str(self.random_state)]


@dataclasses.dataclass
class TPESearch:
    """The tree-structured Parzen estimator (Optuna's and HyperOpt's default)."""
    n_startup_trials: int = 10
    seed: int = 0

    def args(self):
        return ["--search", "tpe", "--tpe-startup", str(self.n_startup_trials), "--seed", str(self.seed)]


@dataclasses.dataclass
class TuneConfig:
    metric: str = None
    mode: str = None
    num_samples: int = 1
    scheduler: object = None
    search_alg: object = None
    max_concurrent_trials: int = None
    # gyre's: where trials run. "local" (this host's slots), "slurm" (sbatch), or hosts "a:2,b:2"
    executor: str = "local"
    np: int = 1  # processes of each trial (gyre run -np), for a trainable that is itself distributed


@dataclasses.dataclass
class FailureConfig:
    max_failures: int = 0


@dataclasses.dataclass
class RunConfig:
    name: str = None
    storage_path: str = None  # default ~/gyre_results (Ray's ~/ray_results)
    stop: dict = None         # {"training_iteration": N}
    failure_config: FailureConfig = None
    verbose: int = 1


@dataclasses.dataclass
class Result:
    config: dict
    metrics: dict        # the last report's metrics, with training_iteration
    path: str            # the trial's directory
    checkpoint: object   # a Checkpoint of the trial's checkpoint directory, or None
    error: object        # TuneError of a trial that failed, else None
    metrics_history: list = dataclasses.field(default_factory=list)
    status: str = ""

    @property
    def best_metric(self):
        return self.metrics


class ResultGrid:
    """The trials of an experiment: len(), [i], iteration, get_best_result(), errors."""

    def __init__(self, results, metric, mode, path):
        self._results, self._metric, self._mode, self.experiment_path = results, metric, mode, path

    def __len__(self):
        return len(self._results)

    def __getitem__(self, i):
        return self._results[i]

    def __iter__(self):
        return iter(self._results)

    @property
    def errors(self):
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self):
        return len(self.errors)

    @property
    def num_terminated(self):
        return sum(r.status == "TERMINATED" for r in self._results)

    def get_best_result(self, metric=None, mode=None, scope="last", filter_nan_and_inf=True):
        """The trial whose `metric` is best: in its last report (scope="last", Ray's default) or in
        any (scope="all")."""
        metric, mode = metric or self._metric, mode or self._mode
        if metric is None or mode not in ("min", "max"):
            raise ValueError("gyre.tune: get_best_result needs a metric and a mode (min or max), here or in "
                             "TuneConfig")
        best, best_value = None, None
        for r in self._results:
            values = [m.get(metric) for m in (r.metrics_history if scope == "all" else [r.metrics])]
            values = [v for v in values if isinstance(v, (int, float)) and not (filter_nan_and_inf and
                                                                                not math.isfinite(v))]
            if not values:
                continue
            v = max(values) if mode == "max" else min(values)
            if best is None or (v > best_value if mode == "max" else v < best_value):
                best, best_value = r, v
        if best is None:
            raise RuntimeError(f"gyre.tune: no trial reported {metric!r}")
        return best

    def __repr__(self):
        return f"ResultGrid({len(self)} trials, {self.num_errors} errors, {self.experiment_path})"


def _gyre_tool():
    """The gyre tool: GYRE_TOOL, the build's (beside this package in BUILD/python), or gyre on PATH."""
    given = os.environ.get("GYRE_TOOL")
    if given:
        return given
    beside = Path(__file__).resolve().parents[3] / "bin" / "gyre"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("gyre")
    if found is None:
        raise TuneError("gyre.tune: the gyre tool is not found (set GYRE_TOOL, or install gyre)")
    return found


class Tuner:
    """Ray Tune's Tuner: Tuner(trainable, param_space={...}, tune_config=TuneConfig(...),
    run_config=RunConfig(...)).fit() -> ResultGrid. `trainable(config)` reports with
    gyre.tune.report(...) (and may return a last dict of metrics)."""

    def __init__(self, trainable=None, *, param_space=None, tune_config=None, run_config=None, _resume=None):
        self._trainable = trainable
        self._space = dict(param_space or {})
        self._tune = tune_config or TuneConfig()
        self._run = run_config or RunConfig()
        self._resume = _resume
        if _resume is None:
            if not callable(trainable):
                raise TypeError("gyre.tune.Tuner: trainable must be a function of the config")
            for name in self._space:
                if not isinstance(name, str) or not name.replace("_", "").isalnum():
                    raise ValueError(f"gyre.tune.Tuner: parameter name {name!r} must be letters, digits and _")
            self._path = self._experiment_path()
        else:
            self._path = _resume

    @classmethod
    def restore(cls, path, trainable=None, **unused):
        """The experiment in `path` (its tuner was stopped or killed): fit() finishes it."""
        path = str(Path(path).expanduser().resolve())
        if not (Path(path) / TRAINABLE).is_file():
            raise ValueError(f"gyre.tune.Tuner.restore: {path} holds no gyre.tune experiment ({TRAINABLE} missing)")
        with open(Path(path) / TRAINABLE, "rb") as f:
            saved = _serialization.loads(f.read())
        tuner = cls(saved["trainable"], _resume=path)
        tuner._tune = saved["tune_config"]
        tuner._run = saved["run_config"]
        return tuner

    @staticmethod
    def can_restore(path):
        return (Path(path).expanduser() / TRAINABLE).is_file() and (Path(path).expanduser() / "experiment.json").is_file()

    def _experiment_path(self):
        root = Path(self._run.storage_path or "~/gyre_results").expanduser()
        name = self._run.name or time.strftime("tune-%Y%m%d-%H%M%S")
        return str((root / name).resolve())

    def _metric_and_mode(self):
        metric, mode = self._tune.metric, self._tune.mode
        scheduler = self._tune.scheduler
        metric = metric or getattr(scheduler, "metric", None)
        mode = mode or getattr(scheduler, "mode", None)
        if metric is None or mode not in ("min", "max"):
            raise ValueError("gyre.tune.Tuner: TuneConfig needs metric= and mode= ('min' or 'max'), which gyre tune "
                             "schedules by")
        return metric, mode

    def _command(self):
        metric, mode = self._metric_and_mode()
        t, r = self._tune, self._run
        stop = dict(r.stop or {})
        max_t = stop.pop("training_iteration", None) or getattr(t.scheduler, "max_t", None) or 100
        if stop:
            raise ValueError(f"gyre.tune.Tuner: RunConfig.stop takes training_iteration only, not {sorted(stop)}")
        cmd = [_gyre_tool(), "tune", "--dir", self._path, "--metric", metric, "--mode", mode, "--samples",
               str(t.num_samples), "--max-t", str(int(max_t)), "--progress", "off", "--json", "--np", str(t.np)]
        cmd += (t.scheduler or FIFOScheduler()).args()
        cmd += (t.search_alg or BasicVariantGenerator()).args()
        if t.max_concurrent_trials:
            cmd += ["--slots", str(t.max_concurrent_trials)]
        if t.executor == "slurm":
            cmd += ["--slurm"]
        elif t.executor not in (None, "local"):
            cmd += ["-H", t.executor]
        failures = (r.failure_config or FailureConfig()).max_failures
        if failures > 0:  # runs of a trial that may fail and go on from its checkpoint
            cmd += ["--max-failures", str(failures)]
        trial = [sys.executable, "-m", "gyre.tune._trial", str(Path(self._path) / TRAINABLE)]
        for name, value in self._space.items():
            if isinstance(value, Domain):
                cmd += ["--param", f"{name}={value.spec}"]
                trial += [f"--{name}", "{" + name + "}"]
            elif isinstance(value, dict) and any(isinstance(v, Domain) for v in value.values()):
                raise ValueError(f"gyre.tune.Tuner: {name!r}: search spaces nested in dicts are not supported; "
                                 "flatten them")
        if not any(isinstance(v, Domain) for v in self._space.values()):
            # Constants only: gyre tune wants a space, so one grid point that the trial ignores.
            cmd += ["--param", f"{_NO_SEARCH}=grid:0"]
        return cmd + ["--"] + trial

    def fit(self):
        """Runs the experiment (or finishes it, after restore) and returns its ResultGrid. Raises
        TuneError when gyre tune itself failed (its message), not when trials failed (see
        ResultGrid.errors)."""
        metric, mode = self._metric_and_mode()
        Path(self._path).mkdir(parents=True, exist_ok=True)
        if self._resume is None:
            with open(Path(self._path) / TRAINABLE, "wb") as f:
                f.write(_serialization.dumps({"trainable": self._trainable, "space": self._space,
                                              "tune_config": self._tune, "run_config": self._run}))
            cmd = self._command()
        else:
            cmd = [_gyre_tool(), "tune", "--resume", self._path, "--progress", "off", "--json"]
        env = dict(os.environ)
        package = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = package + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        quiet = self._run.verbose == 0
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE if quiet else None, text=True,
                           preexec_fn=_end_with_parent)
        if p.returncode != 0:
            if not (Path(self._path) / "state.json").is_file():
                raise TuneError(f"gyre.tune: gyre tune exited {p.returncode} before any trial (see its output above)")
            if p.returncode >= 128:
                raise KeyboardInterrupt(f"gyre.tune: the experiment was interrupted; Tuner.restore({self._path!r}) "
                                        "finishes it")
            raise TuneError(f"gyre.tune: gyre tune exited {p.returncode} (see its output above)")
        return _read_results(self._path, metric, mode, self._constants())

    def _constants(self):
        if self._resume is not None:
            with open(Path(self._path) / TRAINABLE, "rb") as f:
                self._space = _serialization.loads(f.read())["space"]
        return {k: v for k, v in self._space.items() if not isinstance(v, Domain)}

    def get_results(self):
        """The ResultGrid of the experiment as it stands (also of one restored and not yet fitted)."""
        metric, mode = self._metric_and_mode()
        return _read_results(self._path, metric, mode, self._constants())


def _end_with_parent():
    """In gyre tune's process: SIGTERM when this driver dies (killed, say), so that it stops its
    trials and leaves the experiment to Tuner.restore rather than running on alone."""
    import ctypes
    import signal
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _read_results(path, metric, mode, constants):
    from ._report import Checkpoint
    with open(Path(path) / "state.json") as f:
        state = json.load(f)
    results = []
    for trial in state["trials"]:
        history = []
        for r in trial["results"]:
            m = dict(r["metrics"])
            m["training_iteration"] = r["iteration"]
            history.append(m)
        directory = Path(path) / "trials" / str(trial["id"])
        ckpt = directory / "ckpt"
        checkpoint = Checkpoint(str(ckpt)) if ckpt.is_dir() and any(ckpt.iterdir()) else None
        error = TuneError(f"trial {trial['id']}: {trial['error']}") if trial.get("error") else None
        config = {k: v for k, v in trial["config"].items() if k != _NO_SEARCH}
        results.append(Result(config={**constants, **config}, metrics=history[-1] if history else {}, path=str(directory),
                              checkpoint=checkpoint, error=error, metrics_history=history, status=trial["status"]))
    return ResultGrid(results, metric, mode, path)
