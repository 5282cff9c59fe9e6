#!/usr/bin/env python3
"""Compare `gyre bench collectives` between two builds, runs alternating, medians per size.

This VM-class machine is noisy (10-45% between runs), so a change's cost is measured as the
median of --reps alternating runs of each build, on the same machine in the same minutes.

Usage: scripts/bench-compare.py --before OLD/bin/gyre --after build/bin/gyre \\
           --config 4:tcp:allreduce --config 2:auto:allreduce [--algo all] [--max-bytes 64K] [--reps 8] [--iters N]
"""
import argparse
import json
import statistics
import subprocess


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--config", action="append", default=[], help="NP:TRANSPORT:OP (repeatable)")
    p.add_argument("--algo", default="auto")
    p.add_argument("--max-bytes", default="64K")
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--iters", type=int, default=0, help="timed calls per size (0: the bench's default, 50 up to 1 MiB)")
    args = p.parse_args()
    configs = [c.split(":") for c in (args.config or ["2:auto:allreduce"])]
    builds = [("before", args.before), ("after", args.after)]
    times = {}
    for rep in range(args.reps):
        for name, gyre in (builds if rep % 2 == 0 else builds[::-1]):
            for np_, transport, op in configs:
                out = subprocess.run([gyre, "bench", "collectives", "--np", np_, "--transport", transport, "--op", op,
                                      "--algo", args.algo, "--max-bytes", args.max_bytes, "--iters", str(args.iters), "--json"],
                                     capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    d = json.loads(line)
                    key = (int(np_), transport, op, d["algo"], d["bytes"])
                    times.setdefault(key, {}).setdefault(name, []).append(d["time_us"])
    print(f"{'np':>3} {'transport':>9} {'op':>10} {'algo':>17} {'bytes':>9} {'before us':>10} {'after us':>10} "
          f"{'after/before':>12}")
    for key in sorted(times):
        before = statistics.median(times[key]["before"])
        after = statistics.median(times[key]["after"])
        print(f"{key[0]:>3} {key[1]:>9} {key[2]:>10} {key[3]:>17} {key[4]:>9} {before:>10.1f} {after:>10.1f} "
              f"{after / before:>12.3f}")


if __name__ == "__main__":
    main()
