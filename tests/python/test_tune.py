"""pytest tests of gyre.tune's Tuner, Ray Tune's API (tune_workers.py): a real gyre tune under it, its
schedulers, checkpoints and restore after the tuner was interrupted."""
import os
import signal
import subprocess
import time
from pathlib import Path

from test_gyre import PYTHON, TIMEOUT, check, env

WORKERS = Path(__file__).resolve().parent / "tune_workers.py"


def run(case, root):
    p = subprocess.run([PYTHON, str(WORKERS), case, str(root)], env=env(), capture_output=True, text=True,
                       timeout=TIMEOUT)
    check(p, case)
    assert f"{case} ok" in p.stdout, p.stdout


def test_fit_with_asha_a_grid_and_checkpoints(tmp_path):
    run("fit", tmp_path)


def test_tpe_over_loguniform_and_quniform_then_pbt(tmp_path):
    run("search", tmp_path)


def test_a_failing_trial_and_bad_arguments(tmp_path):
    run("errors", tmp_path)


def test_an_interrupted_tuner_is_restored(tmp_path):
    driver = subprocess.Popen([PYTHON, str(WORKERS), "slow", str(tmp_path)], env=env(), start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state = tmp_path / "slow" / "results.jsonl"
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and (not state.exists() or len(state.read_text().splitlines()) < 4):
        time.sleep(0.1)
    os.killpg(driver.pid, signal.SIGINT)  # as Ctrl-C: the driver and its gyre tune
    driver.communicate(timeout=TIMEOUT)
    assert driver.returncode != 0
    reported = len(state.read_text().splitlines())
    assert reported < 24, "the tuner finished before the interrupt"
    run("restore", tmp_path)
