"""gyre.rt: Ray Core's API on gyre::rt (docs/runtime.md). A Ray program moves with its import:

    import gyre.rt as ray               # was: import ray
    ray.init()                          # a gyre job's processes, or local worker processes

    @ray.remote
    def square(x):
        return x * x

    @ray.remote
    class Counter:
        def __init__(self): self.n = 0
        def add(self, k): self.n += k; return self.n

    refs = [square.remote(i) for i in range(4)]
    print(ray.get(refs))                # [0, 1, 4, 9]
    c = Counter.options(name="c", max_restarts=1).remote()
    c.add.remote(5); print(ray.get(c.add.remote(1)))   # 6

Functions and classes travel by cloudpickle (gyre.rt.SERIALIZER says which); values put or returned
by pickle protocol 5, numpy arrays and CPU tensors put into shared memory and mapped read-only by
a get on the same host."""
from ._api import (ActorClass, ActorDiedError, ActorHandle, RemoteFunction, available_resources, get, get_actor,
                   init, is_initialized, kill, put, remote, shutdown, wait)
from ._executor import TaskError
from ._refs import GetTimeoutError, ObjectRef
from ._serialization import SERIALIZER

RayTaskError = TaskError  # Ray's names
RayActorError = ActorDiedError

__all__ = ["init", "shutdown", "is_initialized", "remote", "get", "put", "wait", "kill", "get_actor",
           "available_resources", "ObjectRef", "ActorHandle", "ActorClass", "RemoteFunction", "TaskError",
           "ActorDiedError", "GetTimeoutError", "RayTaskError", "RayActorError", "SERIALIZER"]
