#!/usr/bin/env python3
"""A connection flood against a starting and training job: every port it listens on is held.

Starts a 2-worker `gyre run` of the built-in trainer (rank 1 starts --delay seconds late, so rank
0's transport listener stays open while rank 1 is on its way), and while it runs, finds every
TCP port that a process of the job listens on (the launcher's store, each rank's transport
listener, parameter servers when asked) with `ss -ltnp`, and opens on each --idle connections
that never send a byte, --slow ones that trickle a gyre hello one byte at a time, and --garbage
ones that send an HTTP request. All are held until the job ends.

Passes when
  - the job exits 0 within --timeout (it starts, trains and finishes through the flood);
  - the store and at least one transport listener were flooded (the ports are named);
  - the flood's connections were refused and logged: the job's output has "refused connection"
    lines and, when refusals were too many to list, the count of the rest.

Prints the ports flooded, connections opened, refusals logged and the job's time with and
without the flood (the same command, run first without it).

Usage: scripts/flood-test.py --build build [--idle 200 --slow 50 --garbage 50] [--servers 0]
"""
import argparse
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

from proctree import descendants


def listening_ports(pids):
    """{port: process name} of TCP listeners owned by pids."""
    try:
        text = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    ports = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6:
            continue
        local = parts[3]
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            if int(pid) in pids:
                ports[int(local.rsplit(":", 1)[1])] = name
    return ports


class Flood:
    def __init__(self, idle, slow, garbage):
        self.counts = (idle, slow, garbage)
        self.sockets, self.slow = [], []
        self.flooded = {}
        self.stop = threading.Event()
        self.trickler = threading.Thread(target=self.trickle, daemon=True)
        self.trickler.start()

    def flood(self, port, name):
        idle, slow, garbage = self.counts
        opened = 0
        for i in range(idle + slow + garbage):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue  # the listener may have closed (a transport listener after start-up)
            s.setblocking(False)
            opened += 1
            self.sockets.append(s)
            if idle <= i < idle + slow:
                self.slow.append(s)
            elif i >= idle + slow:
                try:
                    s.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                except OSError:
                    pass
        self.flooded[port] = (name, opened)

    def trickle(self):
        hello = b"GYR1C0123456789abcdef"
        at = 0
        while not self.stop.wait(0.1):
            for s in list(self.slow):
                try:
                    s.send(hello[at:at + 1])
                except OSError:
                    pass
            at = (at + 1) % len(hello)

    def close(self):
        self.stop.set()
        for s in self.sockets:
            s.close()


def job_command(args, build):
    gyre = os.path.join(build, "bin", "gyre")
    worker = os.path.join(build, "bin", "gyre_train_worker")
    train = (f"exec {worker} --epochs 1 --max-steps {args.steps} --no-eval --threads 1"
             + (f" --mode ps:asp" if args.servers else ""))
    delayed = f'if [ "$GYRE_RANK" = 1 ]; then sleep {args.delay}; fi; {train}'
    command = [gyre, "run", "-np", "2", "--timeout", str(args.timeout)]
    if args.servers:
        command += ["--servers", str(args.servers)]
    return command + ["--", "sh", "-c", delayed]


def run(args, flood=None):
    begin = time.monotonic()
    env = dict(os.environ, GYRE_LOG_LEVEL="warn")
    job = subprocess.Popen(job_command(args, args.build), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=env, start_new_session=True)
    output = []
    reader = threading.Thread(target=lambda: output.extend(job.stdout), daemon=True)
    reader.start()
    try:
        while job.poll() is None:
            if flood is not None:
                for port, name in listening_ports({job.pid, *descendants(job.pid)}).items():
                    if port not in flood.flooded:
                        flood.flood(port, name)
            if time.monotonic() - begin > args.timeout + 30:
                os.killpg(job.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        job.wait()
    finally:
        if flood is not None:
            flood.close()
    reader.join(timeout=10)
    return job.returncode, time.monotonic() - begin, "".join(output)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--idle", type=int, default=200)
    p.add_argument("--slow", type=int, default=50)
    p.add_argument("--garbage", type=int, default=50)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--delay", type=float, default=3)
    p.add_argument("--servers", type=int, default=0)
    p.add_argument("--timeout", type=int, default=120)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    code, quiet_s, out = run(args)
    if code != 0:
        print(f"flood-test: the job failed without any flood (exit {code}):\n{out}", file=sys.stderr)
        return 1
    print(f"flood-test: without a flood the job took {quiet_s:.1f} s")

    flood = Flood(args.idle, args.slow, args.garbage)
    code, flooded_s, out = run(args, flood)
    refused = len(re.findall(r"refused connection from", out))
    more = sum(int(n) for n in re.findall(r"refused (\d+) more connection", out))
    for port, (name, opened) in sorted(flood.flooded.items()):
        print(f"flood-test: port {port} ({name}): {opened} connections held")
    print(f"flood-test: with the flood the job took {flooded_s:.1f} s and exited {code}; "
          f"{refused} refusals logged one by one, {more} more counted")
    failures = []
    if code != 0:
        failures.append(f"the job exited {code}:\n{out}")
    names = [name for name, _ in flood.flooded.values()]
    if "gyre" not in names:
        failures.append("the launcher's store was not found listening, so not flooded")
    if not any(n.startswith("gyre_train") for n in names):
        failures.append("no transport listener of a worker was found listening, so none was flooded")
    if refused == 0:
        failures.append("no refusal was logged")
    for f in failures:
        print(f"flood-test: FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
