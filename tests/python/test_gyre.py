"""pytest tests of the Python package: each case of workers.py runs as the ranks of a real job,
started by `gyre run` (or, where one rank must die, by the test itself with torchrun's variables),
with 2 and 3 ranks. The package comes from the build tree: GYRE_BUILD_DIR, default build/."""
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GYRE_BUILD_DIR", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
PYTHON = "/usr/bin/python3"
WORKERS = Path(__file__).resolve().parent / "workers.py"
TIMEOUT = 120


def env(**extra):
    e = dict(os.environ)
    e["PYTHONPATH"] = str(BUILD / "python")
    e["OPENBLAS_NUM_THREADS"] = "1"
    e["OMP_NUM_THREADS"] = "1"
    for k in [k for k in e if k.startswith(("GYRE_", "OMPI_", "SLURM_")) or k in ("RANK", "WORLD_SIZE")]:
        del e[k]
    e.update(extra)
    return e


def gyre_run(np, case):
    """`gyre run -np NP python3 workers.py CASE`; returns the completed process."""
    return subprocess.run([str(BUILD / "bin" / "gyre"), "run", "-np", str(np), PYTHON, str(WORKERS), case],
                          env=env(), capture_output=True, text=True, timeout=TIMEOUT)


def check(p, case):
    assert p.returncode == 0, f"{case} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"


def test_package_is_built():
    assert list((BUILD / "python" / "gyre").glob("_C*.so")), (
        f"no gyre._C in {BUILD / 'python' / 'gyre'}: the build did not make the Python package (see cmake's "
        "warning 'gyre's Python package is not built')")


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("case", ["collectives", "optimizer", "sampler", "process_sets", "checkpoint"])
def test_case(case, np):
    p = gyre_run(np, case)
    check(p, case)
    for r in range(np):
        assert f"rank {r}: " in p.stdout, p.stdout


@pytest.mark.parametrize("np", [2, 3])
def test_elastic_job_loses_a_worker_and_takes_in_its_replacement(np):
    """gyre.torch.elastic under gyre run --elastic: worker 1 dies, the others go on without it, its
    replacement (a fresh id) joins them, and every worker ends with the model of one process."""
    p = subprocess.run([str(BUILD / "bin" / "gyre"), "run", "--elastic", "-np", str(np), "--min-np", str(np - 1),
                        "--max-np", str(np), "--max-restarts", "1", "--", PYTHON, str(WORKERS), "elastic"],
                       env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p, "elastic")
    survivors = [w for w in range(np + 1) if w != 1]  # worker np replaces worker 1
    for w in survivors:
        assert f"worker {w}: elastic ok" in p.stdout, p.stdout + p.stderr
    assert f"worker {np}: elastic ok" in p.stdout and f"(3, {np})]" in p.stdout, p.stdout
    assert f"(2, {np - 1})" in p.stdout, p.stdout  # the survivors trained without worker 1
    assert "gyre.elastic: rank" in p.stderr and "lost a peer" in p.stderr, p.stderr
    assert "elastic epoch 3: workers " + ", ".join(str(w) for w in survivors) in p.stderr, p.stderr


@pytest.mark.parametrize("np", [2, 3])
def test_ranks_started_by_mpirun(np):
    """mpirun starts the ranks; gyre.init() meets through OpenMPI's variables."""
    import shutil
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not on PATH (install openmpi-bin)")
    argv = [mpirun, "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    argv += ["-np", str(np), "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS",
             PYTHON, str(WORKERS), "collectives"]
    p = subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p, "collectives under mpirun")
    for r in range(np):
        assert f"rank {r}: " in p.stdout, p.stdout


def test_ranks_started_by_srun_in_a_real_slurm_cluster(tmp_path):
    """srun -n 3 on a one-node Slurm cluster this test starts (tests/slurm/cluster.sh): the ranks meet
    through Slurm's variables and train with DistributedOptimizer, and torch.distributed's backend
    "gyre" finds env://'s variables from Slurm's."""
    cluster, where = ROOT / "tests" / "slurm" / "cluster.sh", tmp_path / "cluster"
    start = subprocess.run(["/bin/bash", str(cluster), "start", str(where)], env=env(), capture_output=True,
                           text=True, timeout=600)
    if start.returncode == 77:
        pytest.skip(start.stderr.strip().splitlines()[-1] if start.stderr.strip() else "Slurm cannot be installed")
    try:
        assert start.returncode == 0, f"cluster.sh start failed:\n{start.stdout}\n{start.stderr}"
        slurm = env(SLURM_CONF=str(where / "slurm.conf"))
        c10d = WORKERS.parent / "c10d_workers.py"  # torch.distributed's backend "gyre", env:// from Slurm's
        for workers, case in ((WORKERS, "collectives"), (WORKERS, "optimizer"), (c10d, "collectives")):
            p = subprocess.run(["srun", "-n", "3", "--time", "5", PYTHON, str(workers), case], env=slurm,
                               capture_output=True, text=True, timeout=TIMEOUT)
            check(p, f"{workers.name} {case} under srun")
            for r in range(3):
                assert f"rank {r}: " in p.stdout, p.stdout
    finally:
        subprocess.run(["/bin/bash", str(cluster), "stop", str(where)], env=env(), capture_output=True, timeout=120)


def test_calls_before_init_and_a_world_of_one():
    p = subprocess.run([PYTHON, str(WORKERS), "not_initialized"], env=env(), capture_output=True, text=True,
                       timeout=TIMEOUT)
    check(p, "not_initialized")


@pytest.mark.parametrize("np", [2, 3])
def test_training_through_parameter_servers(np):
    p = subprocess.run([str(BUILD / "bin" / "gyre"), "run", "-np", str(np), "--servers", "1", "--", PYTHON,
                        str(WORKERS), "ps"], env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p, "ps")
    for r in range(np):
        assert f"rank {r}: ps ok" in p.stdout, p.stdout


def test_tune_outside_a_trial():
    p = subprocess.run([PYTHON, str(WORKERS), "tune_outside_a_trial"], env=env(), capture_output=True, text=True,
                       timeout=TIMEOUT)
    check(p, "tune_outside_a_trial")


def test_a_python_program_is_a_gyre_tune_trial(tmp_path):
    """gyre tune runs the Python program as its trials and takes its gyre.tune.report()s."""
    exp = tmp_path / "exp"
    p = subprocess.run([str(BUILD / "bin" / "gyre"), "tune", "--param", "lr=grid:0.1,0.2", "--max-t", "3",
                        "--metric", "accuracy", "--mode", "max", "--dir", str(exp), "--progress", "off", "--",
                        PYTHON, str(WORKERS), "trial", "--lr", "{lr}"],
                       env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p, "gyre tune")
    reports = [json.loads(line) for line in (exp / "results.jsonl").read_text().splitlines()]
    by_trial = {}
    for r in reports:
        by_trial.setdefault(r["trial"], []).append(r)
    assert len(by_trial) == 2, reports
    for rows in by_trial.values():
        assert [r["iteration"] for r in rows] == [1, 2, 3], rows
        for r in rows:  # accuracy = lr * iteration (a float32 tensor), loss = 1 / iteration
            assert abs(r["metrics"]["accuracy"] - r["config"]["lr"] * r["iteration"]) < 1e-6, r
            assert abs(r["metrics"]["loss"] - 1 / r["iteration"]) < 1e-12, r
    assert "lr" in p.stdout and "0.2" in p.stdout, p.stdout  # the best trial, printed


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_ranks(np, case, workers=WORKERS, secret=True, **extra):
    """The ranks of a job started as torchrun would: RANK, WORLD_SIZE, MASTER_ADDR/PORT (and, with
    `secret`, a GYRE_SECRET, which torchrun does not set). Debian's torchrun itself fails on Python
    3.11 before starting any process (its Std.from_str returns what its to_map does not take)."""
    port = free_port()
    if secret:
        extra.setdefault("GYRE_SECRET", f"pytest-{port}")
    procs = []
    for r in range(np):
        procs.append(subprocess.Popen(
            [PYTHON, str(workers), case], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env(RANK=str(r), WORLD_SIZE=str(np), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(np),
                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GYRE_TIMEOUT_MS="20000", **extra)))
    outputs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"{case}: a rank hung")
        outputs.append((p.returncode, out, err))
    return outputs


def test_peer_killed_mid_allreduce_raises_peer_lost_error():
    (rc0, out0, err0), (rc1, _, _) = torchrun_ranks(2, "peer_lost")
    assert rc1 == -signal.SIGKILL
    assert rc0 == 0, f"rank 0 exited {rc0}\n{out0}\n{err0}"
    assert "PeerLostError" in out0 and "rank 1" in out0, out0


def test_tensors_of_different_sizes_are_an_error_not_a_hang():
    results = torchrun_ranks(2, "mismatch")
    for r, (rc, out, err) in enumerate(results):
        assert rc == 0, f"rank {r} exited {rc}\n{out}\n{err}"
        assert f"rank {r}: " in out, out
