"""gyre.torch.DistributedOptimizer: the user's optimizer, its gradients averaged by gyre's native
bucketing engine (the C++ DistributedOptimizer) during backward."""
import contextlib
import warnings
import weakref

import torch

from gyre import _C, _api
from gyre._api import Adasum, Average, Compression, ReduceOp, _set, global_process_set, size

from .adasum_optimizer import adasum_optimizer


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op, process_set):
        super(self.__class__, self).__init__(params)
        ordered = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not isinstance(n, tuple) or len(n) != 2 for n in named):
                raise ValueError("gyre.DistributedOptimizer: named_parameters must be (name, parameter) pairs, "
                                 "as model.named_parameters() gives")
            known = {id(p) for _, p in named}
            missing = [i for i, p in enumerate(ordered) if id(p) not in known]
            if missing:
                raise ValueError(f"gyre.DistributedOptimizer: {len(missing)} of the optimizer's parameters are "
                                 "not in named_parameters")
        self._reducer_args = (ordered, compression.name, backward_passes_per_step, op, process_set)
        made = _reducers.setdefault(process_set, [])
        self._reducer = _C.GradientReducer(*self._reducer_args, index=len(made))
        made.append(weakref.ref(self))
        reduced = {id(p) for p in ordered}
        self._others = [p for group in self.param_groups for p in group["params"] if id(p) not in reduced]
        self._skip = False

    def synchronize(self):
        """Waits for the gradients' allreduce; afterwards every .grad holds the average."""
        self._reducer.synchronize()

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside it does not synchronize again (after a synchronize() of one's own,
        to clip gradients for instance)."""
        self._skip = True
        try:
            yield
        finally:
            self._skip = False

    def step(self, closure=None):
        """Waits for the gradients' allreduce and steps. A closure runs (and its backward pass is
        allreduced) first, so the update never reads a bucket still being reduced."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self._skip:
            self._reducer.step()  # synchronize, and the step's timing for last_step()
        super(self.__class__, self).step()
        return loss

    def zero_grad(self, set_to_none=True):
        """Sets the gradients to None (whatever set_to_none says: the buckets take the next
        gradients without a zeroing pass)."""
        self._reducer.zero_grad()
        for p in self._others:  # parameters that need no gradient, if they have one
            p.grad = None

    def _join_step(self):
        """gyre.join() on a rank with no data left, when the others step: zero gradients into their
        average, then the same update as theirs."""
        self._reducer.join_step()
        super(self.__class__, self).step()

    def bucket_bytes(self):
        return self._reducer.bucket_bytes()

    def last_step(self):
        """The last step's timing: step, compute, communicate and wait seconds, bytes, buckets."""
        return self._reducer.last_step()


# Every DistributedOptimizer, by process set, in the order they were made there (the same on every
# member of the set): its index there names it in the coordination of its steps, for join(). Dead
# ones keep their place, so the indices never move. An elastic job's new membership builds the live
# ones' reducers again on the new world.
_reducers = {}


def _rebuild_reducers():
    """Collective over the (new) world: each live DistributedOptimizer's engine built again on it,
    in creation order with its index; the old one (its hooks, its buckets) goes first."""
    for set_id, made in _reducers.items():
        live = [(index, ref()) for index, ref in enumerate(made) if ref() is not None]
        if set_id != 0 and live:
            raise ValueError("gyre.elastic: a DistributedOptimizer on a process set cannot follow a new membership "
                             "(process sets name the old world's ranks); use the global process set")
        for index, optimizer in live:
            optimizer._reducer = None  # removes its autograd hooks before the new engine adds its own
            optimizer._reducer = _C.GradientReducer(*optimizer._reducer_args, index=index)


def _alive():
    """The indices of the world's DistributedOptimizers still alive, as a bit mask (the first 64)."""
    return sum(1 << i for i, ref in enumerate(_reducers.get(0, [])[:64]) if ref() is not None)


def _join_step(index):
    """gyre.join()'s part in the reduction of the world's DistributedOptimizer made index-th."""
    made = _reducers.get(0, [])
    optimizer = made[index]() if index < len(made) else None
    if optimizer is None:  # the others raised too: join() told them this rank has none (_alive)
        raise RuntimeError(f"gyre.join: the other ranks step DistributedOptimizer #{index}, which this rank no "
                           "longer has: keep it alive until join() returns")
    optimizer._join_step()


_api._join_optimizer = _join_step
_api._join_alive = _alive


def _check_groups(groups, num_groups, optimizer):
    """Horovod's fusion groups, checked as Horovod checks them. gyre fuses by bucket (25 MiB, in the
    order gradients become ready), which gives the same sums; the groups change no result."""
    if num_groups:
        warnings.warn("gyre.DistributedOptimizer: num_groups is deprecated (as in Horovod); use groups",
                      DeprecationWarning)
        groups = num_groups if groups is None else groups
    if groups is None:
        return
    if isinstance(groups, int) and not isinstance(groups, bool):
        if groups < 0:
            raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")
        return
    if not isinstance(groups, list) or any(not isinstance(g, (list, tuple)) for g in groups):
        raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")
    seen = set()
    for g in groups:
        for p in g:
            if not isinstance(p, torch.Tensor):
                raise ValueError("groups must consist of torch.Tensor.")
            if id(p) in seen:
                raise ValueError("A parameter can only appear once in groups.")
            seen.add(id(p))


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` (any torch.optim.Optimizer) as Horovod does: gradients are averaged (op=Sum
    sums them) across the ranks during backward, in buckets overlapped with it; step() waits for
    them and steps. compression: gyre.Compression.none, fp16, bf16, or the lossy topk(ratio)
    and powersgd(rank) with error feedback (reduced in step(), after backward). backward_passes_per_step: k
    backward passes accumulate locally before one allreduce. gradient_predivide_factor (op=Average
    only): Horovod divides by it before the sum and multiplies after; gyre's buckets sum in
    float32 (fp16 and bf16 ones too), so the average is the same without it. groups/num_groups:
    Horovod's fusion groups, checked; gyre fuses by bucket. Sparse gradients (nn.Embedding(sparse=
    True)) are reduced dense and stay dense, whatever sparse_as_dense says (Horovod allgathers them
    without it: the same average). Collective: every rank passes the same model."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("gyre.DistributedOptimizer: optimizer must be a torch.optim.Optimizer, "
                        f"not {type(optimizer).__name__}")
    if hasattr(optimizer, "_reducer"):
        raise ValueError("gyre.DistributedOptimizer: optimizer is a gyre DistributedOptimizer already; wrap the "
                         "plain optimizer once")
    if op is Adasum:
        if process_set is not global_process_set:
            raise NotImplementedError("Adasum does not support non-global process sets yet.")
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        if size() == 1:  # as Horovod: one rank has nothing to combine
            op = Average
        else:
            return adasum_optimizer(optimizer, backward_passes_per_step)
    if not isinstance(op, ReduceOp):
        raise TypeError(f"gyre.DistributedOptimizer: op must be gyre.Average, Sum or Adasum, not {op!r}")
    if isinstance(backward_passes_per_step, bool) or not isinstance(backward_passes_per_step, int):
        raise TypeError("gyre.DistributedOptimizer: backward_passes_per_step must be an int")
    name = getattr(compression, "name", None)
    if not isinstance(name, str) or name.split(":")[0] not in ("none", "fp16", "bf16", "topk", "powersgd"):
        raise TypeError("gyre.DistributedOptimizer: compression must be gyre.Compression.none, fp16, bf16, "
                        "topk(ratio) or powersgd(rank)")
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    _check_groups(groups, num_groups, optimizer)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               _set(process_set, "DistributedOptimizer"))
