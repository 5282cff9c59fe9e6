"""The ranks' side of tests/python/test_horovod.py: Horovod names beyond the core collectives
(capability queries, cross ranks, int16, integer scaling, grouped and sparse allreduces, the
optimizer's sparse gradients and arguments, SyncBatchNorm), each checked against the result
Horovod documents. `python3 horovod_workers.py CASE`."""
import sys
import time
import warnings

import torch

import gyre.torch as hvd
from workers import expect_error


def check_equal(got, want, what):
    assert torch.equal(got, want), f"{what}: got {got.tolist()}, want {want.tolist()}"


def case_names():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    # capability queries: gyre's transports stand where Horovod's MPI/Gloo/NCCL do
    assert isinstance(hvd.mpi_built(), bool) and hvd.gloo_built() is False and hvd.gloo_enabled() is False
    assert hvd.nccl_built() == 0 and not hvd.ccl_built() and not hvd.cuda_built() and not hvd.rocm_built()
    assert not hvd.ddl_built() and hvd.mpi_enabled() is False
    expect_error(ValueError, ["MPI is not enabled"], hvd.mpi_threads_supported)
    # one host: every rank is alone in its cross group
    assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1), (hvd.cross_rank(), hvd.cross_size())
    # int16 travels and reduces
    t = torch.full((5,), r + 1, dtype=torch.int16)
    check_equal(hvd.allreduce(t, op=hvd.Sum), torch.full((5,), n * (n + 1) // 2, dtype=torch.int16), "int16 sum")
    check_equal(hvd.allreduce(t, op=hvd.Max), torch.full((5,), n, dtype=torch.int16), "int16 max")
    check_equal(hvd.broadcast(t, root_rank=n - 1), torch.full((5,), n, dtype=torch.int16), "int16 broadcast")
    check_equal(hvd.allgather(t[:1]), torch.arange(1, n + 1, dtype=torch.int16), "int16 allgather")
    # integer tensors take prescale and postscale factors, as Horovod's: float64, truncated
    ints = torch.full((3,), r + 1, dtype=torch.int32)
    want = sum(int((k + 1) * 1.5) for k in range(n))
    check_equal(hvd.allreduce(ints, op=hvd.Sum, prescale_factor=1.5), torch.full((3,), want, dtype=torch.int32),
                "int32 prescale")
    check_equal(hvd.allreduce(ints, op=hvd.Sum, postscale_factor=0.5),
                torch.full((3,), int(n * (n + 1) // 2 * 0.5), dtype=torch.int32), "int32 postscale")
    check_equal(hvd.allreduce_(ints.clone(), op=hvd.Sum, prescale_factor=2.0),
                torch.full((3,), n * (n + 1), dtype=torch.int32), "int32 in-place prescale")
    # a name may not be given again while its call is in flight (the other ranks join late)
    if r != 0:
        time.sleep(1.0)
    first = hvd.allreduce_async(torch.ones(8), name="grad.w")
    if r == 0:
        expect_error(ValueError, ["same name as another tensor", "grad.w"], hvd.allreduce_async, torch.ones(8),
                     name="grad.w")
    hvd.synchronize(first)
    hvd.synchronize(hvd.allreduce_async(torch.ones(8), name="grad.w"))  # free again once synchronized
    print(f"rank {r}: names ok", flush=True)


def case_grouped():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    group = [torch.full((3,), float(r)), torch.arange(4, dtype=torch.int64) * (r + 1),
             torch.full((2, 2), r + 0.5, dtype=torch.float64), torch.full((1,), float(r + 1))]
    want = [hvd.allreduce(t, op=hvd.Sum) for t in group]
    got = hvd.grouped_allreduce(group, op=hvd.Sum)
    assert isinstance(got, list) and len(got) == len(group)
    for g, w in zip(got, want):
        check_equal(g, w, "grouped_allreduce")
    for g, t in zip(hvd.grouped_allreduce([t.double() for t in group[:1]] + group[2:3]), group[:1] + group[2:3]):
        check_equal(g, hvd.allreduce(t.double()), "grouped_allreduce's average")
    handle = hvd.grouped_allreduce_async(group, op=hvd.Sum)
    outs = hvd.synchronize(handle)
    assert isinstance(outs, tuple) and all(torch.equal(o, w) for o, w in zip(outs, want))
    copies = [t.clone() for t in group]
    returned = hvd.grouped_allreduce_(copies, op=hvd.Sum)
    assert all(a is b for a, b in zip(returned, copies)), "grouped_allreduce_ returns its tensors"
    for c, w in zip(copies, want):
        check_equal(c, w, "grouped_allreduce_")
    handle = hvd.grouped_allreduce_async_(copies, op=hvd.Sum)
    hvd.synchronize(handle)
    assert hvd.poll(handle)
    gathered = hvd.grouped_allgather([torch.full((r + 1,), r), torch.full((1, 2), float(r))])
    check_equal(gathered[0], torch.cat([torch.full((k + 1,), k) for k in range(n)]), "grouped_allgather")
    check_equal(gathered[1], torch.arange(n, dtype=torch.float32).repeat_interleave(2).view(n, 2), "grouped_allgather")
    scattered = hvd.grouped_reducescatter([torch.ones(2 * n, 3) * (r + 1)], op=hvd.Sum)
    check_equal(scattered[0], torch.full((2, 3), float(n * (n + 1) // 2)), "grouped_reducescatter")
    # a sparse allreduce: each rank's entries, summed (duplicates included) or averaged
    dense = torch.zeros(5, 3)
    dense[r % 5] = r + 1.0
    dense[4] = 1.0
    total = hvd.allreduce(dense, op=hvd.Sum)
    result = hvd.sparse_allreduce_async(dense.to_sparse(), name="emb", op=hvd.Sum)
    check_equal(hvd.synchronize(result).to_dense(), total, "sparse_allreduce_async Sum")
    check_equal(hvd.sparse_allreduce_async(dense.to_sparse(), op=hvd.Average)().to_dense(), total / n,
                "sparse_allreduce_async Average")
    expect_error(TypeError, ["sparse"], hvd.sparse_allreduce_async, dense)
    expect_error(TypeError, ["list"], hvd.grouped_allreduce, torch.ones(2))
    print(f"rank {r}: grouped ok", flush=True)


def case_optimizer_options():
    """An embedding with sparse gradients trains as one process on the whole batch; Horovod's
    argument checks."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.EmbeddingBag(20, 4, mode="sum", sparse=True), torch.nn.Linear(4, 2))
    g = torch.Generator().manual_seed(5)
    words, targets = torch.randint(0, 20, (12 * n, 3), generator=g), torch.randn(12 * n, 2, generator=g)

    def train(net, opt, x, y):
        for _ in range(4):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        return [p.detach() for p in net.parameters()]
    net = model()
    alone = train(net, torch.optim.SGD(net.parameters(), lr=0.1), words, targets)
    net = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), named_parameters=net.named_parameters(),
                                   sparse_as_dense=True, gradient_predivide_factor=2.0, groups=2)
    mine = train(net, opt, words[12 * r:12 * (r + 1)], targets[12 * r:12 * (r + 1)])
    for a, b in zip(alone, mine):
        assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()
    net = model()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    expect_error(ValueError, ["gradient_predivide_factor", "op != Average"], hvd.DistributedOptimizer, sgd,
                 op=hvd.Sum, gradient_predivide_factor=2.0)
    expect_error(ValueError, ["only appear once"], hvd.DistributedOptimizer, sgd,
                 groups=[[net[1].weight], [net[1].weight]])
    expect_error(ValueError, ["non-negative integer"], hvd.DistributedOptimizer, sgd, groups=-1)
    expect_error(ValueError, ["backward_passes_per_step must be > 0"], hvd.DistributedOptimizer, sgd,
                 backward_passes_per_step=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hvd.DistributedOptimizer(torch.optim.SGD(model().parameters(), lr=0.1), num_groups=2)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught), caught
    print(f"rank {r}: optimizer_options ok", flush=True)


def case_sync_batch_norm():
    """SyncBatchNorm on each rank's rows equals BatchNorm on the whole batch: outputs, running
    statistics and input gradients (of the sum of every rank's loss)."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4 * n, 3, 5, generator=g) * 2 + 1
    weights = torch.randn(4 * n, 3, 5, generator=g)
    whole = torch.nn.BatchNorm1d(3)
    sync = hvd.SyncBatchNorm(3)
    with torch.no_grad():
        for bn in (whole, sync):
            bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
            bn.bias.copy_(torch.tensor([0.0, -1.0, 3.0]))
    xw = x.clone().requires_grad_()
    reference = whole(xw)
    (reference * weights).sum().backward()
    mine = x[4 * r:4 * (r + 1)].clone().requires_grad_()
    out = sync(mine)
    (out * weights[4 * r:4 * (r + 1)]).sum().backward()
    assert torch.allclose(out, reference[4 * r:4 * (r + 1)], atol=1e-5), (out - reference[4 * r:]).abs().max()
    assert torch.allclose(mine.grad, xw.grad[4 * r:4 * (r + 1)], atol=1e-4), (mine.grad - xw.grad[4 * r:]).abs().max()
    assert torch.allclose(sync.running_mean, whole.running_mean, atol=1e-5), (sync.running_mean, whole.running_mean)
    assert torch.allclose(sync.running_var, whole.running_var, atol=1e-4), (sync.running_var, whole.running_var)
    sync.eval()
    whole.eval()
    assert torch.allclose(sync(mine.detach()), whole(mine.detach()), atol=1e-5)
    expect_error(ValueError, ["at least 2D"], sync, torch.ones(3))
    print(f"rank {r}: sync_batch_norm ok", flush=True)


def case_adasum():
    """op=Adasum: orthogonal tensors add, equal ones average; the optimizer applies the Adasum of
    the ranks' steps; a world that is not a power of 2 is refused, as Horovod's."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    if n & (n - 1):
        expect_error(ValueError, ["power of 2"], hvd.allreduce, torch.ones(2), op=hvd.Adasum)
        print(f"rank {r}: adasum ok (refused for {n} ranks)", flush=True)
        return
    check_equal(hvd.allreduce(torch.eye(n)[r] * 3, op=hvd.Adasum), torch.full((n,), 3.0), "orthogonal")
    same = torch.tensor([1.0, -2.0, 0.5])
    assert torch.allclose(hvd.allreduce(same, op=hvd.Adasum), same), "equal tensors average"
    a, b = torch.tensor([1.0, 2.0, 0.0]), torch.tensor([2.0, 0.0, 1.0])
    dot = float(a @ b)
    want = (1 - dot / (2 * float(a @ a))) * a + (1 - dot / (2 * float(b @ b))) * b
    got = hvd.allreduce(a if r % 2 == 0 else b, op=hvd.Adasum)
    if n == 2:
        assert torch.allclose(got, want, atol=1e-6), (got, want)
    assert torch.equal(got, hvd.broadcast(got, root_rank=0)), "every rank has the same result"
    net = torch.nn.Linear(3, 1)
    torch.nn.init.constant_(net.weight, 0.5)
    torch.nn.init.zeros_(net.bias)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), op=hvd.Adasum)
    x = torch.eye(3)[r % 3].unsqueeze(0) * (r + 1)
    before = [p.detach().clone() for p in net.parameters()]
    opt.zero_grad()
    net(x).sum().backward()
    local = [b - 0.1 * p.grad for b, p in zip(before, net.parameters())]
    deltas = [hvd.allreduce(l - b, op=hvd.Adasum) for l, b in zip(local, before)]
    opt.step()
    for p, b, d in zip(net.parameters(), before, deltas):
        assert torch.allclose(p.detach(), b + d, atol=1e-6), (p, b + d)
        assert torch.equal(p.detach(), hvd.broadcast(p.detach(), root_rank=0))
    print(f"rank {r}: adasum ok", flush=True)


def case_mismatch_recovers():
    """Every call is coordinated before it moves anything (as Horovod's coordinator does): ranks that
    disagree get, every one of them, an error naming both calls, and the next call works. A call
    that one rank's own checks refuse raises on the others too."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    odd = min(r, 1)  # rank 0 differs from the others
    after = lambda what: check_equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(n)), what)
    expect_error(hvd.CallMismatchError, ["Mismatched tensor shapes", "[4]", "[8]"], hvd.allreduce,
                 torch.ones(4 + 4 * odd))
    after("allreduce after shapes")
    expect_error(RuntimeError, ["Mismatched broadcast root ranks", "root 0", "root 1"], hvd.broadcast, torch.ones(2),
                 root_rank=odd)
    check_equal(hvd.broadcast(torch.full((2,), float(r)), root_rank=0), torch.zeros(2), "broadcast after roots")
    expect_error(hvd.CallMismatchError, ["Mismatched data types", "int64", "float32"], hvd.allreduce,
                 torch.ones(2, dtype=torch.int64 if r == 0 else torch.float32))
    after("allreduce after dtypes")
    expect_error(hvd.CallMismatchError, ["Mismatched names", "'a'", "'b'"], hvd.allreduce, torch.ones(2),
                 name="a" if r == 0 else "b")
    expect_error(hvd.CallMismatchError, ["Mismatched operations", "allreduce", "allgather"],
                 hvd.allreduce if r == 0 else hvd.allgather, torch.ones(2))
    expect_error(hvd.CallMismatchError, ["Mismatched allgather tensor shapes", "[1, 2]", "[1, 3]"], hvd.allgather,
                 torch.ones(1, 2 + odd))
    expect_error(hvd.CallMismatchError, ["Mismatched reduction ops"], hvd.allreduce, torch.ones(2),
                 op=hvd.Sum if r == 0 else hvd.Max)
    expect_error(hvd.CallMismatchError, ["Mismatched prescale factors"], hvd.allreduce, torch.ones(2),
                 prescale_factor=1.0 + odd)
    # asynchronous calls: the error comes from synchronize
    handle = hvd.allreduce_async(torch.ones(3 + odd))
    expect_error(hvd.CallMismatchError, ["Mismatched tensor shapes"], hvd.synchronize, handle)
    after("allreduce after an async mismatch")
    # rank 0's own checks refuse its call (a dtype gyre does not reduce, a bad root): the others raise
    if r == 0:
        expect_error(TypeError, ["complex64"], hvd.allreduce, torch.ones(2, dtype=torch.complex64))
        expect_error(ValueError, ["root_rank 99"], hvd.broadcast_, torch.ones(2), root_rank=99)
        expect_error(TypeError, ["op must be"], hvd.allreduce, torch.ones(2), op="sum")
    else:
        expect_error(hvd.CallMismatchError, ["rank 0's own call was refused", "complex64"], hvd.allreduce,
                     torch.ones(2))
        expect_error(hvd.CallMismatchError, ["rank 0's own call was refused", "root_rank 99"], hvd.broadcast_,
                     torch.ones(2), root_rank=0)
        expect_error(hvd.CallMismatchError, ["rank 0's own call was refused", "op must be"], hvd.allreduce,
                     torch.ones(2))
    after("allreduce after refused calls")
    print(f"rank {r}: mismatch_recovers ok", flush=True)


def case_join():
    """hvd.join() as Horovod's tests use it: the joined rank contributes zeros to the others'
    allreduces (their average still over every rank), no rows to their allgathers, takes part in
    their barriers, broadcasts and DistributedOptimizer steps, and join() returns the last rank to
    join, the same on every rank."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    for dtype in (torch.int32, torch.int64, torch.float32, torch.float64):
        for first_join_rank in (0, 1):
            torch.manual_seed(1234)
            a = torch.FloatTensor(5, 5).random_(-100, 100).to(dtype)
            b = torch.FloatTensor(17).random_(-100, 100).to(dtype)
            if r == first_join_rank:
                ret = hvd.join()
            else:
                ha = hvd.allreduce_async(a, name="tensor_a", average=True)
                hb = hvd.allreduce_async(b, name="tensor_b", average=True)
                got_a, got_b = hvd.synchronize(ha), hvd.synchronize(hb)
                # integers average as Horovod's do: scaled by 1/n in float64, truncated toward zero
                div = (lambda t: torch.div(t, n, rounding_mode="trunc")) if not dtype.is_floating_point else (
                    lambda t: t / n)
                assert torch.allclose(got_a, div(a * (n - 1))), (dtype, got_a, div(a * (n - 1)))
                assert torch.allclose(got_b, div(b * (n - 1))), (dtype, got_b)
                ret = hvd.join()
            assert ret != first_join_rank, (ret, first_join_rank)
            assert hvd.allgather_object(ret) == [ret] * n
    # allgather, Min/Max, barrier and broadcast from an active root; a joined root is refused
    if r == 0:
        assert hvd.join() == n - 1
    else:
        got = hvd.allgather(torch.full((r,), r))
        check_equal(got, torch.cat([torch.full((k,), k) for k in range(1, n)]), "allgather with a joined rank")
        check_equal(hvd.allreduce(torch.full((2,), float(r)), op=hvd.Min), torch.ones(2), "min with a joined rank")
        check_equal(hvd.allreduce(torch.full((2,), -float(r)), op=hvd.Max), -torch.ones(2), "max")
        hvd.barrier()
        check_equal(hvd.broadcast(torch.full((2,), float(r)), root_rank=1), torch.ones(2), "broadcast from rank 1")
        expect_error(hvd.CallMismatchError, ["root rank 0 has joined"], hvd.broadcast, torch.ones(2), root_rank=0)
        expect_error(hvd.CallMismatchError, ["rank 0 has joined", "alltoall"], hvd.alltoall, torch.ones(n - 0))
        assert hvd.join() == n - 1
    # DistributedOptimizer: rank 0 runs out of data after 2 steps, the others after 4
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=net.named_parameters())
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    reference = torch.nn.Linear(3, 2)  # what every rank's model must be: zeros from the joined rank
    reference.load_state_dict(net.state_dict())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    xs = [torch.randn(4, 3) * (k + 1) for k in range(n * 4)]
    for step in range(4):
        active = [k for k in range(n) if step < (2 if k == 0 else 4)]
        if r in active:
            opt.zero_grad()
            net(xs[step * n + r]).pow(2).sum().backward()
            hvd.allreduce(torch.ones(1))  # a call between backward and step (its buckets on their own link)
            opt.step()
        elif step == 2:
            assert hvd.join() == n - 1
        ref_opt.zero_grad()
        sum(reference(xs[step * n + k]).pow(2).sum() for k in active).div(n).backward()
        ref_opt.step()
    if r != 0:
        assert hvd.join() == n - 1
    for p, q in zip(net.parameters(), reference.parameters()):
        assert torch.allclose(p.detach(), q.detach(), atol=1e-5), (r, p, q)
    # a rank that joins without an optimizer the others step (garbage-collected): they raise, no hang
    other = torch.nn.Linear(2, 1)
    opt2 = hvd.DistributedOptimizer(torch.optim.SGD(other.parameters(), lr=0.1), named_parameters=other.named_parameters())
    if r == 0:
        del opt2
        assert hvd.join() == n - 1
    else:
        opt2.zero_grad()
        other(torch.ones(1, 2)).sum().backward()
        # its one bucket goes in step() (a larger model's first ones from backward, which raises then)
        expect_error(RuntimeError, ["has joined (gyre.join) without DistributedOptimizer #1"], opt2.step)
        assert hvd.join() == n - 1
    print(f"rank {r}: join ok", flush=True)


def case_lars_lamb():
    """gyre.torch.LARS and LAMB (the C++ updates) under DistributedOptimizer equal the papers' formulas
    written out here, on one process over the whole batch; their state goes through state_dict()
    and broadcast_optimizer_state."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()

    def lars_reference(params, grads, buffers, lr, momentum, wd, eta, eps):
        for p, g, k in zip(params, grads, range(len(params))):
            adapt = p.dim() > 1
            decay = wd if adapt else 0.0
            trust = 1.0
            if adapt and p.norm() > 0 and g.norm() > 0:
                trust = eta * float(p.norm()) / (float(g.norm()) + decay * float(p.norm()) + eps)
            d = (g + decay * p) * trust
            buffers[k] = d.clone() if buffers[k] is None else buffers[k] * momentum + d
            p -= lr * buffers[k]

    def lamb_reference(params, grads, moments, step, lr, b1, b2, eps, wd):
        for p, g, m in zip(params, grads, moments):
            m[0].mul_(b1).add_(g, alpha=1 - b1)
            m[1].mul_(b2).addcmul_(g, g, value=1 - b2)
            u = (m[0] / (1 - b1 ** step)) / ((m[1] / (1 - b2 ** step)).sqrt() + eps)
            adapt = p.dim() > 1
            if adapt:
                u = u + wd * p
            trust = float(p.norm()) / float(u.norm()) if adapt and p.norm() > 0 and u.norm() > 0 else 1.0
            p -= lr * trust * u

    for kind in ("lars", "lamb"):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
        reference = [p.detach().clone() for p in net.parameters()]
        inner = (hvd.LARS(net.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-3, eta=0.01) if kind == "lars"
                 else hvd.LAMB(net.parameters(), lr=0.05, weight_decay=1e-2))
        opt = hvd.DistributedOptimizer(inner, named_parameters=net.named_parameters())
        buffers = [None] * len(reference)
        moments = [[torch.zeros_like(p), torch.zeros_like(p)] for p in reference]
        for step in range(1, 4):
            x, y = torch.randn(4 * n, 6), torch.randint(0, 3, (4 * n,))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x[4 * r:4 * r + 4]), y[4 * r:4 * r + 4]).backward()
            opt.step()
            ref = [p.clone().requires_grad_() for p in reference]
            out = torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(x, ref[0], ref[1])), ref[2], ref[3])
            grads = torch.autograd.grad(torch.nn.functional.cross_entropy(out, y), ref)
            with torch.no_grad():
                if kind == "lars":
                    lars_reference(reference, grads, buffers, 0.5, 0.9, 1e-3, 0.01, 1e-9)
                else:
                    lamb_reference(reference, grads, moments, step, 0.05, 0.9, 0.999, 1e-6, 1e-2)
            for p, q in zip(net.parameters(), reference):
                assert torch.allclose(p.detach(), q, atol=1e-5), (kind, step, p, q)
        state = opt.state_dict()["state"][0]
        assert set(state) == ({"momentum_buffer"} if kind == "lars" else {"step", "exp_avg", "exp_avg_sq"}), state
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    expect_error(ValueError, ["LARS: momentum"], hvd.LARS, net.parameters(), momentum=1.5)
    expect_error(ValueError, ["LAMB: betas"], hvd.LAMB, net.parameters(), betas=(0.9, 1.0))
    print(f"rank {r}: lars_lamb ok", flush=True)


def case_compression():
    """DistributedOptimizer with the lossy compressors: top-k at ratio 1 is the plain average; top-k
    and PowerSGD keep every rank's model the same and train; neither compresses a lone allreduce."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()

    def train(compression, steps):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
        opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.05), compression=compression,
                                       named_parameters=net.named_parameters())
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(64 * n, 32, generator=gen)
        y = x[:, :4].sum(1, keepdim=True)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x[64 * r:64 * r + 64]), y[64 * r:64 * r + 64])
            loss.backward()
            opt.step()
            losses.append(hvd.allreduce(loss.detach()).item())
        return net, losses

    plain, plain_losses = train(hvd.Compression.none, 5)
    full, _ = train(hvd.Compression.topk(1.0), 5)
    for p, q in zip(plain.parameters(), full.parameters()):
        assert torch.allclose(p, q, atol=1e-6), "top-k at ratio 1 is the plain average"
    for compression in (hvd.Compression.topk(0.1), hvd.Compression.powersgd(2)):
        net, losses = train(compression, 40)
        assert losses[-1] < 0.7 * losses[0], (compression, losses[0], losses[-1])
        for p in net.parameters():
            assert torch.equal(p.detach(), hvd.broadcast(p.detach(), root_rank=0)), compression
    expect_error(TypeError, ["topk", "DistributedOptimizer"], hvd.allreduce, torch.ones(2),
                 compression=hvd.Compression.topk(0.5))
    print(f"rank {r}: compression ok", flush=True)


def case_model_parallel():
    """gyre.torch.Pipeline (every schedule) and FullyShardedDataParallel over an nn.Sequential written
    in Python train as the unsplit model does on the whole batch."""
    hvd.init()
    r, n = hvd.rank(), hvd.size()

    def make():
        torch.manual_seed(0)
        layers = []
        for k in range(6):
            layers += [torch.nn.Linear(8 if k == 0 else 12, 12), torch.nn.Tanh()]
        return torch.nn.Sequential(*layers, torch.nn.Linear(12, 4))

    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(6 * n, 8, generator=gen), torch.randint(0, 4, (6 * n,), generator=gen)
    loss_fn = torch.nn.functional.cross_entropy

    def reference(steps, optimizer):
        model = make()
        opt = optimizer(model.parameters())
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        return model, float(loss)

    want, want_loss = reference(2, lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9))
    for schedule, virtual in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zero-bubble", 1)):
        model = make()
        pipe = hvd.Pipeline(model, micro_batches=2 * n, schedule=schedule, virtual_stages=virtual)
        opt = torch.optim.SGD(pipe.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            loss = pipe.step(x, y, loss_fn)
            opt.step()
        assert abs(loss - want_loss) < 1e-5, (schedule, loss, want_loss)
        assert 0 <= pipe.last_step()["bubble"] < 1
        out = pipe(x)
        assert (out is not None) == pipe.holds_last_stage()
        pipe.gather()
        for p, q in zip(model.parameters(), want.parameters()):
            assert torch.allclose(p, q, atol=1e-5), (schedule, p, q)
    want, _ = reference(3, lambda ps: torch.optim.Adam(ps, lr=0.01))
    model = make()
    fsdp = hvd.FullyShardedDataParallel(model)
    assert fsdp.state_bytes() < fsdp.full_parameter_bytes() / n + 4096, (fsdp.state_bytes(), fsdp.full_parameter_bytes())
    opt = torch.optim.Adam(fsdp.parameters(), lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        loss_fn(fsdp(x[6 * r:6 * r + 6]), y[6 * r:6 * r + 6]).backward()
        opt.step()
    state = fsdp.full_state_dict()
    for k, v in want.state_dict().items():
        assert torch.allclose(state[k], v, atol=1e-5), (k, state[k], v)
    expect_error(TypeError, ["torch.nn.Sequential"], hvd.Pipeline, torch.nn.Linear(2, 2))
    print(f"rank {r}: model_parallel ok", flush=True)


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]]()
