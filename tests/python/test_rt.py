"""pytest tests of gyre.rt, Ray Core's API in Python (rt_workers.py): each case a driver run alone
(gyre.rt.init starts its worker processes) or as rank 0 of a real `gyre run` job; no process of
gyre.rt's is left once the driver has exited."""
import os
import subprocess
from pathlib import Path

import pytest

from test_gyre import BUILD, PYTHON, TIMEOUT, check, env

WORKERS = Path(__file__).resolve().parent / "rt_workers.py"


def leftover_workers():
    p = subprocess.run(["pgrep", "-f", "gyre.rt._worker"], capture_output=True, text=True)
    return p.stdout.split()


@pytest.mark.parametrize("case", ["basics", "actors", "objects", "faults"])
def test_alone(case):
    p = subprocess.run([PYTHON, str(WORKERS), case], env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p, case)
    assert f"{case} ok" in p.stdout, p.stdout
    assert leftover_workers() == [], "gyre.rt's worker processes outlived the driver"
    assert not [n for n in os.listdir("/dev/shm") if n.startswith("gyre-rt-py-")], "results left in /dev/shm"


def test_in_a_gyre_run_job():
    p = subprocess.run([str(BUILD / "bin" / "gyre"), "run", "-np", "3", PYTHON, str(WORKERS), "in_job"], env=env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    check(p, "in_job")
    assert "in_job ok" in p.stdout, p.stdout
