"""Saving and resuming training from Python: one file written by rank 0, atomically, read by rank 0
and broadcast to the others, so every rank resumes from the same state."""
import os

import torch

from gyre._api import _C, _set, barrier, broadcast_object, global_process_set


def _fsync_dir(path):
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(path, model, optimizer=None, root_rank=0, process_set=global_process_set, **extra):
    """root_rank writes {model, optimizer, extra} to `path`: to a temporary file beside it, synced,
    then renamed over `path`, so `path` always holds a whole checkpoint, the old one until the new
    one is complete. Collective: every rank calls it and returns once the file is in place; a
    failure on the writer (a full disk, a missing directory) raises on every rank, naming it."""
    me = _C.process_set_rank(_set(process_set, "save_checkpoint"))
    error = None
    if me == root_rank:
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            state = {"model": model.state_dict(), "extra": extra}
            if optimizer is not None:
                state["optimizer"] = optimizer.state_dict()
            with open(tmp, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            _fsync_dir(path)
        except Exception as e:  # every rank must hear of it, or they would wait forever
            error = f"{type(e).__name__}: {e}"
            try:
                os.unlink(tmp)
            except OSError:
                pass
    error = broadcast_object(error, root_rank, process_set=process_set)
    if error is not None:
        raise RuntimeError(f"gyre.save_checkpoint: rank {root_rank} could not write {path}: {error}")


def load_checkpoint(path, model, optimizer=None, root_rank=0, process_set=global_process_set):
    """The checkpoint at `path` loaded into `model` (and `optimizer`) on every rank, read by
    root_rank and broadcast. Returns the keyword arguments save_checkpoint was given (the epoch,
    say), or None, changing nothing, when `path` does not exist on root_rank. A file that cannot
    be read raises on every rank."""
    me = _C.process_set_rank(_set(process_set, "load_checkpoint"))
    reply = None
    if me == root_rank:
        if not os.path.exists(path):
            reply = ("missing", None)
        else:
            try:
                reply = ("ok", torch.load(path, map_location="cpu"))
            except Exception as e:
                reply = ("error", f"{type(e).__name__}: {e}")
    status, payload = broadcast_object(reply, root_rank, process_set=process_set)
    if status == "missing":
        return None
    if status == "error":
        raise RuntimeError(f"gyre.load_checkpoint: rank {root_rank} could not read {path}: {payload}")
    model.load_state_dict(payload["model"])
    if optimizer is not None:
        if "optimizer" not in payload:
            raise ValueError(f"gyre.load_checkpoint: {path} holds no optimizer state")
        optimizer.load_state_dict(payload["optimizer"])
    return payload["extra"]
