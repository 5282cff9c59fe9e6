"""This process's gyre.rt runtime (set by gyre.rt.init, in the driver and in every worker)."""
runtime = None
worker_processes = []   # the processes gyre.rt.init started (run alone)
store_server = None     # their TCP store, in the driver
DONE_KEY = "gyre-rt-py/done"
ACTOR_KEY = "gyre-rt-py/actor/"


def get():
    if runtime is None:
        raise RuntimeError("gyre.rt: not initialised; call gyre.rt.init() first")
    return runtime
