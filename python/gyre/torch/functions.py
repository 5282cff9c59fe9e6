"""Starting every rank from the same model and optimizer state."""
import torch

from gyre import _C
from gyre._api import _set, broadcast_, broadcast_object, global_process_set


def broadcast_parameters(params, root_rank=0, process_set=global_process_set):
    """Overwrites every rank's parameters with root_rank's, in place. `params`: a state_dict
    (model.state_dict()), or a list or generator of (name, tensor), as model.named_parameters()."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        try:
            items = list(params)
        except TypeError:
            raise TypeError("gyre.broadcast_parameters: params must be a state_dict or (name, tensor) pairs, "
                            f"not {type(params).__name__}") from None
    tensors = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], torch.Tensor)):
            raise TypeError("gyre.broadcast_parameters: params must be a state_dict or (name, tensor) pairs; "
                            f"found {type(item).__name__}")
        tensors.append(item[1])
    with torch.no_grad():
        contiguous = [t for t in tensors if t.is_contiguous()]
        _C.broadcast_tensors(contiguous, root_rank, _set(process_set, "broadcast_parameters"))
        for t in tensors:
            if not t.is_contiguous():  # a strided view of a parameter: through a copy
                t.copy_(broadcast_(t.contiguous(), root_rank, process_set=process_set))


def broadcast_optimizer_state(optimizer, root_rank=0, process_set=global_process_set):
    """Copies root_rank's optimizer state (hyperparameters of each group, momentum buffers, step
    counts) to every rank, through the optimizer's own state_dict()."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("gyre.broadcast_optimizer_state: optimizer must be a torch.optim.Optimizer, "
                        f"not {type(optimizer).__name__}")
    state = broadcast_object(optimizer.state_dict(), root_rank, process_set=process_set)
    optimizer.load_state_dict(state)
