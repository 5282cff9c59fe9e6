"""Training through gyre's parameter servers (docs/ps.md) from Python:

    import gyre.ps
    opt = gyre.ps.PSOptimizer(model.parameters(), lr=0.05, mode="ssp:2", momentum=0.9)
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()   # each gradient is pushed as backward produces it
        opt.step()                        # ends the step and pulls the parameters

run by `gyre run -np 4 --servers 2 -- python3 train.py`. The servers hold the parameters and apply
the update (SGD with momentum and weight decay, or Adam, with PyTorch's semantics); `mode` is
"bsp" (every step waits for every worker: allreduce-averaged SGD), "asp" (no waiting) or "ssp:S"
(at most S steps apart). It is the C++ gyre::torch::PSOptimizer."""
import torch

from . import _C

__all__ = ["PSOptimizer"]


class PSOptimizer:
    def __init__(self, params, lr, mode="bsp", optimizer="sgd", momentum=0.0, weight_decay=0.0,
                 betas=(0.9, 0.999), eps=1e-8, push_from_hooks=True):
        """Connects to the job's servers and declares one key per parameter; worker 0's values
        become everyone's starting point. Blocks until then. push_from_hooks=False pushes every
        gradient in step() instead, so they can be edited (clipped) between backward and step."""
        params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, torch.Tensor):
                raise TypeError(f"gyre.ps.PSOptimizer: parameter {i} is a {type(p).__name__}, not a torch.Tensor")
        if not isinstance(mode, str):
            raise TypeError(f"gyre.ps.PSOptimizer: mode must be 'bsp', 'asp' or 'ssp:S', not {mode!r}")
        self._params = params
        self._trainer = _C.ps.PSTrainer(params, float(lr), mode, optimizer, float(momentum), float(weight_decay),
                                        float(betas[0]), float(betas[1]), float(eps), bool(push_from_hooks))

    def zero_grad(self, set_to_none=True):
        """Sets the gradients to None."""
        self._trainer.zero_grad()

    def step(self):
        """Pushes the gradients not pushed yet, ends the step (waiting for the others as the mode
        says), pulls every parameter and waits. Raises gyre.PeerLostError / TimeoutError."""
        self._trainer.step()

    @property
    def lr(self):
        return self._trainer.lr()

    @lr.setter
    def lr(self, value):
        """The rate the next pushes carry (set it before backward); the servers apply it."""
        self._trainer.set_lr(float(value))

    def stats(self):
        """This worker's pushes, pulls, bytes, failovers, time blocked in the clock and the
        staleness of its updates (mean, p50, p99, max)."""
        return self._trainer.stats()
