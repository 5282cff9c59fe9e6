"""Horovod's grouped collectives and its sparse allreduce, on gyre's: a group of tensors travels as
one fused buffer per dtype (one collective each, in the order of the group's first tensor of that
dtype), which every rank must pass in the same order with the same shapes."""
import torch

from . import _C
from ._api import (Adasum, Average, Compression, Sum, _named, _op, _PyHandle, _set, _tensor, allgather,
                   allgather_async, allreduce, global_process_set, synchronize)

__all__ = ["grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
           "grouped_allgather", "grouped_allgather_async", "grouped_reducescatter", "grouped_reducescatter_async",
           "sparse_allreduce_async"]


def _tensors(tensors, call):
    if isinstance(tensors, torch.Tensor) or not hasattr(tensors, "__iter__"):
        raise TypeError(f"gyre.{call}: tensors must be a list of torch.Tensor")
    tensors = [_tensor(t, call, "a tensor of the group") for t in tensors]
    if any(t.device != tensors[0].device for t in tensors):
        raise ValueError(f"gyre.{call}: Tensors in list must be on same device.")
    return tensors


def _by_dtype(tensors):
    """{dtype: [indices]} in the order each dtype first appears."""
    groups = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    return groups


class _GroupHandle(_PyHandle):
    """The handle of a grouped async call: wait() (or gyre.synchronize) returns the outputs, a tuple
    in the group's order."""

    def __init__(self, parts, finish):
        self._parts, self._finish = parts, finish

    def wait(self):
        return self._finish([p.wait() for p in self._parts])

    def poll(self):
        return all(p.poll() for p in self._parts)


def _fused_allreduce_async(tensors, op, prescale, postscale, set_id, in_place):
    groups = _by_dtype(tensors)
    parts, flats = [], []
    for indices in groups.values():
        flat = torch.cat([tensors[i].reshape(-1) for i in indices])
        flats.append(flat)
        parts.append(_C.allreduce_async_(flat, op, prescale, postscale, set_id))

    def finish(results):
        out = list(tensors) if in_place else [None] * len(tensors)
        for indices, flat in zip(groups.values(), results):
            offset = 0
            for i in indices:
                n = tensors[i].numel()
                piece = flat[offset:offset + n].view(tensors[i].shape)
                if in_place:
                    tensors[i].copy_(piece)
                else:
                    out[i] = piece
                offset += n
        return tuple(out)
    return _GroupHandle(parts, finish)


@_named
def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """allreduce of every tensor of the list, fused; gyre.synchronize(handle) returns their
    outputs as a tuple."""
    call = "grouped_allreduce_async"
    return _fused_allreduce_async(_tensors(tensors, call), _op(op, average, call), prescale_factor,
                                  postscale_factor, _set(process_set, call), in_place=False)


@_named
def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """The same, writing each result into its tensor; synchronize returns the tensors."""
    call = "grouped_allreduce_async_"
    return _fused_allreduce_async(_tensors(tensors, call), _op(op, average, call), prescale_factor,
                                  postscale_factor, _set(process_set, call), in_place=True)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """A list of new tensors: each of `tensors` reduced over the ranks. Differentiable (each
    tensor's gradient is allreduced as gyre.allreduce's is)."""
    call = "grouped_allreduce"
    tensors = _tensors(tensors, call)
    if op is Adasum:  # per tensor, as Horovod's
        return [allreduce(t, op=Adasum, prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                          process_set=process_set) for t in tensors]
    if any(torch.is_grad_enabled() and t.requires_grad for t in tensors):
        return [allreduce(t, average=average, compression=compression, op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, process_set=process_set) for t in tensors]
    compressed = [compression.compress(t) for t in tensors]
    outs = synchronize(grouped_allreduce_async([c for c, _ in compressed], average=average, op=op,
                                               prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                                               process_set=process_set))
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, compressed)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """Reduces each tensor in place; returns them as a tuple."""
    return synchronize(grouped_allreduce_async_(tensors, average=average, op=op, prescale_factor=prescale_factor,
                                                postscale_factor=postscale_factor, process_set=process_set))


@_named
def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor (one collective each, in order); synchronize returns a tuple."""
    tensors = _tensors(tensors, "grouped_allgather_async")
    return _GroupHandle([allgather_async(t, process_set=process_set) for t in tensors], tuple)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Each tensor allgathered (differentiable, as gyre.allgather); a tuple."""
    return tuple(allgather(t, process_set=process_set) for t in _tensors(tensors, "grouped_allgather"))


@_named
def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    tensors = _tensors(tensors, "grouped_reducescatter_async")
    if prescale_factor != 1.0:
        tensors = [t * prescale_factor for t in tensors]
    parts = [_C.reduce_scatter_async(t, _op(op, None, "grouped_reducescatter_async"),
                                     _set(process_set, "grouped_reducescatter_async")) for t in tensors]

    def finish(results):
        return tuple(r * postscale_factor if postscale_factor != 1.0 else r for r in results)
    return _GroupHandle(parts, finish)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Each tensor reduced and split along dimension 0 as gyre.reducescatter; a list."""
    compressed = [compression.compress(t) for t in _tensors(tensors, "grouped_reducescatter")]
    outs = synchronize(grouped_reducescatter_async([c for c, _ in compressed], op=op, process_set=process_set,
                                                   prescale_factor=prescale_factor,
                                                   postscale_factor=postscale_factor))
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, compressed)]


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set):
    """A sparse COO tensor reduced over the ranks, as Horovod's: its indices and values are
    allgathered (any number of entries per rank); returns a function that waits and gives the
    sum (op=Sum) or average as a sparse tensor, duplicates not yet coalesced."""
    call = "sparse_allreduce_async"
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise TypeError(f"gyre.{call}: tensor must be a sparse torch.Tensor (tensor.to_sparse())")
    op = _op(op, None, call)
    if op not in (Average, Sum):
        raise ValueError(f"gyre.{call}: op must be gyre.Average or gyre.Sum")
    t = tensor.coalesce()
    indices = allgather_async(t.indices().transpose(0, 1).contiguous(), process_set=process_set)
    values = allgather_async(t.values().contiguous(), process_set=process_set)
    members = process_set.size()

    def handle():
        v, i = synchronize(values), synchronize(indices)
        if op == Average:
            v = v / members
        return torch.sparse_coo_tensor(i.transpose(0, 1), v, t.size())
    return handle
