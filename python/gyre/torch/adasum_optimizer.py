"""DistributedOptimizer(op=gyre.Adasum), as Horovod's: each rank steps its own optimizer on its
own gradients, and the change each step made to the parameters (the delta) is Adasum-combined over
the ranks and applied from the parameters' state before the step, so every rank ends with the same
parameters. backward_passes_per_step=k: k backward passes accumulate before each step."""
import torch

from gyre._adasum import check_size
from gyre._api import Adasum, size
from gyre._grouped import grouped_allreduce


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    def __init__(self, params, backward_passes_per_step):
        super(self.__class__, self).__init__(params)
        check_size(size(), "DistributedOptimizer")
        self._passes_per_step = backward_passes_per_step
        self._passes = 0
        self._params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]

    def synchronize(self):
        """Nothing to wait for: the deltas are combined in step()."""

    def step(self, closure=None):
        """Steps locally, then replaces each parameter by its value before the step plus the
        Adasum of every rank's delta."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._passes += 1
        if self._passes < self._passes_per_step:
            return loss
        self._passes = 0
        with torch.no_grad():
            before = [p.detach().clone() for p in self._params]
            super(self.__class__, self).step()
            deltas = [p.detach() - b for p, b in zip(self._params, before)]
            combined = grouped_allreduce(deltas, op=Adasum) if deltas else []
            for p, b, d in zip(self._params, before, combined):
                p.copy_(b + d)
        return loss


def adasum_optimizer(optimizer, backward_passes_per_step):
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, backward_passes_per_step)
