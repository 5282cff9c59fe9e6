"""gyre.rt's calls: init/shutdown, remote functions and actor classes, get/put/wait, kill and named
actors, on the C++ runtime (gyre._C.rt.Runtime)."""
import atexit
import functools
import os
import secrets
import subprocess
import sys
import time

from gyre import _C

from . import _refs, _serialization, _state
from ._refs import ObjectRef, put, referenced

ActorDiedError = _C.rt.ActorDiedError
# Who calls, in every call: a large result for a caller on the callee's host comes through /dev/shm.
_CALLER = (_serialization.HOST, os.getpid())

_TASK_OPTIONS = {"num_cpus", "memory", "max_retries", "num_returns", "name"}
_ACTOR_OPTIONS = {"num_cpus", "memory", "max_restarts", "max_task_retries", "max_concurrency", "name",
                  "lifetime", "get_if_exists"}


def is_initialized():
    return _state.runtime is not None


def init(num_cpus=None, num_workers=None, ignore_reinit_error=False, threads=0, **unsupported):
    """Joins the gyre job this process is part of (`gyre run -np N python3 script.py`, mpirun, srun,
    torchrun): rank 0 goes on as the driver, every other rank serves tasks and actors until the
    driver ends, then exits. Run alone, it starts `num_workers` local worker processes (default:
    num_cpus, else the machine's cores) that serve the same way. num_cpus: what this process
    offers actors that declare num_cpus (default: its threads)."""
    if unsupported:
        raise TypeError(f"gyre.rt.init: unsupported argument(s) {sorted(unsupported)}")
    if _state.runtime is not None:
        if ignore_reinit_error:
            return
        raise RuntimeError("gyre.rt.init: called twice (pass ignore_reinit_error=True to allow it)")
    cpus = float(num_cpus or 0)
    if _launched():  # a launcher's job: rank 0 drives (and, as Ray's driver, runs no calls itself)
        _state.starting()
        try:
            runtime = _C.rt.Runtime(threads=threads, cpus=cpus, place_here=_launched_rank() != 0)
        except BaseException:
            _state.started(None)
            raise
        if runtime.size > 1:
            _state.started(runtime)
            if runtime.rank != 0:
                _serve_until_done()
            atexit.register(shutdown)
            return
        _state.started(None)
        del runtime
    workers = num_workers if num_workers is not None else int(num_cpus or os.cpu_count() or 1)
    if workers < 0:
        raise ValueError(f"gyre.rt.init: num_workers must be >= 0, not {workers}")
    if workers == 0:
        _state.runtime = _C.rt.Runtime(rank=0, size=1, threads=threads, cpus=cpus)
        atexit.register(shutdown)
        return
    secret = secrets.token_hex(16)
    server, address = _C.rt.store_server(secret)
    env = dict(os.environ, GYRE_RT_STORE=address, GYRE_RT_SECRET=secret, GYRE_RT_SIZE=str(workers + 1))
    _state.store_server = server
    _state.worker_processes = [
        subprocess.Popen([sys.executable, "-m", "gyre.rt._worker"], env=dict(env, GYRE_RT_RANK=str(rank)))
        for rank in range(1, workers + 1)]
    atexit.register(shutdown)
    try:
        _state.runtime = _C.rt.Runtime(rank=0, size=workers + 1, store=address, secret=secret, threads=threads,
                                       cpus=cpus, place_here=False)
    except BaseException:
        shutdown()
        raise


# The launchers' rank variables (docs/launching.md): gyre run, mpirun, Slurm, torchrun.
_RANK_VARIABLES = ("GYRE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK")


def _launched():
    return any(v in os.environ for v in _RANK_VARIABLES)


def _launched_rank():
    for v in _RANK_VARIABLES:
        if v in os.environ:
            return int(os.environ[v])
    return 0


def _serve_until_done():
    """A worker: serve until the driver says it is done, then end this process."""
    _state.runtime.store_wait(_state.DONE_KEY)
    _state.runtime = None
    sys.exit(0)


def shutdown():
    """Ends the runtime: the worker processes (gyre.rt.init's, or a job's other ranks) stop once
    their calls are done. Called at exit."""
    runtime = _state.runtime
    if runtime is not None and runtime.rank == 0 and runtime.size > 1:
        try:
            runtime.store_set(_state.DONE_KEY, b"1")
        except Exception:  # the store's host is gone: the workers see their peer lost
            pass
    for p in _state.worker_processes:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    _state.worker_processes = []
    _state.runtime = None
    del runtime
    _state.store_server = None
    _serialization.remove_shared_left(os.getpid())


def _check_options(options, allowed, what):
    unknown = set(options) - allowed
    if unknown:
        raise TypeError(f"gyre.rt: {what} got unsupported option(s) {sorted(unknown)} (it takes {sorted(allowed)})")
    if options.get("num_returns", 1) != 1:
        raise ValueError("gyre.rt: num_returns other than 1 is not supported; return a tuple")


def _name_of(obj):
    return getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))


class RemoteFunction:
    """A function made remote by @gyre.rt.remote: f.remote(*args) runs it somewhere in the job and
    returns an ObjectRef of its result."""

    def __init__(self, fn, options=None):
        _check_options(options or {}, _TASK_OPTIONS, "a remote function")
        self._fn = fn
        self._options = dict(options or {})
        self._pickled = None  # the function, put once into the object store
        self._what = f"task {_name_of(fn)}"
        self._retries = int(self._options.get("max_retries", 3))
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"Remote functions cannot be called directly. Instead of running '{_name_of(self._fn)}()', "
                        f"try '{_name_of(self._fn)}.remote()'.")

    def options(self, **options):
        merged = dict(self._options)
        merged.update(options)
        return RemoteFunction(self._fn, merged)

    def remote(self, *args, **kwargs):
        runtime = _state.get()
        if self._pickled is None:
            self._pickled = _Pickled(_serialization.dumps(self._fn))
        payload, keep = _pickled_call(self._pickled, args, kwargs, self._what)
        future = runtime.submit(payload, keep, max_retries=self._retries)
        # The result's reference holds the function's object too, so that a remote function made
        # and called at once (ray.remote(f).remote()) lives until its call is answered.
        return ObjectRef(future=future, what=self._what, keep=self._pickled)


def _pickled_call(head, args, kwargs, what):
    """The call's bytes (`head` the function or class, a _Pickled), and the objects it refers to
    (kept until it answers)."""
    try:
        return referenced(lambda: _serialization.dumps_call((head, args, kwargs, _CALLER)))
    except Exception as e:
        raise TypeError(f"gyre.rt: the arguments of {what} cannot be pickled ({type(e).__name__}: {e})") from e


class _Pickled:
    """A function or class pickled once and put into the object store: a call carries only its
    reference, and each process unpickles it once, from the store (mapped, on this host)."""
    __slots__ = ("ref",)
    _cache = {}

    def __init__(self, data):
        self.ref = ObjectRef(obj=_state.get().put([data]))

    def __reduce__(self):
        return _unpickled, (self.ref._id, self.ref._owner)


def _unpickled(id, owner):
    key = (owner, id)
    obj = _Pickled._cache.get(key)
    if obj is None:
        obj = _Pickled._cache[key] = _serialization.loads(bytes(memoryview(_state.get().get(id, owner))))
    return obj


class ActorClass:
    """A class made remote by @gyre.rt.remote: C.remote(*args) builds an actor somewhere in the job
    and returns its handle; C.options(name=..., max_restarts=..., ...) first to place it."""

    def __init__(self, cls, options=None):
        _check_options(options or {}, _ACTOR_OPTIONS, "an actor class")
        self._cls = cls
        self._options = dict(options or {})
        self._pickled = None

    def __call__(self, *args, **kwargs):
        raise TypeError(f"Actors cannot be instantiated directly. Instead of '{self._cls.__name__}()', use "
                        f"'{self._cls.__name__}.remote()'.")

    def options(self, **options):
        merged = dict(self._options)
        merged.update(options)
        return ActorClass(self._cls, merged)

    def remote(self, *args, **kwargs):
        runtime = _state.get()
        o = self._options
        name = o.get("name")
        if name is not None and o.get("get_if_exists"):
            try:
                return get_actor(name)
            except ValueError:
                pass
        if self._pickled is None:
            self._pickled = _Pickled(_serialization.dumps(self._cls))
        payload, keep = _pickled_call(self._pickled, args, kwargs, f"actor {self._cls.__name__}")
        keep = keep + [self._pickled]  # the class and the constructor's objects, for restarts
        methods = [m for m in dir(self._cls) if callable(getattr(self._cls, m, None)) and not m.startswith("__")]
        key = _state.ACTOR_KEY + name if name is not None else None
        if key is not None:
            reservation = b"reserved:" + os.urandom(8)
            if runtime.store_compare_set(key, reservation) != reservation:
                raise ValueError(f"gyre.rt: the actor name {name!r} is taken (gyre.rt.get_actor({name!r}) gives "
                                 "that actor)")
        try:
            ref = runtime.create_actor(payload, max_restarts=int(o.get("max_restarts", 0)),
                                       max_task_retries=int(o.get("max_task_retries", 0)),
                                       cpus=float(o.get("num_cpus", 0) or 0), memory=int(o.get("memory", 0) or 0),
                                       max_concurrency=int(o.get("max_concurrency", 1)))
        except BaseException:
            if key is not None:
                runtime.store_delete(key)
            raise
        handle = ActorHandle(ref, self._cls.__name__, methods, name)
        handle._keep = keep
        if key is not None:
            runtime.store_set(key, _serialization.dumps(handle))
        return handle


class ActorHandle:
    """A live actor: handle.method.remote(*args) calls it (calls from one caller run in order).
    Handles pickle: pass them to tasks and other actors."""

    def __init__(self, ref, class_name, methods, name=None):
        self._ref, self._class_name, self._methods, self._name = tuple(ref), class_name, list(methods), name
        self._keep = []  # in the creating process: what a rebuilt actor's constructor reads again

    def __getattr__(self, method):
        if method.startswith("__") or method not in self._methods:
            raise AttributeError(f"gyre.rt: actor {self._class_name} has no method {method!r}")
        return _ActorMethod(self, method)

    def __reduce__(self):
        return ActorHandle, (self._ref, self._class_name, self._methods, self._name)

    def __repr__(self):
        return f"ActorHandle({self._class_name}, id={self._ref[0]:x}, process {self._ref[1]})"


class _ActorMethod:
    def __init__(self, handle, name):
        self._handle, self._name = handle, name

    def remote(self, *args, **kwargs):
        what = f"{self._handle._class_name}.{self._name}"
        try:
            payload, keep = referenced(lambda: _serialization.dumps_call((self._name, args, kwargs, _CALLER)))
        except Exception as e:
            raise TypeError(f"gyre.rt: the arguments of {what} cannot be pickled ({type(e).__name__}: {e})") from e
        return ObjectRef(future=_state.get().call(self._handle._ref, payload, keep), what=what)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"Actor methods cannot be called directly. Instead of running 'object.{self._name}()', try "
                        f"'object.{self._name}.remote()'.")


def remote(*args, **options):
    """@gyre.rt.remote or @gyre.rt.remote(num_cpus=..., max_retries=..., ...) on a function or a
    class."""
    def wrap(obj):
        return ActorClass(obj, options) if isinstance(obj, type) else RemoteFunction(obj, options)
    if len(args) == 1 and not options and callable(args[0]):
        return wrap(args[0])
    if args:
        raise TypeError("gyre.rt.remote: use @gyre.rt.remote or @gyre.rt.remote(option=value, ...)")
    return wrap


def get(refs, timeout=None):
    """The value of an ObjectRef, or of each in a list (in order); raises a call's error
    (TaskError, also an instance of the remote error's type), ActorDiedError, or GetTimeoutError
    when `timeout` seconds pass first."""
    if isinstance(refs, ObjectRef):
        return refs.value(timeout)
    if not isinstance(refs, (list, tuple)):
        raise TypeError(f"gyre.rt.get: expected an ObjectRef or a list of them, not {type(refs).__name__}")
    deadline = None if timeout is None else time.monotonic() + timeout
    out = []
    for ref in refs:
        if not isinstance(ref, ObjectRef):
            raise TypeError(f"gyre.rt.get: expected ObjectRefs, got {type(ref).__name__}")
        out.append(ref.value(None if deadline is None else max(0.0, deadline - time.monotonic())))
    return out


def wait(refs, num_returns=1, timeout=None, fetch_local=True):
    """(ready, not_ready): once num_returns of `refs` are ready, or `timeout` seconds passed; each
    list keeps the order of `refs`."""
    refs = list(refs)
    if num_returns < 0 or num_returns > len(refs):
        raise ValueError(f"gyre.rt.wait: num_returns {num_returns} is not between 0 and {len(refs)}")
    pending = [r for r in refs if r._future is not None]
    ready_now = len(refs) - len(pending)
    if pending and ready_now < num_returns:
        _state.get().wait([r._future for r in pending], num_returns - ready_now,
                          -1.0 if timeout is None else float(timeout) * 1000.0)
    ready = [r for r in refs if r.ready()]
    ready_ids = {id(r) for r in ready[:max(num_returns, 0)]}
    if len(ready) > num_returns:  # as Ray: at most num_returns in the first list
        ready = ready[:num_returns]
    return ready, [r for r in refs if id(r) not in ready_ids]


def kill(actor, no_restart=True):
    """Ends the actor (its queued and later calls raise ActorDiedError; it is not rebuilt)."""
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"gyre.rt.kill: expected an ActorHandle, not {type(actor).__name__}")
    runtime = _state.get()
    runtime.kill(actor._ref)
    if actor._name is not None:
        runtime.store_delete(_state.ACTOR_KEY + actor._name)


def get_actor(name):
    """The handle of the actor created with options(name=name); ValueError when there is none."""
    value = _state.get().store_get(_state.ACTOR_KEY + name)
    if value is None or value.startswith(b"reserved:"):
        raise ValueError(f"gyre.rt.get_actor: no actor named {name!r}")
    return _serialization.loads(value)


def available_resources():
    runtime = _state.get()
    return {"processes": runtime.size, "threads": runtime.threads}
