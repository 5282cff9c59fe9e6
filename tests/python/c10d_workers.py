"""The ranks' side of tests/python/test_c10d.py: `python3 c10d_workers.py CASE` runs one case as
one rank of a job the test launched and exits non-zero, with the failed assertion on stderr, when
a check fails. Every case uses plain torch.distributed with backend "gyre"."""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import gyre.torch.distributed  # noqa: F401  registers the backend
from workers import expect_error


def init():
    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=30))
    assert dist.get_backend() == "gyre", dist.get_backend()
    return dist.get_rank(), dist.get_world_size()


def check_equal(got, want, what):
    assert torch.equal(got, want), f"{what}: got {got.tolist()}, want {want.tolist()}"


def case_collectives():
    r, n = init()
    ranks = torch.arange(n, dtype=torch.float64)
    # all_reduce: every op, several dtypes, in place on a non-contiguous view too
    for dtype in (torch.float32, torch.float64, torch.int64, torch.int32, torch.bfloat16):
        for op, want in ((dist.ReduceOp.SUM, ranks.sum() + n), (dist.ReduceOp.MIN, 1.0), (dist.ReduceOp.MAX, n),
                         (dist.ReduceOp.PRODUCT, torch.prod(ranks + 1))):
            t = torch.full((5,), r + 1, dtype=dtype)
            dist.all_reduce(t, op=op)
            check_equal(t, torch.full((5,), float(want)).to(dtype), f"all_reduce {op} {dtype}")
    t = torch.full((3,), 2.0 * (r + 1))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check_equal(t, torch.full((3,), float(n + 1)), "all_reduce AVG")
    m = torch.zeros(4, 6)
    column = m[:, 1]  # non-contiguous: staged and written back
    column.fill_(r)
    dist.all_reduce(column)
    check_equal(m[:, 1], torch.full((4,), ranks.sum().item()), "all_reduce of a non-contiguous view")
    assert m[:, 0].abs().sum() == 0, "all_reduce wrote outside the view"
    # broadcast from the last rank, of any dtype (bool included: only reductions look at dtypes)
    b = torch.arange(7, dtype=torch.int16) if r == n - 1 else torch.zeros(7, dtype=torch.int16)
    dist.broadcast(b, src=n - 1)
    check_equal(b, torch.arange(7, dtype=torch.int16), "broadcast")
    flags = torch.tensor([True, False, r == 0])
    dist.broadcast(flags, src=0)
    check_equal(flags, torch.tensor([True, False, True]), "broadcast of bool")
    # reduce to rank 1 % n
    root = 1 % n
    t = torch.full((2,), float(r))
    dist.reduce(t, dst=root)
    if r == root:
        check_equal(t, torch.full((2,), ranks.sum().item()), "reduce")
    # all_gather, all_gather_into_tensor, all_gather_object
    out = [torch.zeros(2, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(out, torch.tensor([r, 10 * r]))
    check_equal(torch.stack(out), torch.stack([torch.tensor([i, 10 * i]) for i in range(n)]), "all_gather")
    flat = torch.zeros(3 * n)
    dist.all_gather_into_tensor(flat, torch.full((3,), float(r)))
    check_equal(flat, ranks.float().repeat_interleave(3), "all_gather_into_tensor")
    objects = [None] * n
    dist.all_gather_object(objects, {"rank": r, "name": "x" * r})
    assert objects == [{"rank": i, "name": "x" * i} for i in range(n)], objects
    sent = [f"from {r}"] if r == 0 else [None]
    dist.broadcast_object_list(sent, src=0)
    assert sent == ["from 0"], sent
    # gather and scatter to and from the last rank
    gathered = [torch.zeros(2) for _ in range(n)] if r == n - 1 else None
    dist.gather(torch.full((2,), float(r)), gather_list=gathered, dst=n - 1)
    if r == n - 1:
        check_equal(torch.stack(gathered), ranks.float().unsqueeze(1).repeat(1, 2), "gather")
    got = torch.zeros(3)
    parts = [torch.full((3,), 100.0 + i) for i in range(n)] if r == n - 1 else None
    dist.scatter(got, scatter_list=parts, src=n - 1)
    check_equal(got, torch.full((3,), 100.0 + r), "scatter")
    # reduce_scatter, reduce_scatter_tensor
    mine = torch.zeros(2)
    dist.reduce_scatter(mine, [torch.full((2,), float(i + r)) for i in range(n)])
    check_equal(mine, torch.full((2,), float(n * r + ranks.sum().item())), "reduce_scatter")
    mine = torch.zeros(2)
    dist.reduce_scatter_tensor(mine, torch.arange(2.0 * n) + r)
    check_equal(mine, torch.tensor([2.0 * r, 2.0 * r + 1]) * n + ranks.sum().item(), "reduce_scatter_tensor")
    # all_to_all_single, even and with split sizes; all_to_all
    a2a = torch.zeros(n)
    dist.all_to_all_single(a2a, torch.arange(n, dtype=torch.float32) + 10 * r)
    check_equal(a2a, ranks.float() * 10 + r, "all_to_all_single")
    in_splits = [s + 1 for s in range(n)]  # rank r sends s + 1 rows to rank s
    send = torch.cat([torch.full((s + 1,), float(10 * r + s)) for s in range(n)])
    out_splits = [r + 1] * n
    recv = torch.zeros(n * (r + 1))
    dist.all_to_all_single(recv, send, out_splits, in_splits)
    check_equal(recv, torch.cat([torch.full((r + 1,), float(10 * s + r)) for s in range(n)]),
                "all_to_all_single with split sizes")
    outs = [torch.zeros(s + 1) for s in range(n)]
    dist.all_to_all(outs, [torch.full((r + 1,), float(r * n + s)) for s in range(n)])
    for s in range(n):
        check_equal(outs[s], torch.full((s + 1,), float(s * n + r)), "all_to_all")
    dist.barrier()
    # send/recv, isend/irecv, batch_isend_irecv around the ring (messages of 8 MiB: larger than
    # the shared-memory rings, so the batch must progress both directions together)
    if r == 0:
        dist.send(torch.tensor([42.0, 43.0]), dst=n - 1, tag=7)
    elif r == n - 1:
        got = torch.zeros(2)
        dist.recv(got, src=0, tag=7)
        check_equal(got, torch.tensor([42.0, 43.0]), "send/recv")
    big = 2 << 20
    ring_out = torch.full((big,), float(r))
    ring_in = torch.zeros(big)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, ring_out, (r + 1) % n),
                                   dist.P2POp(dist.irecv, ring_in, (r - 1) % n)])
    for q in reqs:
        q.wait()
    assert torch.all(ring_in == float((r - 1) % n)), "batch_isend_irecv"
    req = dist.isend(torch.full((1000,), float(r)), dst=(r + 1) % n)  # torch's ring, unbatched
    got = torch.zeros(1000)
    dist.recv(got, src=(r - 1) % n)
    req.wait()
    assert torch.all(got == float((r - 1) % n)), "isend, recv, wait around the ring"
    view = torch.zeros(2, 1000)[:, 0]  # a non-contiguous receive: copied back when it ran
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((2,), float(r)), (r + 1) % n),
                                   dist.P2POp(dist.irecv, view, (r - 1) % n)])
    for q in reqs:
        q.wait()
    check_equal(view, torch.full((2,), float((r - 1) % n)), "irecv into a non-contiguous view")
    expect_error(RuntimeError, ["not in a group"], dist.batch_isend_irecv,
                 [dist.P2POp(dist.isend, torch.ones(1), (r + 1) % n), dist.P2POp(dist.isend, torch.ones(1), n + 5)])
    t = torch.ones(2)
    dist.all_reduce(t)  # the refused batch sent nothing: the group is in step
    check_equal(t, torch.full((2,), float(n)), "all_reduce after a refused batch")
    if r in (0, 1):
        other = 1 - r
        req = dist.isend(torch.full((4,), float(r)), dst=other) if r == 0 else dist.irecv(got := torch.zeros(4),
                                                                                          src=other)
        req.wait()
        if r == 1:
            check_equal(got, torch.zeros(4), "isend/irecv")
    # async work and its future
    t = torch.ones(3)
    work = dist.all_reduce(t, async_op=True)
    doubled = work.get_future().then(lambda f: f.value()[0] * 2)
    check_equal(doubled.wait(), torch.full((3,), 2.0 * n), "a future's callback")
    assert work.is_completed() and work.is_success()
    # a group of some ranks; the others are not in it
    group = dist.new_group([0, n - 1])
    t = torch.ones(1)
    if r in (0, n - 1):
        dist.all_reduce(t, group=group)
        check_equal(t, torch.full((1,), 2.0), "all_reduce in a new_group")
    dist.destroy_process_group()
    print(f"rank {r}: collectives ok", flush=True)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))


def train(net, optimizer, r, n, steps=5):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(8 * n, 20, generator=g)[8 * r:8 * (r + 1)]
        optimizer.zero_grad()
        net(x).pow(2).mean().backward()
        optimizer.step()


def case_ddp():
    """DDP, a communication hook and ZeroRedundancyOptimizer on the gyre backend train as the same
    model does on gloo (a group of the same ranks) within float tolerance."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    r, n = init()
    gloo = dist.new_group(list(range(n)), backend="gloo")
    results = {}
    for name, group in (("gyre", None), ("gloo", gloo)):
        net = DDP(model(), process_group=group)
        train(net, torch.optim.SGD(net.parameters(), lr=0.1), r, n)
        results[name] = [p.detach().clone() for p in net.parameters()]
    for a, b in zip(results["gyre"], results["gloo"]):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a - b).abs().max()

    def hook(state, bucket):  # the average by hand: a future from Work.get_future()
        t = bucket.buffer().div_(n)
        return dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0])
    net = DDP(model())
    net.register_comm_hook(None, hook)
    train(net, torch.optim.SGD(net.parameters(), lr=0.1), r, n)
    for a, b in zip(net.parameters(), results["gloo"]):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), "DDP with a communication hook"

    net = DDP(model())
    zero = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
    train(net, zero, r, n)
    for a, b in zip(net.parameters(), results["gloo"]):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), "ZeroRedundancyOptimizer"
    dist.destroy_process_group()
    print(f"rank {r}: ddp ok", flush=True)


def case_errors():
    """Wrong calls raise an exception naming what is wrong, on every rank, and the group goes on."""
    r, n = init()
    expect_error(RuntimeError, ["all_reduce", "torch.bool"], dist.all_reduce, torch.ones(2, dtype=torch.bool))
    expect_error(RuntimeError, ["BAND", "not supported"], dist.all_reduce, torch.ones(2, dtype=torch.int64),
                 op=dist.ReduceOp.BAND)
    expect_error(RuntimeError, ["sparse"], dist.all_reduce, torch.ones(2).to_sparse())
    expect_error(RuntimeError, ["recv from any source"], dist.recv, torch.ones(1))
    expect_error(RuntimeError, ["all_gather", "tensors", "ranks"], dist.all_gather, [torch.ones(1)], torch.ones(1))
    expect_error(RuntimeError, ["twice"], dist.init_process_group, "gyre")
    t = torch.ones(3)  # nothing was sent: the group is in step
    dist.all_reduce(t)
    check_equal(t, torch.full((3,), float(n)), "all_reduce after wrong arguments")
    # ranks that disagree on a collective: every rank hears of it; as with torch's own backends the
    # group is then out of step, and every later call says so instead of hanging
    e = expect_error(RuntimeError, ["different collective calls", "count="], dist.all_reduce,
                     torch.ones(4 + 4 * r))
    expect_error(RuntimeError, ["different collective calls"], dist.all_reduce, torch.ones(3))
    dist.destroy_process_group()
    print(f"rank {r}: errors ok ({type(e).__name__})", flush=True)


def case_peer_lost():
    """Rank 1 dies (SIGKILL) while rank 0 waits in an all_reduce: an exception, not a hang."""
    r, _ = init()
    dist.barrier()
    if r == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1 << 20))
    except RuntimeError as e:
        print(f"rank 0: {type(e).__name__} after {time.monotonic() - start:.1f} s: {e}", flush=True)
        return
    raise AssertionError("the all_reduce with a dead peer returned")


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]]()
