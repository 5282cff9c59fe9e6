"""gyre for PyTorch users: Horovod's API on gyre's native core.

    import gyre
    gyre.init()
    t = gyre.allreduce(torch.ones(4))        # a new tensor, averaged over the ranks
    gyre.allreduce_(t, op=gyre.Sum)          # in place
    h = gyre.allreduce_async(t); out = gyre.synchronize(h)

Start the ranks with `gyre run -np 2 python3 train.py` (or mpirun, Slurm, torchrun). Training
helpers (DistributedOptimizer, broadcast_parameters, DistributedSampler) are in gyre.torch, which
also re-exports everything here, so a Horovod script changes only `import horovod.torch as hvd`
to `import gyre.torch as hvd`. docs/python.md has the whole API.
"""
import re as _re

import torch as _torch  # loads libtorch before gyre._C, which links it

from . import _C


def _numeric(version):
    m = _re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return m.groups() if m else version


if _numeric(_torch.__version__) != _numeric(_C.torch_version):
    raise ImportError(f"gyre was built against libtorch {_C.torch_version}, but this Python's torch is "
                      f"{_torch.__version__} ({_torch.__file__}): tensors cannot pass between two libtorch "
                      "builds. Rebuild gyre with this torch's libtorch, or use the Python it was built for "
                      "(Debian's /usr/bin/python3 with python3-torch).")

from ._api import *  # noqa: E402,F401,F403
from ._api import __all__ as _api_all  # noqa: E402
from ._capabilities import *  # noqa: E402,F401,F403
from ._capabilities import __all__ as _capabilities_all  # noqa: E402
from ._grouped import *  # noqa: E402,F401,F403
from ._grouped import __all__ as _grouped_all  # noqa: E402

__all__ = _api_all + _capabilities_all + _grouped_all

import atexit as _atexit  # noqa: E402

# Close the communicators as a C++ program's end does (peers see a goodbye, not a lost rank).
_atexit.register(_C.shutdown)

__version__ = _C.__version__
