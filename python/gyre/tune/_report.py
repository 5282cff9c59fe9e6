"""Reporting from a trial of `gyre tune` (docs/tune.md), as gyre::tune in C++:

    import gyre.tune
    for epoch in range(gyre.tune.start_iteration() + 1, epochs + 1):
        ...train one epoch, save a checkpoint in gyre.tune.checkpoint_dir()...
        gyre.tune.report(accuracy=accuracy, loss=loss)

run by `gyre tune --param lr=loguniform:1e-4:1e-1 -- python3 train.py --lr {lr}`. Outside a trial
report() writes nothing and the others return empty values, so the script also runs on its own.
In a distributed trial only rank 0's reports are kept."""

from gyre import _C


class Checkpoint:
    """A directory of files (Ray's Checkpoint): from_directory(path), path, to_directory(dest),
    as_directory()."""

    def __init__(self, path):
        self.path = str(path)

    @classmethod
    def from_directory(cls, path):
        import os
        if not os.path.isdir(path):
            raise ValueError(f"gyre.tune.Checkpoint: {path} is not a directory")
        return cls(path)

    def to_directory(self, path=None):
        import shutil
        import tempfile
        dest = path or tempfile.mkdtemp(prefix="gyre-ckpt-")
        shutil.copytree(self.path, dest, dirs_exist_ok=True)
        return dest

    def as_directory(self):
        import contextlib
        return contextlib.nullcontext(self.path)

    def __repr__(self):
        return f"Checkpoint({self.path})"


def get_checkpoint():
    """In a trial that resumes (gyre tune restarted it, or PBT gave it another trial's state): the
    checkpoint its last report saved; None otherwise."""
    return Checkpoint(checkpoint_dir()) if in_trial() and start_iteration() > 0 else None


def report(metrics=None, iteration=None, checkpoint=None, **kwargs):
    """Records one result of this trial: report(accuracy=0.9, loss=0.3) or report({"accuracy": 0.9}).
    `checkpoint`: a Checkpoint whose files become the trial's checkpoint (copied into
    checkpoint_dir() before the report, so that a stop right after it loses nothing).
    `iteration`: record it as this iteration (after resuming from a newer checkpoint of one's own).
    Returns the iteration recorded, or 0 when nothing was written (outside a trial, or not rank 0).
    Save the checkpoint first: the tuner may stop the run as soon as the report arrives."""
    if checkpoint is not None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError("gyre.tune.report: checkpoint must be a gyre.tune.Checkpoint")
        if in_trial() and checkpoint.path != checkpoint_dir():
            import shutil
            shutil.copytree(checkpoint.path, checkpoint_dir(), dirs_exist_ok=True)
    values = dict(metrics or {}, **kwargs)
    if not values:
        raise ValueError("gyre.tune.report: no metrics given")
    numbers = {}
    for name, value in values.items():
        if not isinstance(name, str):
            raise TypeError(f"gyre.tune.report: metric names must be strings, not {type(name).__name__}")
        try:
            numbers[name] = float(value)  # a 0-d tensor or numpy number too
        except (TypeError, ValueError):
            raise TypeError(f"gyre.tune.report: metric {name!r} must be a number, not {type(value).__name__}") \
                from None
    if iteration is not None and (isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 1):
        raise ValueError(f"gyre.tune.report: iteration must be an int of at least 1, not {iteration!r}")
    return _C.tune.report(numbers, iteration or 0)


in_trial = _C.tune.in_trial
start_iteration = _C.tune.start_iteration
stop_at = _C.tune.stop_at
checkpoint_dir = _C.tune.checkpoint_dir
trial_dir = _C.tune.trial_dir
trial_id = _C.tune.trial_id

__all__ = ["report", "in_trial", "start_iteration", "stop_at", "checkpoint_dir", "trial_dir", "trial_id",
           "Checkpoint", "get_checkpoint"]
