"""pytest tests of gyre.serve: a Python model behind gyre's server, in this process, driven by a
real HTTP client (http.client): its answers are the model's own call bit for bit, each caller
gets its own rows of a batch, an exception in the model fails its batch only, bad input and bad
options are refused naming the problem, and stop() answers what was accepted. The package comes
from the build tree: GYRE_BUILD_DIR, default build/."""
import http.client
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GYRE_BUILD_DIR", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
sys.path.insert(0, str(BUILD / "python"))

torch = pytest.importorskip("torch")
gyre_serve = pytest.importorskip("gyre.serve", reason=f"no gyre.serve in {BUILD / 'python'} (built without the apps?)")


def post(port, name, instances):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", f"/v1/models/{name}:predict", body=json.dumps({"instances": instances}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def test_answers_are_the_models_own_call_and_each_caller_gets_its_rows():
    model = mlp()
    x = torch.rand(24, 4)
    with torch.no_grad():
        want = model(x)
    answers = {}
    with gyre_serve.Server(model, name="mlp", row_shape=(4,), port=0, replicas=2, max_batch_size=8,
                           batch_wait_ms=20) as server:
        def client(i):
            answers[i] = post(server.port, "mlp", x[2 * i:2 * i + 2].tolist())
        threads = [threading.Thread(target=client, args=(i,)) for i in range(12)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        c.request("GET", "/metrics")
        metrics = c.getresponse().read().decode()
    for i in range(12):
        status, body = answers[i]
        assert status == 200, body
        got = torch.tensor(body["predictions"], dtype=torch.float32)
        assert torch.equal(got, want[2 * i:2 * i + 2]), (i, got, want[2 * i:2 * i + 2])
    assert 'gyre_serve_requests_total{code="200"} 12' in metrics
    batches = int(next(l.split()[1] for l in metrics.splitlines() if l.startswith("gyre_serve_batches_total")))
    assert batches < 12, metrics  # requests shared forward passes


def test_an_exception_in_the_model_fails_its_batch_only():
    def model(rows):
        if (rows < 0).any():
            raise ValueError("negative input")
        return rows * 2

    with gyre_serve.Server(model, name="twice", row_shape=(2,), port=0, max_batch_size=1) as server:
        status, body = post(server.port, "twice", [[-1.0, 1.0]])
        assert status == 500
        assert "ValueError: negative input" in body["error"]
        status, body = post(server.port, "twice", [[1.5, 2.0]])
        assert (status, body) == (200, {"predictions": [[3.0, 4.0]]})


def test_a_model_that_returns_no_tensor_is_named():
    with gyre_serve.Server(lambda rows: rows.tolist(), name="list", port=0) as server:
        status, body = post(server.port, "list", [[1.0]])
        assert status == 500
        assert "returned a list, not a torch.Tensor" in body["error"]


def test_bad_requests_get_a_4xx_and_bad_options_an_exception():
    with gyre_serve.Server(mlp(), name="mlp", row_shape=(4,), port=0) as server:
        status, body = post(server.port, "mlp", [[1.0, 2.0]])
        assert status == 400 and "this model takes 4" in body["error"], body
        status, body = post(server.port, "other", [[1.0, 2.0, 3.0, 4.0]])
        assert status == 404, body
    with pytest.raises(TypeError, match="must be callable"):
        gyre_serve.Server(42)
    with pytest.raises(TypeError, match="unknown option"):
        gyre_serve.Server(mlp(), port=0, batch_size=3)
    with pytest.raises(ValueError, match="max-batch-size must be between 1 and 65536"):
        gyre_serve.Server(mlp(), port=0, max_batch_size=0)
    with pytest.raises(ValueError, match="name"):
        gyre_serve.Server(mlp(), name="a/b", port=0)


def test_stop_answers_every_accepted_request():
    gate = threading.Event()

    def slow(rows):
        gate.wait(5)
        return rows + 1

    server = gyre_serve.Server(slow, name="slow", row_shape=(1,), port=0, max_batch_size=1)
    server.start()
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(post(server.port, "slow", [[1.0]]))) for _ in range(4)]
    [t.start() for t in threads]
    for _ in range(1000):  # until all four are in: one computing, three queued
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        c.request("GET", "/metrics")
        if "\ngyre_serve_queue_length 3\n" in c.getresponse().read().decode():
            break
        time.sleep(0.01)
    threading.Timer(0.2, gate.set).start()
    server.stop()
    [t.join() for t in threads]
    assert answers == [(200, {"predictions": [[2.0]]})] * 4
    server.stop()  # again: nothing
