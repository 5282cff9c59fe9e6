"""The ranks' side of tests/python/test_gyre.py: `python3 workers.py CASE` runs one case as one
rank of a job the test launched (gyre run, or torchrun's variables set by the test) and exits
non-zero, with the failed assertion on stderr, when a check fails."""
import os
import signal
import sys
import time

import torch

import gyre
import gyre.torch as hvd


def expect_error(kind, words, call, *args, **kwargs):
    """call(*args) must raise `kind` whose message holds each of `words`."""
    try:
        call(*args, **kwargs)
    except kind as e:
        for w in words:
            assert w in str(e), f"{kind.__name__} without {w!r}: {e}"
        return e
    raise AssertionError(f"{call.__name__}{args} raised no {kind.__name__}")


def case_collectives():
    gyre.init()
    r, n = gyre.rank(), gyre.size()
    mine = torch.arange(6, dtype=torch.float32) + r  # rank r: [r, r+1, ...]
    expected_sum = torch.arange(6, dtype=torch.float32) * n + n * (n - 1) / 2
    assert torch.equal(gyre.allreduce(mine, op=gyre.Sum), expected_sum)
    assert torch.allclose(gyre.allreduce(mine), expected_sum / n)  # Average is the default
    assert torch.equal(gyre.allreduce(mine, average=False), expected_sum)
    assert torch.equal(gyre.allreduce(mine, op=gyre.Min), torch.arange(6, dtype=torch.float32))
    assert torch.equal(gyre.allreduce(mine, op=gyre.Max), torch.arange(6, dtype=torch.float32) + n - 1)
    assert torch.equal(mine, torch.arange(6, dtype=torch.float32) + r), "allreduce changed its input"
    for dtype in (torch.float64, torch.int64, torch.int32, torch.float16, torch.bfloat16, torch.uint8):
        t = torch.full((5,), r + 1).to(dtype)
        assert gyre.allreduce(t, op=gyre.Sum).tolist() == [n * (n + 1) / 2] * 5, dtype
    # In place: the same tensor and storage come back.
    t = torch.ones(1000) * (r + 1)
    ptr = t.data_ptr()
    out = gyre.allreduce_(t, op=gyre.Sum)
    assert out is t and t.data_ptr() == ptr and torch.all(t == n * (n + 1) / 2)
    # Scaling, compression, async.
    assert torch.allclose(gyre.allreduce(torch.ones(3), op=gyre.Sum, prescale_factor=2.0, postscale_factor=0.5),
                          torch.full((3,), float(n)))
    assert torch.allclose(gyre.allreduce(mine, compression=gyre.Compression.fp16), expected_sum / n)
    assert gyre.allreduce(mine, compression=gyre.Compression.fp16).dtype == torch.float32
    handles = [gyre.allreduce_async(torch.full((100,), float(r + k)), op=gyre.Sum) for k in range(4)]
    while not gyre.poll(handles[-1]):  # poll never blocks; the last one finishes after the others
        time.sleep(0.001)
    assert all(gyre.poll(h) for h in handles)
    for k, h in enumerate(handles):
        assert torch.all(gyre.synchronize(h) == n * k + n * (n - 1) / 2)
    h = gyre.allreduce_async(torch.ones(3), op=gyre.Sum, postscale_factor=0.5)
    assert torch.equal(gyre.synchronize(h), torch.full((3,), n * 0.5))
    assert torch.equal(h.wait(), torch.full((3,), n * 0.5)), "a second wait scaled again"
    for k in range(3):  # dropped unwaited: the handle waits for its collective itself
        gyre.allreduce_async(torch.ones(1 << 16))
    check_ints = gyre.allreduce(torch.ones(3, dtype=torch.int64), op=gyre.Sum, prescale_factor=2.5)
    assert torch.equal(check_ints, torch.full((3,), 2 * n, dtype=torch.int64)), check_ints  # trunc(1 * 2.5) each
    ints = gyre.allreduce_(torch.ones(3, dtype=torch.int32), op=gyre.Sum, postscale_factor=0.5)
    assert torch.equal(ints, torch.full((3,), n // 2, dtype=torch.int32)), ints  # trunc(n * 0.5)
    t = torch.ones(8)
    h = gyre.allreduce_async_(t, op=gyre.Sum)
    assert h.wait() is t and torch.all(t == n)
    # Non-contiguous input: out of place through a copy, in place refused.
    wide = (torch.arange(12, dtype=torch.float32).reshape(3, 4) + r).t()
    assert not wide.is_contiguous()
    assert torch.allclose(gyre.allreduce(wide, op=gyre.Sum), (torch.arange(12.).reshape(3, 4) * n + n * (n - 1) / 2).t())
    expect_error(ValueError, ["allreduce_", "tensor", "contiguous"], gyre.allreduce_, wide)

    # broadcast
    src = torch.arange(10, dtype=torch.float64) * (r + 1)
    b = gyre.broadcast(src, root_rank=n - 1)
    assert torch.equal(b, torch.arange(10, dtype=torch.float64) * n)
    assert torch.equal(src, torch.arange(10, dtype=torch.float64) * (r + 1))
    assert gyre.broadcast_(src, 0) is src and torch.equal(src, torch.arange(10, dtype=torch.float64))
    assert torch.equal(gyre.synchronize(gyre.broadcast_async(torch.tensor([r]), 1)), torch.tensor([1]))
    # allgather, first dimensions differing by rank
    g = gyre.allgather(torch.full((r + 1, 2), r, dtype=torch.int32))
    assert g.shape == (n * (n + 1) // 2, 2)
    assert g[:, 0].tolist() == [k for k in range(n) for _ in range(k + 1)]
    assert torch.equal(gyre.synchronize(gyre.allgather_async(torch.tensor([float(r)]))), torch.arange(n, dtype=torch.float32))
    expect_error(ValueError, ["allgather", "Mismatched allgather tensor shapes", "[1, 1]", "[1, 2]"], gyre.allgather,
                 torch.zeros(1, r + 1))
    g = gyre.allgather(torch.full((0 if r == 0 else 2, 3), float(r)))  # rank 0 has no rows
    assert g.shape == (2 * (n - 1), 3) and g[:, 0].tolist() == [float(k) for k in range(1, n) for _ in range(2)]
    # Gradients flow through allreduce, allgather and broadcast as Horovod's do.
    x = torch.full((2,), float(r + 1), requires_grad=True)
    (gyre.allreduce(x, op=gyre.Sum) * (r + 1)).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), n * (n + 1) / 2)), x.grad
    x = torch.full((1, 2), float(r), requires_grad=True)
    gyre.allgather(x).sum().backward()
    assert torch.allclose(x.grad, torch.ones(1, 2)), x.grad
    x = torch.ones(2, requires_grad=True)
    gyre.broadcast(x, root_rank=0).sum().backward()
    assert torch.equal(x.grad, torch.ones(2) if r == 0 else torch.zeros(2)), x.grad
    # reducescatter: even and uneven rows
    rows = torch.arange(n * 2, dtype=torch.float32).reshape(n * 2, 1) * (r + 1)
    part = gyre.reducescatter(rows, op=gyre.Sum)
    assert part.flatten().tolist() == [(2 * r + k) * n * (n + 1) / 2 for k in range(2)]
    uneven = torch.ones(n + 1, 3)
    part = gyre.reduce_scatter(uneven, op=gyre.Sum)
    assert part.shape == ((2 if r == 0 else 1), 3) and torch.all(part == n)
    # alltoall: equal shares, then rank r sending k+1 rows to rank k
    t = torch.arange(n, dtype=torch.float32) + 10 * r
    assert gyre.alltoall(t).tolist() == [10 * k + r for k in range(n)]
    splits = [k + 1 for k in range(n)]
    t = torch.cat([torch.full((k + 1,), float(r)) for k in range(n)])
    out, received = gyre.alltoall(t, splits=splits)
    assert received.tolist() == [r + 1] * n and out.tolist() == [float(k) for k in range(n) for _ in range(r + 1)]
    out2, received2 = gyre.synchronize(gyre.alltoall_async(t, splits=splits))
    assert torch.equal(out2, out) and torch.equal(received2, received)
    # Rank 0 has no rows and sends nothing; the others send one row to every rank.
    t = torch.full((0 if r == 0 else n, 2), float(r))
    out, received = gyre.alltoall(t, splits=[0 if r == 0 else 1] * n)
    assert received.tolist() == [0] + [1] * (n - 1) and out[:, 0].tolist() == [float(k) for k in range(1, n)]
    expect_error(ValueError, ["alltoall", "Mismatched tensor shapes"], gyre.alltoall, torch.zeros(n, r + 1))
    gyre.barrier()
    # Objects
    assert gyre.broadcast_object({"lr": 0.1, "r": r}, root_rank=1) == {"lr": 0.1, "r": 1}
    assert gyre.allgather_object(("rank", r)) == [("rank", k) for k in range(n)]

    # Bad arguments: Python exceptions that name the argument.
    expect_error(TypeError, ["allreduce", "tensor", "list"], gyre.allreduce, [1.0, 2.0])
    expect_error(TypeError, ["tensor", "torch.complex64"], gyre.allreduce, torch.zeros(2, dtype=torch.complex64))
    expect_error(TypeError, ["tensor", "torch.bool"], gyre.allreduce_, torch.zeros(2, dtype=torch.bool))
    expect_error(TypeError, ["root_rank", "int"], gyre.broadcast, torch.zeros(1), "0")
    expect_error(ValueError, ["root_rank", str(n)], gyre.broadcast, torch.zeros(1), n)
    expect_error(TypeError, ["op"], gyre.allreduce, torch.zeros(1), op="sum")
    expect_error(ValueError, ["splits"], gyre.alltoall, torch.zeros(n), splits=[1] * (n + 1))
    expect_error(TypeError, ["handle"], gyre.synchronize, 3)
    expect_error(TypeError, ["handle"], gyre.poll, "h")
    assert gyre.global_process_set.size() == n and gyre.global_process_set.included()
    expect_error(TypeError, ["process_set"], gyre.allreduce, torch.zeros(1), process_set=0)
    # The communicator still works after refused calls.
    assert gyre.allreduce(torch.ones(1), op=gyre.Sum).item() == n
    print(f"rank {r}: collectives ok", flush=True)


def case_not_initialized():
    expect_error(ValueError, ["gyre.rank", "gyre.init()"], gyre.rank)
    expect_error(ValueError, ["gyre.allreduce", "gyre.init()"], gyre.allreduce, torch.ones(1))
    gyre.init()
    assert gyre.size() == 1 and gyre.rank() == 0 and gyre.local_rank() == 0
    assert torch.equal(gyre.allreduce(torch.ones(3)), torch.ones(3))
    print("not_initialized ok", flush=True)


def model_and_data(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    g = torch.Generator().manual_seed(123)
    return model, torch.randn(64, 10, generator=g), torch.randint(0, 3, (64,), generator=g)


def case_optimizer():
    """Training with DistributedOptimizer on each rank's share equals one process on the whole batch."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    for passes, op, opt_kind in ((1, hvd.Average, "sgd"), (2, hvd.Average, "adam"), (1, hvd.Sum, "sgd")):
        model, x, y = model_and_data(seed=r)  # different start on every rank: broadcast fixes it
        make = (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)) if opt_kind == "sgd" else \
            (lambda p: torch.optim.Adam(p, lr=0.01))
        opt = hvd.DistributedOptimizer(make(model.parameters()), named_parameters=model.named_parameters(),
                                       backward_passes_per_step=passes, op=op)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        reference, _, _ = model_and_data(seed=0)
        ref_opt = make(reference.parameters())
        batch = 8 * n
        for step in range(4):
            opt.zero_grad()
            ref_opt.zero_grad()
            for k in range(passes):
                lo = (step * passes + k) * batch % 64
                xs, ys = x[lo:lo + batch], y[lo:lo + batch]
                mine = slice(r * 8, (r + 1) * 8)
                torch.nn.functional.cross_entropy(model(xs[mine]), ys[mine]).backward()
                # The reference: what the ranks' gradients add up to (mean over ranks of each mean).
                scale = 1.0 if op == hvd.Average else float(n)
                for q in range(n):
                    part = slice(q * 8, (q + 1) * 8)
                    (torch.nn.functional.cross_entropy(reference(xs[part]), ys[part]) * scale / n).backward()
            opt.step()
            ref_opt.step()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), f"{opt_kind} passes={passes} {op}: {name} differs"
    # Every rank ends with the same parameters.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(hvd.broadcast(flat, 0), flat)
    # State that is not the model's: momentum buffers and the learning rate come from the root.
    model, x, y = model_and_data(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.9)
    torch.nn.functional.cross_entropy(model(x[r:r + 4]), y[r:r + 4]).backward()
    opt.step()
    hvd.broadcast_optimizer_state(opt, root_rank=1)
    assert opt.param_groups[0]["lr"] == 0.2
    for p in model.parameters():
        buf = opt.state[p]["momentum_buffer"]
        assert torch.equal(hvd.broadcast(buf, 1), buf), "momentum buffers differ after the broadcast"

    # synchronize, clip, step without synchronizing again; the step's timing; fp16 buckets; a
    # parameter that gets no gradient (its gradient is the average of nothing: zero).
    model, x, y = model_and_data(seed=0)
    unused = torch.nn.Linear(2, 2)
    params = list(model.parameters()) + list(unused.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), compression=hvd.Compression.fp16)
    reference, _, _ = model_and_data(seed=0)
    for step in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[r * 8:(r + 1) * 8]), y[r * 8:(r + 1) * 8]).backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        with opt.skip_synchronize():
            opt.step()
        reference.zero_grad()
        for q in range(n):
            (torch.nn.functional.cross_entropy(reference(x[q * 8:(q + 1) * 8]), y[q * 8:(q + 1) * 8]) / n).backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        with torch.no_grad():
            for q in reference.parameters():
                q -= 0.1 * q.grad
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-3, atol=1e-4), "fp16 with clipping differs from the reference"
    assert all(p.grad is None or torch.all(p.grad == 0) for p in unused.parameters())
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x[:8]), y[:8]).backward()
    opt.step()
    timing = opt.last_step()
    assert timing["step_s"] > 0 and timing["buckets"] >= 1 and timing["bytes"] > 0, timing
    expect_error(ValueError, ["already"], hvd.DistributedOptimizer, opt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expect_error(TypeError, ["optimizer", "torch.optim.Optimizer"], hvd.DistributedOptimizer, model)
    expect_error(TypeError, ["backward_passes_per_step"], hvd.DistributedOptimizer, opt, backward_passes_per_step=1.5)
    expect_error(ValueError, ["backward_passes_per_step"], hvd.DistributedOptimizer, opt, backward_passes_per_step=0)
    expect_error(TypeError, ["params", "state_dict"], hvd.broadcast_parameters, 3)
    print(f"rank {r}: optimizer ok", flush=True)


def case_sampler():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    data = list(range(10 * n + 1))
    sampler = hvd.DistributedSampler(data, shuffle=True, seed=3)
    sampler.set_epoch(2)
    mine = list(sampler)
    every = hvd.allgather_object(mine)
    seen = sorted(i for part in every for i in part)
    assert all(len(p) == len(mine) for p in every)
    assert set(seen) == set(data), "the shards do not cover the data set"
    # ElasticSampler: what the world has not processed yet, dealt over its ranks.
    elastic = hvd.elastic.ElasticSampler(data, shuffle=False)
    assert list(elastic) == list(range(r, 10 * n, n)) and len(elastic) == 10
    elastic.record_batch(1, 3)  # batches 0 and 1 of 3 samples per rank: 6n samples done
    assert elastic.processed_num == 6 * n
    elastic.load_state_dict(elastic.state_dict())  # as a restore or a sync does
    assert list(elastic) == list(range(6 * n + r, 10 * n, n)), list(elastic)
    elastic.record_batch(0, 2)  # counted from where this pass started
    assert elastic.processed_num == 8 * n
    elastic.set_epoch(1)
    assert elastic.processed_num == 0 and len(elastic) == 10
    shuffled = hvd.elastic.ElasticSampler(data, seed=5)
    every = hvd.allgather_object(list(shuffled))
    assert len({i for part in every for i in part}) == 10 * n, "shuffled shards overlap"
    print(f"rank {r}: sampler ok", flush=True)


def case_process_sets():
    gyre.init()
    r, n = gyre.rank(), gyre.size()
    evens = gyre.add_process_set(gyre.ProcessSet(range(0, n, 2)))
    odds = gyre.add_process_set([k for k in range(n) if k % 2 == 1])
    mine, other = (evens, odds) if r % 2 == 0 else (odds, evens)
    total = gyre.allreduce(torch.tensor([float(r)]), op=gyre.Sum, process_set=mine).item()
    assert total == sum(mine.ranks), (total, mine.ranks)
    assert mine.included() and not other.included() and mine.rank() == mine.ranks.index(r)
    assert gyre.broadcast_object(r, root_rank=0, process_set=mine) == mine.ranks[0]
    expect_error(ValueError, ["not in process set"], gyre.allreduce, torch.ones(1), process_set=other)
    gyre.barrier()
    gyre.remove_process_set(odds)
    expect_error(ValueError, ["was not added"], gyre.allreduce, torch.ones(1), process_set=odds)
    print(f"rank {r}: process sets ok", flush=True)


def case_peer_lost():
    """Rank 1 dies (SIGKILL) while rank 0 is inside an allreduce: rank 0 gets gyre.PeerLostError."""
    gyre.init()
    gyre.barrier()
    if gyre.rank() == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        gyre.allreduce(torch.ones(1 << 20))
    except gyre.PeerLostError as e:
        assert isinstance(e, gyre.GyreError) and isinstance(e, RuntimeError)
        print(f"rank 0: PeerLostError after {time.monotonic() - start:.1f} s: {e}", flush=True)
        return
    raise AssertionError("the allreduce with a dead peer returned")


def case_mismatch():
    """Ranks pass tensors of different sizes to one allreduce: every rank raises, and the next call
    works."""
    gyre.init()
    e = expect_error(gyre.CallMismatchError, ["Mismatched tensor shapes", "[4]", "[8]"],
                     gyre.allreduce, torch.ones(4 + 4 * gyre.rank()))
    assert isinstance(e, ValueError) and isinstance(e, RuntimeError)
    assert torch.equal(gyre.allreduce(torch.ones(2), op=gyre.Sum), torch.full((2,), 2.0))
    print(f"rank {gyre.rank()}: {type(e).__name__}: {e}", flush=True)


def case_checkpoint():
    """save_checkpoint/load_checkpoint: the root writes atomically, every rank resumes the same state."""
    import tempfile
    hvd.init()
    r = hvd.rank()
    directory = hvd.broadcast_object(tempfile.mkdtemp(prefix="gyre-pyckpt-") if r == 0 else None, 0)
    path = os.path.join(directory, "ckpt.pt")
    model, x, y = model_and_data(seed=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    assert hvd.load_checkpoint(path, model, opt) is None, "a missing checkpoint loaded something"
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x[r * 8:(r + 1) * 8]), y[r * 8:(r + 1) * 8]).backward()
    opt.step()
    hvd.save_checkpoint(path, model, opt, epoch=3, note="after one step")
    saved = [p.detach().clone() for p in model.parameters()]
    momentum = [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    assert sorted(os.listdir(directory)) == ["ckpt.pt"], os.listdir(directory)  # no temporary left
    other, _, _ = model_and_data(seed=5 + r)  # different weights on every rank
    other_opt = torch.optim.SGD(other.parameters(), lr=0.5)
    extra = hvd.load_checkpoint(path, other, other_opt)
    assert extra == {"epoch": 3, "note": "after one step"}, extra
    for p, q in zip(other.parameters(), saved):
        assert torch.equal(p, q)
    for p, m in zip(other.parameters(), momentum):
        assert torch.equal(other_opt.state[p]["momentum_buffer"], m)
    assert other_opt.param_groups[0]["lr"] == 0.1
    # A checkpoint that cannot be written or read is an error on every rank, not a hang.
    expect_error(RuntimeError, ["save_checkpoint", "rank 0", "no-such-dir"], hvd.save_checkpoint,
                 os.path.join(directory, "no-such-dir", "ckpt.pt"), model)
    if r == 0:
        with open(path, "r+b") as f:
            f.truncate(100)
    expect_error(RuntimeError, ["load_checkpoint", "could not read"], hvd.load_checkpoint, path, model)
    hvd.barrier()
    if r == 0:
        import shutil
        shutil.rmtree(directory)
    print(f"rank {r}: checkpoint ok", flush=True)



def case_tune_outside_a_trial():
    """gyre.tune outside a trial writes nothing; bad reports are errors naming the metric."""
    import gyre.tune
    assert not gyre.tune.in_trial() and gyre.tune.trial_id() == -1 and gyre.tune.checkpoint_dir() == ""
    assert gyre.tune.report(accuracy=0.5) == 0
    expect_error(TypeError, ["accuracy", "str"], gyre.tune.report, accuracy="high")
    expect_error(ValueError, ["no metrics"], gyre.tune.report)
    expect_error(ValueError, ["iteration"], gyre.tune.report, loss=1.0, iteration=0)
    print("tune outside a trial ok", flush=True)


def case_ps():
    """gyre.ps under gyre run --servers 1: bsp SGD equals one process on the whole batch."""
    import gyre.ps
    r, n = int(os.environ["GYRE_RANK"]), int(os.environ["GYRE_WORLD_SIZE"])
    model, x, y = model_and_data(seed=r)  # the servers start everyone from worker 0's values
    opt = gyre.ps.PSOptimizer(model.parameters(), lr=0.1, mode="bsp", momentum=0.9)
    reference, _, _ = model_and_data(seed=0)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        opt.zero_grad()
        lo = step * 8 * n % 64
        torch.nn.functional.cross_entropy(model(x[lo + r * 8:lo + (r + 1) * 8]), y[lo + r * 8:lo + (r + 1) * 8]).backward()
        opt.step()
        ref_opt.zero_grad()
        for q in range(n):
            part = slice(lo + q * 8, lo + (q + 1) * 8)
            (torch.nn.functional.cross_entropy(reference(x[part]), y[part]) / n).backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), f"{name} differs from the reference"
    stats = opt.stats()
    assert stats["steps"] == 3 and stats["pushes"] > 0 and stats["staleness_max"] == 0, stats
    opt.lr = 0.05
    assert abs(opt.lr - 0.05) < 1e-7  # kept as float32
    expect_error(ValueError, ["ssp"], gyre.ps.PSOptimizer, model.parameters(), lr=0.1, mode="often")
    expect_error(ValueError, ["optimizer", "lbfgs"], gyre.ps.PSOptimizer, model.parameters(), lr=0.1,
                 optimizer="lbfgs")
    expect_error(TypeError, ["parameter 0"], gyre.ps.PSOptimizer, [1.0], lr=0.1)
    print(f"rank {r}: ps ok", flush=True)


def elastic_batch(step):
    """Step `step`'s global batch of 12 rows; rank r of n trains on rows r, r + n, ..."""
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(12, 10, generator=g), torch.randint(0, 3, (12,), generator=g)


def case_elastic():
    """Under gyre run --elastic: worker 1 is SIGKILLed at step 7; the others roll back to their last
    commit and go on in a smaller world until a replacement joins (the third membership). Every
    worker ends with the model of one process trained on the whole batches for as many steps."""
    hvd.init()
    worker = int(os.environ["GYRE_ELASTIC_ID"])
    torch.manual_seed(0)
    model = torch.nn.Linear(10, 3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt, step=0)
    worlds = []
    state.register_reset_callbacks([lambda: worlds.append((hvd.elastic.membership(), hvd.size()))])

    @hvd.elastic.run
    def train(state):
        while state.step < 20 or hvd.elastic.membership() < 3:
            assert state.step < 2000, "the replacement never joined"
            r, n = hvd.rank(), hvd.size()
            x, y = elastic_batch(state.step)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[r::n]), y[r::n]).backward()
            opt.step()
            state.step += 1
            if worker == 1 and state.step == 7:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.02)
            if state.step % 5 == 0:
                state.commit()

    train(state)
    torch.manual_seed(0)
    reference = torch.nn.Linear(10, 3)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(state.step):
        x, y = elastic_batch(step)
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), f"worker {worker}: {p} differs from {q}"
    print(f"worker {worker}: elastic ok after {state.step} steps in worlds {worlds}", flush=True)


def trial():
    """A trial of `gyre tune`: reports accuracy = lr * iteration, resuming where the tuner says."""
    import gyre.tune
    lr = float(sys.argv[sys.argv.index("--lr") + 1])
    assert gyre.tune.in_trial() and gyre.tune.trial_id() >= 0 and os.path.isdir(gyre.tune.trial_dir())
    for iteration in range(gyre.tune.start_iteration() + 1, gyre.tune.stop_at() + 1):
        assert gyre.tune.report(accuracy=torch.tensor(lr * iteration), loss=1.0 / iteration) == iteration


if __name__ == "__main__":
    if sys.argv[1] == "trial":
        trial()
        sys.exit(0)
    globals()["case_" + sys.argv[1]]()
