"""gyre's model parallelism for Python models, on the C++ engines (docs/model-parallel.md):

    pipe = gyre.torch.Pipeline(model, micro_batches=8, schedule="1f1b")   # model: an nn.Sequential
    opt = torch.optim.SGD(pipe.parameters(), lr=0.05)                     # this rank's stages only
    loss = pipe.step(x, y, torch.nn.functional.cross_entropy); opt.step(); opt.zero_grad()

    fsdp = gyre.torch.FullyShardedDataParallel(model)                     # ZeRO-3: 1/W of everything
    opt = torch.optim.Adam(fsdp.parameters(), lr=1e-3)                    # the flat shards
    loss_fn(fsdp(x), y).backward(); opt.step(); opt.zero_grad()

Each child of the Sequential is one layer (a pipeline's stages are runs of them, FSDP's units are
the children with parameters); the C++ code calls each child's forward under the GIL and works
on the child's own tensors."""
import torch

from gyre import _C
from gyre._api import _set, global_process_set

__all__ = ["Pipeline", "FullyShardedDataParallel"]


class Pipeline:
    """The model cut by layers into stages, one run of layers per rank of the process set (and
    `virtual_stages` per rank with schedule="interleaved"), trained on micro-batches: "gpipe",
    "1f1b", "interleaved" or "zero-bubble". `balance`: the layers of each stage (even counts by
    default). Every rank builds the same model and passes the same batch to step()."""

    def __init__(self, module, balance=None, micro_batches=4, schedule="1f1b", recompute=False, virtual_stages=1,
                 process_set=global_process_set):
        self.module = module
        self._set = _set(process_set, "Pipeline")
        self._pipe = _C.Pipeline(module, list(balance or []), micro_batches, schedule, recompute, virtual_stages,
                                 self._set)

    def step(self, input, target, loss_fn):
        """One forward and backward of the batch in micro-batches; loss_fn(output, target) must be a
        mean over its samples. Gradients accumulate in this rank's parameters as the unsplit
        model's would on the whole batch. Returns the batch's loss, on every rank."""
        return self._pipe.step(input, target, loss_fn)

    def forward(self, input):
        """Without gradients: the last stage's output on the rank that holds it, None elsewhere."""
        with torch.no_grad():
            return self._pipe.forward(input)

    __call__ = forward

    def parameters(self):
        """This rank's parameters (of its stages): what its optimizer steps."""
        return self._pipe.parameters()

    def gather(self):
        """Collective: every stage's parameters and buffers into `module` on every rank (to save or
        evaluate the whole model)."""
        self._pipe.gather()

    def balance(self):
        return self._pipe.balance()

    def holds_last_stage(self):
        return self._pipe.holds_last_stage()

    def last_step(self):
        """The last step on this rank: seconds, busy_seconds, bubble, peak_held, peak_activation_bytes."""
        return self._pipe.last_step()


class FullyShardedDataParallel(torch.nn.Module):
    """ZeRO stage 3, as PyTorch's FSDP: each rank keeps 1/W of every layer's parameters, gradients
    and optimizer state. Forward gathers each layer's parameters just before it runs (the next
    one's in flight meanwhile) and frees them after; backward gathers them again and
    reduce-scatters each layer's gradients as soon as they are complete. At the end of backward the
    averaged gradients are in the shards' .grad, so an elementwise optimizer (SGD, Adam, AdamW,
    Adagrad, RMSprop) over parameters() steps as over the whole model. float32 parameters; every
    rank passes the same model (it is checked)."""

    def __init__(self, module, prefetch=True, process_set=global_process_set):
        super().__init__()
        self.module = module
        self._sharded = _C.FullyShardedModel(module, prefetch, _set(process_set, "FullyShardedDataParallel"))
        self._shards = self._sharded.parameters()
        self._queued = False

    def forward(self, input):
        out = self._sharded.forward(input)
        if out.requires_grad:
            out.register_hook(self._queue_synchronize)
        return out

    def _queue_synchronize(self, grad):
        # At the end of this backward pass: the reduce-scatters waited for, the shards' .grad set.
        if not self._queued:
            self._queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._synchronize)
        return grad

    def _synchronize(self):
        self._queued = False
        self._sharded.synchronize()

    def parameters(self, recurse=True):
        """This rank's shards, one flat tensor per layer with parameters: what the optimizer steps."""
        return iter(self._shards)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return ((f"{prefix}shard{i}", p) for i, p in enumerate(self._shards))

    def zero_grad(self, set_to_none=True):
        self._sharded.zero_grad()

    def full_state_dict(self):
        """Collective: every layer's whole parameters gathered, and the module's state_dict()
        (copies) returned on every rank."""
        self._sharded.gather_parameters()
        return {k: v.detach().clone() for k, v in self.module.state_dict().items()}

    def state_bytes(self):
        """Bytes this rank holds for training now (shards, their gradients, what is gathered)."""
        return self._sharded.state_bytes()

    def full_parameter_bytes(self):
        return self._sharded.full_parameter_bytes()
