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


def torchrun_ranks(np, case, **extra):
    """The ranks of a job started as torchrun would: RANK, WORLD_SIZE, MASTER_ADDR/PORT."""
    port = free_port()
    procs = []
    for r in range(np):
        procs.append(subprocess.Popen(
            [PYTHON, str(WORKERS), case], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env(RANK=str(r), WORLD_SIZE=str(np), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(np),
                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GYRE_TIMEOUT_MS="20000",
                    GYRE_SECRET=f"pytest-{port}", **extra)))
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
