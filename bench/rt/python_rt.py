"""gyre bench rt --python: Ray's Python microbenchmark rows, measured on gyre.rt from Python between
processes of this host (gyre.rt.init's local worker processes), beside Ray's published figures for
the same rows (ray/_private/ray_microbenchmark_helpers, release 2.x on a 64-core m5.16xlarge; the
issue's figures). One JSON object per row with --json, as the C++ rows; a table otherwise."""
import argparse
import json
import os
import time

import numpy as np

import gyre.rt as ray

# Ray's published figures for these rows (calls per second; single client, between processes).
RAY = {"single client tasks sync": 950, "single client tasks async": 7700, "1:1 actor calls sync": 1950,
       "1:1 actor calls async": 8000}
TARGET = {"single client tasks sync": 10000, "single client tasks async": 50000, "1:1 actor calls sync": 10000}


@ray.remote
def small_value():
    return b"ok"


@ray.remote
class Actor:
    def small_value(self):
        return b"ok"


@ray.remote
def resident(ref_holder):
    """Maps the object a reference points to, reads a value of every page, and reports the
    process's private (RssAnon) and shared (RssShmem) resident memory before and after (Linux's
    /proc/self/status): a copy would grow the private one, a mapping grows only the shared one."""
    def rss():
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        return {k: int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssShmem")}
    before = rss()
    array = ray.get(ref_holder[0])
    touched = float(array[::1024].sum())  # a value of every 4 KiB page: all of it resident now
    after = rss()
    return before, after, not array.flags.writeable, touched


@ray.remote
def hundred_mb():
    return np.ones(100 * 1000 * 1000 // 4, dtype=np.float32)


def rss():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {k: int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssShmem")}


def rate(seconds, step, warm=50):
    """Calls per second of step(), run for `seconds` (after `warm` untimed calls)."""
    for _ in range(warm):
        step()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        n += 1
    return n / (time.perf_counter() - start)


def batched_rate(seconds, batch, make):
    for _ in range(3):
        ray.get([make() for _ in range(batch)])
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        ray.get([make() for _ in range(batch)])
        n += batch
    return n / (time.perf_counter() - start)


def measure(seconds):
    actor = Actor.remote()
    rows = [
        ("single client tasks sync", rate(seconds, lambda: ray.get(small_value.remote()))),
        ("single client tasks async", batched_rate(seconds, 1000, small_value.remote)),
        ("1:1 actor calls sync", rate(seconds, lambda: ray.get(actor.small_value.remote()))),
        ("1:1 actor calls async", batched_rate(seconds, 1000, actor.small_value.remote)),
    ]
    # As the C++ rows: each repeated for the row's seconds (a put into a warm file of /dev/shm, the
    # object freed before the next; memcpy into the same buffer), in GB/s.
    big = np.ones(100 * 1000 * 1000 // 4, dtype=np.float32)
    copy = np.empty_like(big)
    gb = big.nbytes / 1e9
    memcpy = gb * rate(seconds, lambda: np.copyto(copy, big), warm=2)
    del copy
    put = gb * rate(seconds, lambda: ray.put(big), warm=2)
    ref = ray.put(big)
    get = gb * rate(seconds, lambda: ray.get(ref), warm=2)
    got = ray.get(ref)
    before, after, read_only, _ = ray.get(resident.remote([ref]))
    returned = gb * rate(seconds, lambda: ray.get(hundred_mb.remote()), warm=1)
    mine = rss()
    result = ray.get(hundred_mb.remote())
    float(result[::1024].sum())  # every page read
    mine_after = rss()
    rows += [("memcpy 100 MB", memcpy), ("put 100 MB numpy (shared memory)", put),
             ("get 100 MB numpy (shared memory)", get), ("task returning 100 MB numpy", returned)]
    extra = {"get_from_another_process": {
        "private_rss_growth_mb": (after["RssAnon"] - before["RssAnon"]) / 1e6,
        "shared_rss_growth_mb": (after["RssShmem"] - before["RssShmem"]) / 1e6,
        "read_only_view": read_only, "same_process_read_only": not got.flags.writeable},
        "returned_to_driver": {"private_rss_growth_mb": (mine_after["RssAnon"] - mine["RssAnon"]) / 1e6,
                               "shared_rss_growth_mb": (mine_after["RssShmem"] - mine["RssShmem"]) / 1e6,
                               "read_only_view": not result.flags.writeable}}
    return rows, extra


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args()
    ray.init(num_workers=a.workers)
    rounds = [measure(a.seconds) for _ in range(a.repeat)]
    memcpy = None
    rows = []
    for i, (name, _) in enumerate(rounds[0][0]):
        values = sorted(r[0][i][1] for r in rounds)
        value = values[len(values) // 2]
        if name == "memcpy 100 MB":
            memcpy = value
        rows.append([name, value])
    where = f"python, {a.workers} worker processes, this host"
    for name, value in rows:
        target = TARGET.get(name)
        if "(shared memory)" in name and name.startswith("put"):
            target = memcpy / 2
        row = {"benchmark": name, "where": where, "per_s": value, "target_per_s": target,
               "ray_per_s": RAY.get(name), "repeat": a.repeat, "serializer": ray.SERIALIZER,
               "hardware_threads": os.cpu_count()}
        if name.startswith("get 100 MB"):
            row.update(rounds[len(rounds) // 2][1]["get_from_another_process"])
        if name.startswith("task returning"):
            row.update(rounds[len(rounds) // 2][1]["returned_to_driver"])
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            unit = "GB/s" if "100 MB" in name else "/s"
            verdict = "" if target is None else ("PASS" if value >= target else "MISS") + f" {target:.0f}"
            ray_figure = "" if row["ray_per_s"] is None else f"Ray {row['ray_per_s']}"
            print(f"{name:<34} {value:>12.2f} {unit:<5} {verdict:<12} {ray_figure}", flush=True)
    if not a.json:
        g = rounds[len(rounds) // 2][1]["get_from_another_process"]
        print(f"another process's get of the 100 MB array, every page read: private RSS "
              f"{g['private_rss_growth_mb']:+.1f} MB, shared {g['shared_rss_growth_mb']:+.1f} MB (the mapping; "
              f"read-only view: {g['read_only_view']})", flush=True)
        d = rounds[len(rounds) // 2][1]["returned_to_driver"]
        print(f"a task's 100 MB array result in the driver, every page read: private RSS "
              f"{d['private_rss_growth_mb']:+.1f} MB, shared {d['shared_rss_growth_mb']:+.1f} MB (read-only view: "
              f"{d['read_only_view']})", flush=True)


if __name__ == "__main__":
    main()
