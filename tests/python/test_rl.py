"""pytest tests of gyre.rl (RLlib's shape on gyre.rt; rl_workers.py): PPO and IMPALA learn a Python
environment, checkpoints restore, an exported policy loads, a lost worker is rebuilt."""
import subprocess
from pathlib import Path

import pytest

from test_gyre import PYTHON, TIMEOUT, check, env

WORKERS = Path(__file__).resolve().parent / "rl_workers.py"


@pytest.mark.parametrize("case", ["learns", "cartpole_checkpoints"])
def test_case(case, tmp_path):
    p = subprocess.run([PYTHON, str(WORKERS), case, str(tmp_path)], env=env(), capture_output=True, text=True,
                       timeout=TIMEOUT)
    check(p, case)
    assert f"{case} ok" in p.stdout, p.stdout
