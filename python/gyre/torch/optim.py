"""gyre.torch.LARS and gyre.torch.LAMB: the large-batch optimizers of the C++ gyre::torch::Lars and
Lamb (include/gyre/torch/optimizers.h, docs/algorithms.md) for Python models, each tensor's update
made by the same C++ code. Their state lives in torch.optim's dictionaries (state_dict(),
load_state_dict(), gyre.torch.broadcast_optimizer_state and DistributedOptimizer all work)."""
import torch

from gyre import _C

__all__ = ["LARS", "LAMB"]


def _check(name, value, below_one=False):
    if not (value >= 0) or value == float("inf") or (below_one and value >= 1):
        bound = "in [0, 1)" if below_one else "finite and >= 0"
        raise ValueError(f"gyre.torch.{name}: must be {bound}, not {value}")


def _closure_loss(closure):
    """The closure's loss, with gradients on, as torch.optim's optimizers evaluate it."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class LARS(torch.optim.Optimizer):
    """LARS (You, Gitman and Ginsburg 2017): SGD with momentum whose step per tensor is scaled by
    eta * |w| / (|g| + weight_decay * |w| + eps). Tensors of one dimension (biases, norm scales)
    are not adapted and get no weight decay unless adapt_vectors."""

    def __init__(self, params, lr=0.1, momentum=0.9, weight_decay=0.0, eta=0.001, eps=1e-9, adapt_vectors=False):
        for name, value in (("lr", lr), ("weight_decay", weight_decay), ("eta", eta), ("eps", eps)):
            _check(f"LARS: {name}", value)
        _check("LARS: momentum", momentum, below_one=True)
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta, eps=eps,
                                      adapt_vectors=adapt_vectors))

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                buffer = _C.lars_update(p, p.grad, state.get("momentum_buffer"), group["lr"], group["momentum"],
                                        group["weight_decay"], group["eta"], group["eps"], group["adapt_vectors"])
                if buffer is not None:
                    state["momentum_buffer"] = buffer
        return loss


class LAMB(torch.optim.Optimizer):
    """LAMB (You et al. 2019): Adam's bias-corrected direction r plus weight_decay * w, scaled per
    tensor by |w| / |r|, so that every adapted tensor moves by lr * |w|."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, adapt_vectors=False):
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            _check(f"LAMB: {name}", value)
        for beta in betas:
            _check("LAMB: betas", beta, below_one=True)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      adapt_vectors=adapt_vectors))

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                _C.lamb_update(p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"], group["lr"], beta1,
                               beta2, group["eps"], group["weight_decay"], group["adapt_vectors"])
        return loss
