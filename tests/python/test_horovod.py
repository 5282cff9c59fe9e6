"""pytest tests of Horovod's names beyond the core collectives (horovod_workers.py), each case as
the ranks of a real job under gyre run, with 2 and 3 ranks."""
import subprocess
from pathlib import Path

import pytest

from test_gyre import BUILD, PYTHON, TIMEOUT, check, env

WORKERS = Path(__file__).resolve().parent / "horovod_workers.py"


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("case", ["names", "grouped", "optimizer_options", "sync_batch_norm", "adasum",
                                  "mismatch_recovers", "join", "lars_lamb",
                                  "compression", "model_parallel"])
def test_case(case, np):
    p = subprocess.run([str(BUILD / "bin" / "gyre"), "run", "-np", str(np), PYTHON, str(WORKERS), case],
                       env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p, case)
    for r in range(np):
        assert f"rank {r}: {case} ok" in p.stdout, p.stdout
