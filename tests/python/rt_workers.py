"""The driver side of tests/python/test_rt.py: each case a Ray-shaped program on gyre.rt, run alone
(gyre.rt.init starts local worker processes) or as rank 0 of a `gyre run` job. `python3
rt_workers.py CASE`; prints "CASE ok" at the end."""
import os
import signal
import sys
import threading
import time

import numpy as np
import torch

import gyre.rt as ray
from workers import expect_error


@ray.remote
def square(x):
    return x * x


@ray.remote
def add(a, b):
    return a + b


@ray.remote
def where():
    return os.getpid()


@ray.remote
def fails(x):
    raise KeyError(f"no key {x}")


@ray.remote
def first_of(refs):
    return ray.get(refs[0])  # a nested ObjectRef stays a reference: the task gets it itself


@ray.remote
class Counter:
    def __init__(self, start=0):
        self.n = start

    def add(self, k=1):
        self.n += k
        return self.n

    def pid(self):
        return os.getpid()


@ray.remote
def bump(counter, k):
    return ray.get(counter.add.remote(k))  # an actor handle passed to a task


def case_basics():
    ray.init(num_workers=2)
    assert ray.SERIALIZER == "cloudpickle"
    assert ray.get([square.remote(i) for i in range(6)]) == [0, 1, 4, 9, 16, 25]
    assert ray.get(add.remote(square.remote(3), square.remote(4))) == 25, "refs as arguments are resolved"
    assert ray.get(first_of.remote([ray.put(41)])) == 41, "nested refs stay references"
    pids = {ray.get(where.remote()) for _ in range(12)}
    assert len(pids) == 2 and os.getpid() not in pids, ("tasks spread over the workers", pids)
    local = 7
    assert ray.get(ray.remote(lambda: local * 6).remote()) == 42, "a closure from the driver travels by value"
    e = expect_error(KeyError, ["task fails raised KeyError", "no key 3", "Remote traceback", "rt_workers.py"],
                     ray.get, fails.remote(3))
    assert isinstance(e, ray.TaskError)
    expect_error(TypeError, ["cannot be called directly", "square.remote()"], square, 2)
    # get with a time-out, wait
    slow = ray.remote(lambda: time.sleep(1.0) or "late").remote()
    expect_error(ray.GetTimeoutError, ["time-out"], ray.get, slow, timeout=0.05)
    fast = square.remote(5)
    ready, rest = ray.wait([slow, fast], num_returns=1, timeout=5)
    assert ready == [fast] and rest == [slow], (ready, rest)
    ready, rest = ray.wait([slow], num_returns=1, timeout=0.01)
    assert ready == [] and rest == [slow]
    assert ray.get(slow) == "late"
    print("basics ok", flush=True)


def case_actors():
    ray.init(num_workers=2)
    c = Counter.options(name="counter").remote(10)
    for _ in range(5):
        c.add.remote(1)
    assert ray.get(c.add.remote(0)) == 15, "calls from one caller run in order"
    same = ray.get_actor("counter")
    assert ray.get(same.add.remote(5)) == 20
    assert ray.get(bump.remote(c, 2)) == 22, "a handle passed to a task calls the same actor"
    expect_error(ValueError, ["name 'counter' is taken"], Counter.options(name="counter").remote)
    expect_error(ValueError, ["no actor named 'nobody'"], ray.get_actor, "nobody")
    expect_error(AttributeError, ["no method 'missing'"], getattr, c, "missing")
    ray.kill(c)
    expect_error(ray.ActorDiedError, ["killed"], ray.get, c.add.remote(1))
    expect_error(ValueError, ["no actor named 'counter'"], ray.get_actor, "counter")
    broken = ray.remote(type("Broken", (), {"__init__": lambda self: 1 / 0, "f": lambda self: 1})).remote()
    expect_error(ray.ActorDiedError, ["ZeroDivisionError"], ray.get, broken.f.remote())
    # num_cpus and memory place an actor where they are free; none fits: refused at once, naming the offers
    placed = Counter.options(num_cpus=1, memory=1 << 20).remote(0)
    assert ray.get(placed.add.remote(1)) == 1
    expect_error(ValueError, ["no process can hold an actor of 1000", "offered"],
                 Counter.options(num_cpus=1000).remote)
    expect_error(ValueError, ["no process can hold an actor of", "bytes of memory"],
                 Counter.options(memory=1 << 60).remote)
    expect_error(TypeError, ["unsupported option(s) ['resources']"], Counter.options, resources={"GPU": 1})
    # max_concurrency: two calls overlap
    slow = ray.remote(type("Slow", (), {"wait": lambda self: time.sleep(0.5) or time.monotonic()}))
    s = slow.options(max_concurrency=2).remote()
    start = time.monotonic()
    ray.get([s.wait.remote(), s.wait.remote()])
    assert time.monotonic() - start < 0.95, "max_concurrency=2 runs two calls at once"
    print("actors ok", flush=True)


def case_objects():
    ray.init(num_workers=2)
    a = np.arange(1 << 20, dtype=np.float32)
    ref = ray.put(a)
    got = ray.get(ref)
    assert isinstance(got, np.ndarray) and not got.flags.writeable, "a get maps the object read-only"
    assert np.array_equal(got, a)
    t = torch.arange(6.0).reshape(2, 3)
    back = ray.get(ray.put(t))
    assert torch.equal(back, t) and back.shape == (2, 3)
    total = ray.remote(lambda x: float(x.sum()))
    assert ray.get(total.remote(ref)) == float(a.sum()), "another process maps it too"
    # a large result comes through /dev/shm: mapped read-only by the caller, its file gone at once
    big = ray.remote(lambda n: np.full(n, 3, dtype=np.int32))
    result = big.remote(1 << 19)
    arr = ray.get(result)
    assert not arr.flags.writeable and int(arr.sum()) == 3 << 19 and ray.get(result) is arr
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"gyre-rt-py-{os.getpid()}-")]
    assert ray.get(total.remote(result)) == float(3 << 19), "a shared result passed on travels as its value"
    big.remote(1 << 19)  # dropped unread: its file goes at shutdown
    expect_error(TypeError, ["cannot be pickled"], square.remote, threading.Lock())
    # a freed object: the reference that kept it is gone
    stale = ray.get(ray.remote(lambda: ray.put(5)).remote())  # put by a task, freed when it returned
    expect_error(ray.TaskError, ["freed"], ray.get, add.remote(stale, 1))
    print("objects ok", flush=True)


def case_faults():
    ray.init(num_workers=3)
    victim = Counter.options(max_restarts=1, max_task_retries=1).remote(0)
    pid = ray.get(victim.pid.remote())
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    # the actor is rebuilt in a live process (its constructor again) and its next call goes there
    assert ray.get(victim.add.remote(3), timeout=30) == 3
    assert ray.get(victim.pid.remote()) != pid
    # a task whose process dies under it runs again elsewhere (max_retries)
    hang = ray.remote(lambda: (time.sleep(0.3), os.getpid())[1])
    refs = [hang.options(max_retries=2).remote() for _ in range(6)]
    time.sleep(0.1)
    live = [p.pid for p in ray._state.worker_processes if p.poll() is None]
    os.kill(live[0], signal.SIGKILL)
    pids = ray.get(refs, timeout=30)  # every one answers: those of the lost process ran again
    assert live[0] not in pids, (live[0], pids)
    # without retries, get raises naming the task
    others = [p.pid for p in ray._state.worker_processes if p.poll() is None and p.pid != live[0]]
    doomed = hang.options(max_retries=0).remote()
    time.sleep(0.1)
    os.kill(others[0], signal.SIGKILL)
    expect_error(ray.TaskError, ["task case_faults.<locals>.<lambda> failed", "was lost"], ray.get, doomed, timeout=30)
    print("faults ok", flush=True)


def case_in_job():
    """As rank 0 of `gyre run -np 3`: the job's other ranks serve (the driver, as Ray's, runs none)."""
    ray.init()
    pids = {ray.get(where.remote()) for _ in range(12)}
    assert len(pids) == 2 and os.getpid() not in pids, pids
    c = Counter.remote(1)
    assert ray.get(c.add.remote(2)) == 3
    print("in_job ok", flush=True)


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]]()
