#!/usr/bin/env python3
"""A flood against `gyre serve`: its memory stays bounded and it goes on answering.

Starts `gyre serve` on a cnn (--model RUN_DIR, or one `gyre train` makes in a step), and floods
it in phases, each sampling the server's resident memory (VmRSS, every 50 ms) meanwhile:
  huge     --huge connections that announce a body of 1 GB (Content-Length) and send 1 MB of it:
           refused with 413 before the body is read;
  big      --big requests of 8 MiB JSON bodies (under --max-body-bytes, over the model's row
           size): each read, refused with 400, and freed;
  burst    --burst requests of one row from 64 threads at once, more than --max-queue 64 waits:
           answered, or refused with 503 when the queue is full;
  slow     --slow connections that send a request one byte a second (slow-loris), answered 408
           and closed --read-timeout after their first byte, while a client's requests go on
           being answered (or refused 503 while the slow ones take every one of the server's
           --max-connections, 64 here).
After the flood, one request must still be answered 200.

Prints, per phase, the requests sent, the statuses seen, the server's peak RSS in the phase and
its RSS before the flood; exits 1 when a phase's peak RSS is over --rss-bound-mb above the start,
or the server stops answering.

Usage: scripts/serve-flood.py --build build [--model RUN_DIR] [--huge 64 --big 40 --burst 4000 --slow 100]
       [--max-connections 64]
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


class Sampler:
    """The peak VmRSS of `pid` while active."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def post(port, body, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v1/models/cnn:predict", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__
    finally:
        c.close()


def huge(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(b"POST /v1/models/cnn:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1073741824\r\n\r\n")
        chunk = b"[" * 65536
        for _ in range(16):
            s.sendall(chunk)
        line = s.recv(64).split(b"\r\n")[0]
        return int(line.split()[1]) if line.startswith(b"HTTP/") else "no answer"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()


def slow(port, seconds):
    s = socket.create_connection(("127.0.0.1", port), timeout=seconds + 30)
    request = b"POST /v1/models/cnn:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"
    try:
        for i in range(len(request)):
            s.sendall(request[i:i + 1])
            time.sleep(1)
        return "finished"
    except OSError:
        return "dropped"
    finally:
        s.close()


def run_phase(name, pid, jobs, threads):
    counts = {}
    lock = threading.Lock()
    pending = list(jobs)

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                job = pending.pop()
            status = job()
            with lock:
                counts[str(status)] = counts.get(str(status), 0) + 1

    begin = time.time()
    with Sampler(pid) as sampler:
        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    return {"phase": name, "requests": len(jobs), "statuses": counts, "peak_rss_mb": round(sampler.peak, 1),
            "seconds": round(time.time() - begin, 1)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--model", help="a run directory of gyre train (default: a cnn made for the run)")
    p.add_argument("--huge", type=int, default=64)
    p.add_argument("--big", type=int, default=40)
    p.add_argument("--burst", type=int, default=4000)
    p.add_argument("--slow", type=int, default=100)
    p.add_argument("--max-connections", type=int, default=64, help="the server's --max-connections")
    p.add_argument("--rss-bound-mb", type=float, default=300)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    gyre = os.path.join(a.build, "bin", "gyre")
    work = tempfile.mkdtemp(prefix="gyre-serve-flood-")
    model = a.model
    if not model:
        model = os.path.join(work, "cnn")
        subprocess.run([gyre, "train", "--model", "cnn", "--np", "1", "--epochs", "1", "--max-steps", "1", "--no-eval",
                        "--progress", "off", "--run-dir", model], check=True, stdout=subprocess.DEVNULL)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = subprocess.Popen([gyre, "serve", model, "--name", "cnn", "--port", str(port), "--max-queue", "64",
                               "--max-connections", str(a.max_connections), "--read-timeout", "3", "--max-body-bytes", str(16 << 20)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        row = json.dumps({"instances": [[0.5] * 784]})
        for _ in range(300):
            if post(port, row, timeout=5) == 200:
                break
            time.sleep(0.1)
        else:
            print("serve-flood: the server did not answer", file=sys.stderr)
            return 1
        pid = server.pid
        start = rss_mb(pid)
        big = json.dumps({"instances": [[0.5] * 1_000_000]})  # about 8 MiB, far more than 784 values
        results = [
            run_phase("huge", pid, [lambda: huge(port)] * a.huge, 16),
            run_phase("big", pid, [lambda: post(port, big)] * a.big, 8),
            run_phase("burst", pid, [lambda: post(port, row)] * a.burst, 64),
        ]
        # Slow-loris connections, and a client whose requests must still be answered meanwhile.
        answered = []
        stop = threading.Event()

        def client():
            while not stop.is_set():
                answered.append(post(port, row, timeout=10))
                time.sleep(0.05)

        c = threading.Thread(target=client)
        c.start()
        results.append(run_phase("slow", pid, [lambda: slow(port, 20)] * a.slow, a.slow))
        stop.set()
        c.join()
        results[-1]["client_answers"] = {str(k): answered.count(k) for k in set(answered)}
        after = post(port, row, timeout=10)
        failed = after != 200
        for r in results:
            r["rss_before_mb"] = round(start, 1)
            over = r["peak_rss_mb"] - start > a.rss_bound_mb
            failed = failed or over
            if a.json:
                print(json.dumps(r))
            else:
                print(f"{r['phase']:>6}: {r['requests']} sent in {r['seconds']} s, statuses {r['statuses']}, "
                      f"peak RSS {r['peak_rss_mb']} MB (before the flood {r['rss_before_mb']} MB)"
                      + (f", a client meanwhile: {r['client_answers']}" if "client_answers" in r else "")
                      + ("  OVER the bound" if over else ""))
        print(f"after the flood: {after}" + ("" if after == 200 else "  FAIL"))
        return 1 if failed else 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
