"""pytest tests of torch.distributed's backend "gyre" (gyre.torch.distributed): each case of
c10d_workers.py runs as the ranks of a real job started by gyre run, torchrun or mpirun, and
checks every call against its expected values, DDP against gloo, and the errors."""
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from test_gyre import BUILD, PYTHON, TIMEOUT, check, env, torchrun_ranks

WORKERS = Path(__file__).resolve().parent / "c10d_workers.py"


def ranks_said(p, np, words):
    for r in range(np):
        assert f"rank {r}: {words}" in p.stdout, p.stdout + p.stderr


def gyre_run(np, case):
    return subprocess.run([str(BUILD / "bin" / "gyre"), "run", "-np", str(np), PYTHON, str(WORKERS), case],
                          env=env(), capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("case", ["collectives", "ddp", "errors"])
def test_case_under_gyre_run(case, np):
    p = gyre_run(np, case)
    check(p, case)
    ranks_said(p, np, f"{case} ok")


def torchrun_like(np, case):
    """The ranks as torchrun starts them, with nothing of gyre's (no GYRE_SECRET: the backend makes
    one and hands it over through torch's store)."""
    return torchrun_ranks(np, case, workers=WORKERS, secret=False)


@pytest.mark.parametrize("case", ["collectives", "ddp"])
def test_case_under_torchrun_variables(case):
    for r, (rc, out, err) in enumerate(torchrun_like(2, case)):
        assert rc == 0, f"rank {r} exited {rc}\n{out}\n{err}"
        assert f"rank {r}: {case} ok" in out, out


def test_collectives_under_mpirun():
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not on PATH (install openmpi-bin)")
    argv = [mpirun, "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    argv += ["-np", "2", "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS", PYTHON,
             str(WORKERS), "collectives"]
    p = subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p, "collectives under mpirun")
    ranks_said(p, 2, "collectives ok")


def test_a_peer_killed_mid_all_reduce_is_an_error_not_a_hang():
    (rc0, out0, err0), (rc1, _, _) = torchrun_like(2, "peer_lost")
    assert rc1 == -signal.SIGKILL
    assert rc0 == 0, f"rank 0 exited {rc0}\n{out0}\n{err0}"
    assert "PeerLostError" in out0 and "rank 1" in out0, out0
