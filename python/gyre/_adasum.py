"""Adasum (Maleki et al., "Scaling Distributed Training with Adaptive Summation"), Horovod's
op=hvd.Adasum: two ranks' tensors a and b combine as

    (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

in float64 (a coefficient stays 1 where its norm is below sqrt(DBL_MIN)), and 2^k ranks combine
pairwise, neighbours first (rank 2i with 2i+1, then pairs of pairs), as Horovod's recursive
halving does. gyre gathers every rank's tensor and combines them on each rank: the same result on
every rank, at the price of moving size() tensors instead of about two."""
import math
import sys

import torch

__all__ = ["Adasum"]


class _AdasumOp:
    """The op=gyre.Adasum marker (Horovod's hvd.Adasum)."""

    def __repr__(self):
        return "gyre.Adasum"


Adasum = _AdasumOp()

_TINY = math.sqrt(sys.float_info.min)


def _combine(a, b):
    dot = torch.dot(a, b).item()
    aa, bb = torch.dot(a, a).item(), torch.dot(b, b).item()
    ca = 1.0 - dot / (2 * aa) if aa >= _TINY else 1.0
    cb = 1.0 - dot / (2 * bb) if bb >= _TINY else 1.0
    return ca * a + cb * b


def adasum_of(parts):
    """The Adasum of `parts` (one flat float64 tensor per rank, in rank order; a power of 2 of them)."""
    level = list(parts)
    while len(level) > 1:
        level = [_combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def check_size(size, call):
    if size & (size - 1):
        raise ValueError(f"gyre.{call}: Running Adasum with non-power of 2 ranks is not supported yet "
                         f"(the job has {size})")


def allreduce_adasum(tensor, allgather, size, call):
    """`tensor` Adasum-reduced over the world; `allgather` is gyre.allgather (rows in rank order)."""
    check_size(size, call)
    if not tensor.is_floating_point():
        raise TypeError(f"gyre.{call}: Adasum takes floating-point tensors, not {tensor.dtype}")
    gathered = allgather(tensor.detach().reshape(1, -1).to(torch.float64))
    return adasum_of(list(gathered)).to(tensor.dtype).view(tensor.shape)
