"""gyre.torch.elastic: Horovod Elastic's API on `gyre run --elastic`. A job that loses workers goes
on with the others, and workers that join (replacements, hosts a discovery script added) are
taken in, without restarting anyone:

    import gyre.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                ...
                optimizer.step()
                if state.batch % 10 == 0:
                    state.commit()
            state.batch = 0

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: adjust_learning_rate(hvd.size())])
    train(state)

When a peer dies, the survivors' next collective raises PeerLostError: run() rolls their state
back to its last commit(), meets the next membership (new ranks, new size), makes every rank's
state the most advanced commit among them and calls the function again. A new membership with
more workers is noticed at commit(), which then raises HostsUpdatedInterrupt after committing (no
work is lost). Outside an elastic job run() calls the function once, after syncing the state from
rank 0. The C++ side is gyre::elastic (include/gyre/elastic.h); docs/python.md has the details."""
import copy
import functools
import sys

import torch

import gyre
from gyre import _C
from gyre.torch.functions import broadcast_optimizer_state, broadcast_parameters
from gyre.torch.optimizer import _rebuild_reducers

__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler", "HostsUpdatedInterrupt", "membership"]


def membership():
    """The number of the membership being trained in (1, 2, ...: each loss or arrival of workers
    makes a new one); 0 outside an elastic job."""
    return _C.elastic.membership()


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by State.commit() (on every rank) when the launcher published a new membership; the
    state has just been committed, and run() meets the new membership."""


class State:
    """What travels, is committed and is restored. Subclasses say how: save(), restore() and
    sync(root_rank)."""

    def __init__(self):
        self._reset_callbacks = []
        self._commits = 0

    def register_reset_callbacks(self, callbacks):
        """Functions (no arguments) run() calls after each membership is met, the first one
        too: the place to scale the learning rate or the data to gyre.size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Snapshots the state in memory, then (collective) raises HostsUpdatedInterrupt when the
        launcher published a new membership. Call it on every rank at the same points."""
        self.save()
        self._commits += 1
        self.check_host_updates()

    def check_host_updates(self):
        """Collective: raises HostsUpdatedInterrupt when a new membership waits (no commit)."""
        if _C.elastic.enabled() and _C.elastic.membership_changed():
            raise HostsUpdatedInterrupt(f"the launcher published a new membership (commit {self._commits})")

    def sync(self):
        """Collective: every rank takes the state of the rank with the most commits (the lowest
        such rank), then commits it without checking for a new membership."""
        counts = gyre.allgather_object(self._commits)
        best = max(counts)
        self._sync_from(counts.index(best))
        self._commits = best
        self.save()

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def _sync_from(self, root_rank):
        raise NotImplementedError


class ObjectState(State):
    """Plain values as attributes (ObjectState(epoch=0, batch=0) gives state.epoch, state.batch),
    deep-copied at each commit and sent from the most advanced rank at each sync."""

    def __init__(self, **kwargs):
        super().__init__()
        self._names = list(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)
        self._saved = None
        self.save()

    def _values(self):
        return {name: getattr(self, name) for name in self._names}

    def save(self):
        self._saved = copy.deepcopy(self._values())

    def restore(self):
        for name, value in copy.deepcopy(self._saved).items():
            setattr(self, name, value)

    def _sync_from(self, root_rank):
        for name, value in gyre.broadcast_object(self._values(), root_rank).items():
            setattr(self, name, value)


class TorchState(ObjectState):
    """A model and an optimizer (either may be None) plus plain values, as Horovod's: the model's
    state_dict and the optimizer's are copied at each commit and broadcast at each sync. An
    ElasticSampler among the values keeps its place in the epoch the same way."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"gyre.elastic.TorchState: model must be a torch.nn.Module, not {type(model).__name__}")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("gyre.elastic.TorchState: optimizer must be a torch.optim.Optimizer, not "
                            f"{type(optimizer).__name__}")
        self.model = model
        self.optimizer = optimizer
        self._samplers = {name: v for name, v in kwargs.items() if isinstance(v, ElasticSampler)}
        super().__init__(**{name: v for name, v in kwargs.items() if name not in self._samplers})
        for name, sampler in self._samplers.items():
            setattr(self, name, sampler)

    def save(self):
        super().save()
        self._saved_model = copy.deepcopy(self.model.state_dict()) if self.model is not None else None
        self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None
        self._saved_samplers = {name: s.state_dict() for name, s in self._samplers.items()}

    def restore(self):
        super().restore()
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(self._saved_samplers[name])

    def _sync_from(self, root_rank):
        super()._sync_from(root_rank)
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank)
        samplers = gyre.broadcast_object({name: s.state_dict() for name, s in self._samplers.items()}, root_rank)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(samplers[name])


class ElasticSampler(torch.utils.data.Sampler):
    """Splits what is left of an epoch among the ranks of the current world, as Horovod's: after
    each batch call record_batch(batch_idx, batch_size) (or record_indices); when the world
    changes, the samples not yet processed by anyone are dealt again over the new ranks. Keep it
    in a TorchState so that it is committed, restored and synced with the model."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0  # samples of this epoch processed by the whole world
        self.reset()

    def set_epoch(self, epoch):
        """A new epoch: nothing processed yet, reshuffled when shuffle is on."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Batch batch_idx (counted from this world's start in the epoch) of batch_size samples per
        rank was processed on every rank."""
        self.processed_num = self._start + min((batch_idx + 1) * batch_size, self.num_samples) * self.num_replicas

    def record_indices(self, count):
        """`count` more samples per rank were processed on every rank."""
        self.processed_num += count * self.num_replicas

    def reset(self):
        """Deals the samples not yet processed over the current world (run() calls it through
        TorchState's sync; call it yourself in a reset callback otherwise)."""
        self.num_replicas = gyre.size() if gyre.is_initialized() else 1
        self.rank = gyre.rank() if gyre.is_initialized() else 0
        order = list(range(len(self.dataset)))
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(len(self.dataset), generator=generator).tolist()
        remaining = order[self.processed_num:]
        self._start = self.processed_num
        self.num_samples = len(remaining) // self.num_replicas  # every rank the same number of batches
        self.indices = remaining[self.rank:self.num_samples * self.num_replicas:self.num_replicas]

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]
        self.processed_num = state["processed_num"]
        self.reset()

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return self.num_samples


def run(func):
    """Decorates a training function taking a State first, as Horovod's hvd.elastic.run."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not isinstance(state, State):
            raise TypeError(f"gyre.elastic.run: the first argument must be a gyre.elastic.State, not "
                            f"{type(state).__name__}")
        gyre.init()
        why = None  # None: this process's first membership
        while True:
            if why is not None:
                _C.elastic.reset(why)  # leave, then join the next membership: the new world
                _rebuild_reducers()
            state.sync()
            state.on_reset()
            try:
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt:
                why = ""  # committed: nothing to roll back
            except (_C.PeerLostError, _C.TimeoutError) as e:
                if not _C.elastic.enabled():
                    raise
                what = "lost a peer" if isinstance(e, _C.PeerLostError) else "timed out"
                print(f"gyre.elastic: rank {gyre.rank()} of {gyre.size()} {what}: {e}; rolling back to commit "
                      f"{state._commits} and waiting for the next membership", file=sys.stderr, flush=True)
                state.restore()
                why = f"{what}: {e}"

    return wrapper
