"""The calls of `import gyre`: the world, process sets and the collectives on torch tensors."""
import contextlib
import functools
import inspect
import io
import os

import torch

from . import _C
from ._adasum import Adasum, allreduce_adasum

__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "Sum", "Average", "Min", "Max", "Product", "Adasum", "ReduceOp",
    "GyreError", "PeerLostError", "InvalidArgumentError", "CallMismatchError", "HorovodInternalError",
    # and gyre.TimeoutError, not starred
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "allgather", "allgather_async", "reducescatter", "reduce_scatter", "reducescatter_async",
    "reduce_scatter_async", "alltoall", "alltoall_async", "barrier",
    "synchronize", "poll", "broadcast_object", "allgather_object", "Compression", "join",
]

ReduceOp = _C.ReduceOp
Sum, Average, Min, Max, Product = ReduceOp.Sum, ReduceOp.Average, ReduceOp.Min, ReduceOp.Max, ReduceOp.Product
GyreError, PeerLostError, TimeoutError, InvalidArgumentError = (
    _C.GyreError, _C.PeerLostError, _C.TimeoutError, _C.InvalidArgumentError)
# Ranks that made different calls, or a call another rank refused: raised on every rank, and the
# next call works (a RuntimeError, as Horovod's, and an InvalidArgumentError).
CallMismatchError = _C.CallMismatchError
HorovodInternalError = GyreError  # Horovod's name for a failed collective


# glibc's own settings: when one is set, gyre.init() leaves malloc to it.
_MALLOC_VARIABLES = ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                     "MALLOC_MMAP_MAX_")


def init(process_sets=None, keep_freed_memory=True):
    """Joins the job the launcher started; a world of one without a launcher. Calling it again does
    nothing. `process_sets`: ProcessSet objects to add right away (collective).

    keep_freed_memory: keep the buffers a training step frees in the process (glibc's mmap
    threshold fixed at 32 MiB, no heap trimming) instead of returning them to the kernel at every
    step; on a cnn that triples a CPU step's speed (docs/python.md). Skipped when the environment
    sets glibc's malloc variables (GLIBC_TUNABLES, MALLOC_*_)."""
    if _C.is_initialized():
        return
    if keep_freed_memory and not any(v in os.environ for v in _MALLOC_VARIABLES):
        _C.keep_freed_memory()
    _C.init()
    for ps in process_sets or []:
        add_process_set(ps)


shutdown = _C.shutdown
is_initialized = _C.is_initialized
rank, size, local_rank, local_size = _C.rank, _C.size, _C.local_rank, _C.local_size


class ProcessSet:
    """A subset of the world's ranks with collectives of its own, as Horovod's. Pass it as
    `process_set=` to any collective; ranks inside it (root_rank too) count within the set."""

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        self.process_set_id = None

    def _id(self, call):
        if self.process_set_id is None:
            raise ValueError(f"gyre.{call}: the process set {self.ranks} was not added; call "
                             "gyre.add_process_set first")
        return self.process_set_id

    def _ranks(self):
        return _C.process_set_ranks(0) if self.process_set_id == 0 else self.ranks

    def included(self):
        return rank() in self._ranks()

    def rank(self):
        return _C.process_set_rank(self._id("ProcessSet.rank"))

    def size(self):
        return len(self._ranks())

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])  # every rank: its ranks come from the world
global_process_set.process_set_id = 0


def add_process_set(process_set):
    """Collective over the world: every rank adds the same sets in the same order."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    process_set.process_set_id = _C.add_process_set(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    _C.remove_process_set(process_set._id("remove_process_set"))
    process_set.process_set_id = None


def _set(process_set, call):
    if isinstance(process_set, ProcessSet):
        return process_set._id(call)
    raise TypeError(f"gyre.{call}: process_set must be a gyre.ProcessSet, not {type(process_set).__name__}")


@contextlib.contextmanager
def _refusing(call, process_set):
    """The Python-side checks of a call's arguments: one that fails is told to the other ranks of
    the set, as the native checks are, so they raise too instead of waiting for this rank."""
    try:
        yield
    except Exception as e:  # noqa: B902 - whatever the checks raise, the others must hear of it
        set_id = getattr(process_set, "process_set_id", None)
        if isinstance(process_set, ProcessSet) and set_id is not None and _C.is_initialized():
            with contextlib.suppress(Exception):  # not in the set, a lost peer: this error is the one
                _C.refuse(set_id, call, str(e))
        raise


def _name(name):
    return "" if name is None else str(name)


def _tensor(tensor, call, arg="tensor"):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"gyre.{call}: {arg} must be a torch.Tensor, not {type(tensor).__name__}")
    return tensor


def _op(op, average, call):
    if average is not None:
        if op is not None:
            raise ValueError(f"gyre.{call}: pass op or average, not both")
        return Average if average else Sum
    if op is None:
        return Average
    if not isinstance(op, ReduceOp):
        raise TypeError(f"gyre.{call}: op must be gyre.Sum, Average, Min, Max or Product, not {op!r}")
    return op


class Compression:
    """How allreduced tensors travel, as Horovod's: Compression.none or Compression.fp16 (and bf16)."""

    class none:
        name = "none"

        @staticmethod
        def compress(tensor):
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor

    class fp16:
        name = "fp16"

        @staticmethod
        def compress(tensor):
            return (tensor.to(torch.float16), tensor.dtype) if tensor.is_floating_point() else (tensor, None)

        @staticmethod
        def decompress(tensor, ctx):
            return tensor.to(ctx) if ctx is not None else tensor

    class bf16(fp16):
        name = "bf16"

        @staticmethod
        def compress(tensor):
            return (tensor.to(torch.bfloat16), tensor.dtype) if tensor.is_floating_point() else (tensor, None)

    @staticmethod
    def topk(ratio=0.01):
        """DistributedOptimizer only: each step sends the `ratio` share of the gradients' entries
        largest in magnitude (value and index, one allgather); what it leaves out is added to the
        next step's gradients (error feedback)."""
        return _LossyCompression(f"topk:{float(ratio)!r}")

    @staticmethod
    def powersgd(rank=4):
        """DistributedOptimizer only: each weight matrix's gradient sent as a rank-`rank`
        approximation (Vogels et al. 2019, two allreduces), with error feedback; biases, small
        tensors and matrices the rank would not shrink travel whole."""
        return _LossyCompression(f"powersgd:{int(rank)}")


class _LossyCompression:
    """Compression.topk(...) and powersgd(...): the C++ DistributedOptimizer's compressors (they need
    every gradient of a step, so they reduce in step(), after backward)."""

    def __init__(self, name):
        self.name = name

    def compress(self, tensor):
        raise TypeError(f"gyre: Compression {self.name} compresses a DistributedOptimizer's gradients, not one "
                        "allreduce; use Compression.fp16 or bf16 here")

    def __repr__(self):
        return f"Compression({self.name})"


def _differentiable(tensor):
    return torch.is_grad_enabled() and tensor.requires_grad


# The out-of-place allreduce, allgather and broadcast carry gradients as Horovod's do: an
# allreduce's gradient is the allreduce (same op and factors) of the output's gradient; an
# allgather's is this rank's rows of the averaged gradient; a broadcast's is the averaged gradient
# on the root and zero elsewhere.
class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, prescale, postscale, set_id, name):
        ctx.args = (op, prescale, postscale, set_id)
        return _C.allreduce(tensor, op, prescale, postscale, set_id, name)

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale, set_id = ctx.args
        if op not in (Sum, Average):
            raise RuntimeError(f"gyre.allreduce: no gradient through {op}")
        return _C.allreduce(grad, op, prescale, postscale, set_id), None, None, None, None, None


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, set_id, name):
        ctx.set_id = set_id
        out = _C.allgather(tensor, set_id, name)
        ctx.rows = _C.allgather(torch.tensor([tensor.shape[0] if tensor.dim() else 1]), set_id).tolist()
        ctx.me = _C.process_set_rank(set_id)
        return out

    @staticmethod
    def backward(ctx, grad):
        reduced = _C.allreduce(grad, Average, 1.0, 1.0, ctx.set_id)
        return torch.split(reduced, ctx.rows)[ctx.me], None, None


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root, set_id, name):
        ctx.args = (root, set_id)
        return _C.broadcast(tensor, root, set_id, name)

    @staticmethod
    def backward(ctx, grad):
        root, set_id = ctx.args
        reduced = _C.allreduce(grad, Average, 1.0, 1.0, set_id)
        return (reduced if _C.process_set_rank(set_id) == root else torch.zeros_like(reduced)), None, None, None


class _PyHandle:
    """A handle made in Python around native ones (alltoall with splits, grouped calls, Adasum's)."""

    def wait(self):
        raise NotImplementedError

    def poll(self):
        raise NotImplementedError


def _adasum(tensor, prescale_factor, postscale_factor, process_set, call):
    """allreduce with op=Adasum (the world only, as Horovod's)."""
    if process_set is not global_process_set:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    scaled = tensor * prescale_factor if prescale_factor != 1.0 else tensor
    out = allreduce_adasum(scaled, allgather, size(), call)
    return out * postscale_factor if postscale_factor != 1.0 else out


class _DoneHandle(_PyHandle):
    """The handle of a call that finished when it was made (Adasum's)."""

    def __init__(self, output):
        self._output = output

    def wait(self):
        return self._output

    def poll(self):
        return True


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """A new tensor holding `tensor` reduced over the ranks (op: Average by default; gyre.Adasum
    combines them adaptively, see gyre/_adasum.py). `name` is accepted for Horovod's sake; gyre
    matches calls by their order. Differentiable (not with Adasum)."""
    with _refusing("allreduce", process_set):
        _tensor(tensor, "allreduce")
        if op is not Adasum:
            op, set_id = _op(op, average, "allreduce"), _set(process_set, "allreduce")
    if op is Adasum:
        return _adasum(tensor, prescale_factor, postscale_factor, process_set, "allreduce")
    compressed, ctx = compression.compress(tensor)
    if _differentiable(compressed):
        out = _Allreduce.apply(compressed, op, prescale_factor, postscale_factor, set_id, _name(name))
    else:
        out = _C.allreduce(compressed, op, prescale_factor, postscale_factor, set_id, _name(name))
    return compression.decompress(out, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Reduces `tensor` over the ranks in place (it must be contiguous) and returns it."""
    if op is Adasum:
        return tensor.copy_(_adasum(_tensor(tensor, "allreduce_"), prescale_factor, postscale_factor, process_set,
                                    "allreduce_"))
    with _refusing("allreduce_", process_set):
        args = (_tensor(tensor, "allreduce_"), _op(op, average, "allreduce_"), prescale_factor, postscale_factor,
                _set(process_set, "allreduce_"))
    return _C.allreduce_(*args, _name(name))


# Async calls by name, as Horovod's: a name may not be given again while its call is in flight
# (gyre matches calls by order, so the name is only checked, never sent).
_in_flight = {}

_DUPLICATE_NAME = ("Requested to allreduce, allgather, or broadcast a tensor with the same name as another tensor "
                   "that is currently being processed.  If you want to request another tensor, use a different "
                   "tensor name.")


def _named(call):
    """Horovod's duplicate-name check around an *_async call."""
    position = list(inspect.signature(call).parameters).index("name")

    @functools.wraps(call)
    def checked(*args, **kwargs):
        name = args[position] if len(args) > position else kwargs.get("name")
        if name is None:
            return call(*args, **kwargs)
        pending = _in_flight.get(name)
        if pending is not None and not pending.poll():
            raise ValueError(f"gyre.{call.__name__}: {_DUPLICATE_NAME} (name {name!r})")
        handle = call(*args, **kwargs)
        _in_flight[name] = handle
        return handle
    return checked


def _release(handle):
    for name in [n for n, h in _in_flight.items() if h is handle]:
        del _in_flight[name]


@_named
def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """allreduce, started: returns a handle for gyre.synchronize(handle) (or handle.wait())."""
    if op is Adasum:
        return _DoneHandle(allreduce(tensor, op=Adasum, prescale_factor=prescale_factor,
                                     postscale_factor=postscale_factor, process_set=process_set))
    with _refusing("allreduce_async", process_set):
        args = (_tensor(tensor, "allreduce_async"), _op(op, average, "allreduce_async"), prescale_factor,
                postscale_factor, _set(process_set, "allreduce_async"))
    return _C.allreduce_async(*args, _name(name))


@_named
def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    if op is Adasum:
        return _DoneHandle(allreduce_(tensor, op=Adasum, prescale_factor=prescale_factor,
                                      postscale_factor=postscale_factor, process_set=process_set))
    with _refusing("allreduce_async_", process_set):
        args = (_tensor(tensor, "allreduce_async_"), _op(op, average, "allreduce_async_"), prescale_factor,
                postscale_factor, _set(process_set, "allreduce_async_"))
    return _C.allreduce_async_(*args, _name(name))


def _root(root_rank, call):
    if isinstance(root_rank, bool) or not isinstance(root_rank, int):
        raise TypeError(f"gyre.{call}: root_rank must be an int, not {type(root_rank).__name__}")
    return root_rank


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A copy of root_rank's `tensor` on every rank. Differentiable."""
    with _refusing("broadcast", process_set):
        args = (_tensor(tensor, "broadcast"), _root(root_rank, "broadcast"), _set(process_set, "broadcast"))
    return _Broadcast.apply(*args, _name(name)) if _differentiable(tensor) else _C.broadcast(*args, _name(name))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` (contiguous) with root_rank's and returns it."""
    with _refusing("broadcast_", process_set):
        args = (_tensor(tensor, "broadcast_"), _root(root_rank, "broadcast_"), _set(process_set, "broadcast_"))
    return _C.broadcast_(*args, _name(name))


@_named
def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    with _refusing("broadcast_async", process_set):
        args = (_tensor(tensor, "broadcast_async"), _root(root_rank, "broadcast_async"),
                _set(process_set, "broadcast_async"))
    return _C.broadcast_async(*args, _name(name))


@_named
def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    with _refusing("broadcast_async_", process_set):
        args = (_tensor(tensor, "broadcast_async_"), _root(root_rank, "broadcast_async_"),
                _set(process_set, "broadcast_async_"))
    return _C.broadcast_async_(*args, _name(name))


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's `tensor` concatenated along dimension 0 in rank order; first dimensions may
    differ. Differentiable."""
    with _refusing("allgather", process_set):
        args = (_tensor(tensor, "allgather"), _set(process_set, "allgather"))
    return _Allgather.apply(*args, _name(name)) if _differentiable(tensor) else _C.allgather(*args, _name(name))


@_named
def allgather_async(tensor, name=None, process_set=global_process_set):
    with _refusing("allgather_async", process_set):
        args = (_tensor(tensor, "allgather_async"), _set(process_set, "allgather_async"))
    return _C.allgather_async(*args, _name(name))


def reducescatter(tensor, name=None, op=None, process_set=global_process_set):
    """`tensor` reduced over the ranks (op: Average by default), split along dimension 0: rank r
    keeps its share of the rows (the first R % size ranks one row more)."""
    with _refusing("reducescatter", process_set):
        args = (_tensor(tensor, "reducescatter"), _op(op, None, "reducescatter"), _set(process_set, "reducescatter"))
    return _C.reduce_scatter(*args, _name(name))


@_named
def reducescatter_async(tensor, name=None, op=None, process_set=global_process_set):
    with _refusing("reducescatter_async", process_set):
        args = (_tensor(tensor, "reducescatter_async"), _op(op, None, "reducescatter_async"),
                _set(process_set, "reducescatter_async"))
    return _C.reduce_scatter_async(*args, _name(name))


reduce_scatter, reduce_scatter_async = reducescatter, reducescatter_async


def _splits(splits, call):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    try:
        return [int(s) for s in splits]
    except (TypeError, ValueError):
        raise TypeError(f"gyre.{call}: splits must be a list or tensor of ints") from None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of `tensor` to rank r (equal shares by default). Returns the rows that
    arrived, in rank order, and, when splits was given, the rows received from each rank."""
    with _refusing("alltoall", process_set):
        args = (_tensor(tensor, "alltoall"), _splits(splits, "alltoall"), _set(process_set, "alltoall"))
    out, received = _C.alltoall(*args, _name(name))
    return out if splits is None else (out, received)


class _SplitsHandle(_PyHandle):
    """alltoall_async with splits: synchronize() returns the output and the rows from each rank."""

    def __init__(self, handle, received):
        self._handle, self._received = handle, received

    def wait(self):
        return self._handle.wait(), self._received

    def poll(self):
        return self._handle.poll()


@_named
def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    with _refusing("alltoall_async", process_set):
        args = (_tensor(tensor, "alltoall_async"), _splits(splits, "alltoall_async"),
                _set(process_set, "alltoall_async"))
    handle, received = _C.alltoall_async(*args, _name(name))
    return handle if splits is None else _SplitsHandle(handle, received)


def barrier(process_set=global_process_set):
    _C.barrier(_set(process_set, "barrier"))


def synchronize(handle):
    """Waits for an asynchronous collective and returns its output (raises its failure); a grouped
    call's handle gives a tuple, sparse_allreduce_async's function the sparse result."""
    if callable(handle) and not isinstance(handle, (_C.Handle, _PyHandle)):
        return handle()  # sparse_allreduce_async's, which Horovod's optimizer calls itself
    if not isinstance(handle, (_C.Handle, _PyHandle)):
        raise TypeError(f"gyre.synchronize: handle must come from a gyre *_async call, not {type(handle).__name__}")
    try:
        return handle.wait()
    finally:
        _release(handle)


def poll(handle):
    """True once the asynchronous collective has finished; never blocks."""
    if not isinstance(handle, (_C.Handle, _PyHandle)):
        raise TypeError(f"gyre.poll: handle must come from a gyre *_async call, not {type(handle).__name__}")
    return handle.poll()


def _to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _from_bytes(tensor):
    return torch.load(io.BytesIO(tensor.numpy().tobytes()))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` (anything torch.save takes) on every rank."""
    me = _C.process_set_rank(_set(process_set, "broadcast_object"))
    payload = _to_bytes(obj) if me == root_rank else torch.empty(0, dtype=torch.uint8)
    length = broadcast_(torch.tensor([payload.numel()], dtype=torch.int64), root_rank, process_set=process_set)
    if me != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, process_set=process_set)
    return obj if me == root_rank else _from_bytes(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj`, as a list in rank order."""
    payload = _to_bytes(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64), process_set=process_set)
    gathered = allgather(payload, process_set=process_set)
    return [_from_bytes(part) for part in torch.split(gathered, lengths.tolist())]


# How join() takes part in a DistributedOptimizer's reduction, and which ones this rank still has:
# gyre.torch.optimizer sets them.
_join_optimizer = None
_join_alive = None


def join(device=-1):
    """Horovod's hvd.join(): this rank has no data left. Until every rank has joined, it takes part
    in the collectives the others call on the world: zeros in their allreduces and reducescatters
    (the identity with Min, Max and Product), no rows in their allgathers, their barriers and
    broadcasts, and each DistributedOptimizer step with zero gradients (so the average is still
    over every rank, as Horovod's; this rank's optimizer steps with it, so its model stays the
    others'). A broadcast from a joined root, an alltoall and broadcast_parameters raise on the
    ranks that call them. Returns the last rank to join, the same on every rank. `device` is
    Horovod's and has no meaning on the CPU."""
    first = True
    while True:
        then, value = _C.join_round(first, _join_alive() if _join_alive is not None else 0)
        first = False
        if then == "done":
            return value
        if then == "optimizer":
            if _join_optimizer is None:
                raise RuntimeError("gyre.join: the other ranks step a DistributedOptimizer, and this rank has none")
            _join_optimizer(value)
