"""gyre.torch.SyncBatchNorm: batch normalisation whose statistics are those of the whole global
batch, as Horovod's hvd.SyncBatchNorm (which needs a GPU; this one runs on the CPU)."""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from gyre._api import Sum, allreduce, global_process_set


class SyncBatchNorm(_BatchNorm):
    """In training, each channel is normalised with the mean and variance of the batch over every
    rank of `process_set` (one allreduce of count, sum and sum of squares per call), and the
    running statistics follow them; the backward pass allreduces the statistics' gradients, so each
    rank's input gradient is that of the whole batch's loss. In evaluation (with running
    statistics) and in a world of one it is nn.BatchNorm. Takes inputs of 2 or more dimensions,
    (N, C, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        local = not self.training and self.track_running_stats
        if local or self.process_set.size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                self.training or not self.track_running_stats, momentum, self.eps)
        dims = [0] + list(range(2, input.dim()))
        count = torch.full((1,), input.numel() / input.size(1), dtype=input.dtype)
        stats = torch.cat([count, input.sum(dims), (input * input).sum(dims)])
        total = allreduce(stats, op=Sum, process_set=self.process_set)  # differentiable
        n = total[0]
        c = self.num_features
        mean = total[1:1 + c] / n
        var = total[1 + c:] / n - mean * mean  # biased, as batch norm normalises
        if self.training and self.track_running_stats:
            with torch.no_grad():
                unbiased = var * (n / (n - 1)) if n > 1 else var
                self.running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
                self.running_var.mul_(1 - momentum).add_(unbiased.detach() * momentum)
        shape = [1, c] + [1] * (input.dim() - 2)
        out = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out
