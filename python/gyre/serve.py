"""Serving a Python model as `gyre serve` serves a trained one (docs/serving.md): HTTP, requests
batched dynamically over replicas, the v1, v2 and raw-tensor routes, /healthz, /readyz and
/metrics, every bad request a 4xx naming the problem.

    import torch, gyre.serve
    model = torch.nn.Linear(4, 2).eval()
    server = gyre.serve.Server(model, name="linear", row_shape=(4,), port=8000, max_batch_size=64)
    server.serve_forever()       # until Ctrl-C or stop(); or start() ... stop(), or `with`

    # curl localhost:8000/v1/models/linear:predict -d '{"instances": [[1, 2, 3, 4]]}'

`model` is any callable that takes a float32 tensor of rows, [n, *row_shape], and returns a tensor
with n rows (an nn.Module in eval mode, a function); it runs under torch.no_grad(). Requests wait
up to `batch_wait_ms` for others to fill a batch of `max_batch_size` rows, which runs in one call;
each caller gets its own rows. Replicas are threads that call the same `model`: they hold the GIL
only between torch's operations, which release it while they compute. An exception the model
raises fails that batch's requests (500, naming it) and the server goes on."""

import atexit as _atexit
import threading as _threading
import weakref as _weakref

from . import _C

_live = _weakref.WeakSet()  # servers to stop before the interpreter ends (their threads call into it)

_OPTIONS = ("host", "port", "replicas", "min_replicas", "max_replicas", "target_ongoing_requests", "upscale_delay",
            "downscale_delay", "max_batch_size", "batch_wait_ms", "max_connections", "max_queue", "max_body_bytes",
            "read_timeout")


class Server:
    """`model` behind HTTP on host:port (port 0: any free one, then `.port`). Keyword arguments are
    `gyre serve`'s flags: host, port, replicas, min_replicas and max_replicas (autoscaling),
    target_ongoing_requests, upscale_delay, downscale_delay, max_batch_size, batch_wait_ms,
    max_connections, max_queue, max_body_bytes, read_timeout. The port is bound, and the replicas
    made, when the Server is; ValueError names an option out of its range."""

    def __init__(self, model, name="model", row_shape=None, **options):
        if not callable(model):
            raise TypeError(f"gyre.serve.Server: the model must be callable (an nn.Module or a function), "
                            f"not {type(model).__name__}")
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise TypeError(f"gyre.serve.Server: unknown option(s) {', '.join(unknown)} (known: {', '.join(_OPTIONS)})")
        o = _C.serve.ServeOptions()
        for key, value in options.items():
            setattr(o, key, value)
        shape = [] if row_shape is None else [int(d) for d in row_shape]
        self._server = _C.serve.Server(model, str(name), shape, o)
        self._started = False
        self._lock = _threading.Lock()
        self._stopped = _threading.Event()
        _live.add(self)

    @property
    def port(self):
        return self._server.port

    def start(self):
        """Serves on a thread of its own (the requests are served from when the Server was made)."""
        with self._lock:
            if self._started:
                raise RuntimeError("gyre.serve.Server: started already")
            self._started = True
        self._server.start()

    def stop(self):
        """Stops accepting, answers every request it accepted, then returns. Again: nothing."""
        self._stopped.set()
        self._server.stop()

    def serve_forever(self):
        """Serves until stop() from another thread, or Ctrl-C (KeyboardInterrupt), then stops."""
        self.start()
        try:
            while not self._stopped.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


@_atexit.register
def _stop_all():
    for server in list(_live):
        server.stop()


def run(model, name="model", row_shape=None, **options):
    """Server(model, name, row_shape, **options).serve_forever(): serves until Ctrl-C."""
    Server(model, name, row_shape, **options).serve_forever()


__all__ = ["Server", "run"]
