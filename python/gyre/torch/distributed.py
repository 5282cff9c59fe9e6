"""torch.distributed's backend "gyre": importing this module (or gyre.torch) registers it, so a
DDP/FSDP script moves to gyre's collectives by naming the backend:

    import gyre.torch.distributed  # registers "gyre"
    torch.distributed.init_process_group("gyre")   # under gyre run, torchrun, mpirun or srun

Every process group of backend "gyre" (the default one, new_group's) is a gyre communicator
that meets its peers through the store torch hands the backend, so any init_method torch takes
works. Under a launcher that does not set torch's env:// variables (gyre run, mpirun, srun),
init_process_group's env:// finds them anyway: RANK, WORLD_SIZE, LOCAL_RANK and
LOCAL_WORLD_SIZE from the launcher's, and MASTER_ADDR/MASTER_PORT (where rank 0 hosts torch's
store) handed over through the launcher's own store. Tensors are CPU tensors; a call the
backend does not support raises RuntimeError naming it.
"""
import os
import socket

import torch.distributed as _dist

from gyre import _C

BACKEND = "gyre"


def _create_process_group(store, rank, size, timeout):
    """The creator torch calls for each process group of backend "gyre"."""
    return _C.ProcessGroupGyre(store, rank, size, timeout)


def is_available():
    """Whether torch.distributed has the backend registered (it does once this module is imported)."""
    return BACKEND.upper() in getattr(_dist.Backend, "_plugins", {})


def _address_toward(host):
    """This host's address on the way to `host` (a UDP socket sends nothing to learn it)."""
    try:
        family = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)[0][0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def _free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def fill_environment():
    """Sets torch's env:// variables from the launcher's (gyre run's, OpenMPI's, Slurm's, read as
    gyre.init() reads them), where they are missing; nothing under torchrun, which sets them.
    Collective when MASTER_ADDR or MASTER_PORT is missing: rank 0 picks the address and a free
    port, and the others learn them through the launcher's store."""
    place = _C._launch_place()
    if place["launcher"] in ("none", "torchrun") or "RANK" in os.environ:
        return
    rank, size = place["rank"], place["size"]
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(place["local_rank"]),
                      LOCAL_WORLD_SIZE=str(place["local_size"]))
    if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        return
    key = "gyre/torch/master/" + os.environ.get("GYRE_RESTART_COUNT", "0")
    mine = ""
    if rank == 0:
        host = os.environ.get("MASTER_ADDR")
        if not host:
            store = place["store_address"]
            if size == place["local_size"]:
                host = "127.0.0.1"  # one host
            elif store and not store.startswith("file:"):
                host = _address_toward(store.rsplit(":", 1)[0].strip("[]"))
            else:
                host = socket.gethostbyname(socket.gethostname())
        mine = f"{host}:{os.environ.get('MASTER_PORT') or _free_port(host)}"
    host, port = _C._launch_store_exchange(key, mine).rsplit(":", 1)
    os.environ.update(MASTER_ADDR=host, MASTER_PORT=port)


def _env_rendezvous(url, **kwargs):
    fill_environment()
    return _env_handler(url, **kwargs)


if _dist.is_available() and hasattr(_C, "ProcessGroupGyre") and not is_available():
    _dist.Backend.register_backend(BACKEND, _create_process_group)
    # env:// (init_process_group's default) learns the launcher's place first; torch keeps its
    # handlers in a dict that register_rendezvous_handler only adds to.
    import importlib
    _rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the module, not dist.rendezvous
    _env_handler = _rendezvous._rendezvous_handlers["env"]
    _rendezvous._rendezvous_handlers["env"] = _env_rendezvous
