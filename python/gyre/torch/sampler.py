"""A DistributedSampler whose defaults are gyre's ranks."""
import torch.utils.data.distributed

import gyre


class DistributedSampler(torch.utils.data.distributed.DistributedSampler):
    """torch's DistributedSampler with num_replicas=gyre.size() and rank=gyre.rank() by default:
    each rank reads its 1/size of `dataset`, reshuffled by set_epoch(epoch) when shuffle is on."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        super().__init__(dataset, num_replicas=gyre.size() if num_replicas is None else num_replicas,
                         rank=gyre.rank() if rank is None else rank, shuffle=shuffle, seed=seed,
                         drop_last=drop_last)
