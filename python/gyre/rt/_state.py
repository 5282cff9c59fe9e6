"""This process's gyre.rt runtime (set by gyre.rt.init, in the driver and in every worker)."""
import threading

runtime = None
worker_processes = []   # the processes gyre.rt.init started (run alone)
store_server = None     # their TCP store, in the driver
DONE_KEY = "gyre-rt-py/done"
ACTOR_KEY = "gyre-rt-py/actor/"

# A process that serves calls gets its first ones from the runtime's threads as soon as the C++
# Runtime has joined the job, before its constructor has returned to Python and `runtime` is set:
# such a call waits here for it instead of finding no runtime. Set while no Runtime is being made.
_started = threading.Event()
_started.set()


def starting():
    """This process is making its Runtime: calls that come meanwhile wait for started()."""
    _started.clear()


def started(rt):
    """The Runtime made by starting()'s process (None: it will serve no calls after all)."""
    global runtime
    runtime = rt
    _started.set()


def get():
    if runtime is None:
        _started.wait(120)
    if runtime is None:
        raise RuntimeError("gyre.rt: not initialised; call gyre.rt.init() first")
    return runtime
