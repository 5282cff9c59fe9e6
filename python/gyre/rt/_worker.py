"""A worker process that gyre.rt.init started (run alone): it joins the driver's runtime and serves
tasks and actors until the driver ends. `python3 -m gyre.rt._worker`, with GYRE_RT_RANK, GYRE_RT_SIZE,
GYRE_RT_STORE and GYRE_RT_SECRET from the driver."""
import os
import sys

from gyre import _C

from . import _api, _state


def main():
    env = os.environ
    _state.starting()
    _state.started(_C.rt.Runtime(rank=int(env["GYRE_RT_RANK"]), size=int(env["GYRE_RT_SIZE"]),
                                 store=env["GYRE_RT_STORE"], secret=env["GYRE_RT_SECRET"]))
    _api._serve_until_done()


if __name__ == "__main__":
    sys.exit(main())
