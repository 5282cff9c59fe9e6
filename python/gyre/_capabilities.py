"""Horovod's capability queries and its cross ranks, answered for gyre: which of Horovod's
back-ends exist (gyre has its own transports: shared memory, TCP and, when built with it, MPI),
and each rank's place among the hosts."""
import ctypes
import ctypes.util
import os

from . import _C

__all__ = ["mpi_built", "gloo_built", "nccl_built", "ccl_built", "cuda_built", "rocm_built", "ddl_built",
           "mpi_enabled", "gloo_enabled", "mpi_threads_supported", "cross_rank", "cross_size"]

_MPI_THREAD_MULTIPLE = 3  # OpenMPI's and MPICH's value


def mpi_built():
    """True when gyre was built with its MPI transport (libopenmpi-dev at build time)."""
    return bool(_C.mpi_built)


def mpi_enabled():
    """True when this job's collectives go over MPI (GYRE_TRANSPORT=mpi under mpirun)."""
    return mpi_built() and os.environ.get("GYRE_TRANSPORT", "").lower() == "mpi"


def gloo_built():
    """False: gyre's own transports stand where Horovod's Gloo does."""
    return False


def gloo_enabled():
    return False


def nccl_built():
    """0, as Horovod without NCCL: gyre works on CPU tensors."""
    return 0


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def ddl_built():
    return False


def mpi_threads_supported():
    """Whether MPI runs with MPI_THREAD_MULTIPLE, so the program may make MPI calls of its own
    (mpi4py) beside gyre's. ValueError when MPI is not enabled or gyre is not initialised."""
    if not mpi_enabled():
        raise ValueError("gyre: MPI is not enabled; run under mpirun with GYRE_TRANSPORT=mpi in a build with "
                         "MPI (gyre.mpi_built())")
    if not _C.is_initialized():
        raise ValueError("gyre has not been initialised; call gyre.init() first")
    path = ctypes.util.find_library("mpi")
    mpi = ctypes.CDLL(path) if path else None
    provided = ctypes.c_int(0)
    if mpi is None or mpi.MPI_Query_thread(ctypes.byref(provided)) != 0:
        raise ValueError("gyre: cannot ask MPI for its thread level (no libmpi found)")
    return provided.value >= _MPI_THREAD_MULTIPLE


def _cross():
    """(cross_rank, cross_size) from the world's hosts: a rank's local rank is its place among the
    ranks of its host, and its cross group the ranks with its local rank, one per host."""
    hosts, me = _C.host_indices(), _C.rank()
    local, seen = [], {}
    for h in hosts:
        local.append(seen.get(h, 0))
        seen[h] = local[-1] + 1
    group = [r for r in range(len(hosts)) if local[r] == local[me]]
    return group.index(me), len(group)


def cross_rank():
    """This rank's index among the ranks with its local rank (one per host): its host's index."""
    return _cross()[0]


def cross_size():
    """The number of hosts with a rank of this rank's local rank."""
    return _cross()[1]
