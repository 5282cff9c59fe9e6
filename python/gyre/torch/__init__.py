"""gyre.torch: Horovod's `horovod.torch` on gyre. Everything in `gyre` (init, rank, the
collectives), plus DistributedOptimizer, broadcast_parameters, broadcast_optimizer_state and
DistributedSampler, save_checkpoint/load_checkpoint, and gyre.torch.elastic (hvd.elastic: run,
TorchState, ElasticSampler). A Horovod script changes only its import:

    import gyre.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
"""
from gyre import *  # noqa: F401,F403
from gyre import __all__ as _core_all

from .checkpoint import load_checkpoint, save_checkpoint
from .functions import broadcast_optimizer_state, broadcast_parameters
from .optim import LAMB, LARS
from .optimizer import DistributedOptimizer
from .parallel import FullyShardedDataParallel, Pipeline
from .sampler import DistributedSampler
from .sync_batch_norm import SyncBatchNorm
from . import elastic  # noqa: E402  (after the modules it uses)
from . import distributed  # noqa: E402,F401  registers torch.distributed's backend "gyre"

__all__ = list(_core_all) + ["DistributedOptimizer", "broadcast_parameters", "broadcast_optimizer_state",
                             "DistributedSampler", "save_checkpoint", "load_checkpoint", "elastic", "SyncBatchNorm",
                             "LARS", "LAMB", "Pipeline", "FullyShardedDataParallel"]
