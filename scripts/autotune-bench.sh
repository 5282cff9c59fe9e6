#!/usr/bin/env bash
# Autotuning against a sweep of fixed bucket caps, in one invocation: `gyre train` once per cap
# (--bucket-cap-mb C) and once with --autotune, alternating over --rounds rounds (this machine's
# load drifts), each run the same steps of the same model. Prints every run's samples/s, the
# median per configuration, the autotuned run's choice and its throughput against the best fixed
# cap's. A benchmark, not a test: docs/training.md quotes a run.
#
#   scripts/autotune-bench.sh [--model cnn] [--np 2] [--max-steps 300] [--skip-steps 10]
#       [--rounds 3] [--caps "1 4 16 64"] [--build build]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model=cnn np=2 steps=300 skip=10 rounds=3 caps="1 4 16 64" build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --max-steps) steps=$2; shift 2 ;;
    --skip-steps) skip=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --caps) caps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) sed -n '8,9p' "${BASH_SOURCE[0]}" | sed 's/^# //' >&2; exit 2 ;;
  esac
done
gyre=$root/$build/bin/gyre
[ -x "$gyre" ] || { echo "autotune-bench.sh: build $build first (no $gyre)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

common=(train --model "$model" --np "$np" --epochs 1 --max-steps "$steps" --skip-steps "$skip" --no-eval
  --progress off)
echo "# gyre ${common[*]} [--bucket-cap-mb C | --autotune], $rounds rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= rounds; round++)); do
  for config in $caps autotune; do
    dir=$out/$config-$round
    if [ "$config" = autotune ]; then
      "$gyre" "${common[@]}" --autotune --run-dir "$dir" >"$dir.log" 2>&1
    else
      "$gyre" "${common[@]}" --bucket-cap-mb "$config" --run-dir "$dir" >"$dir.log" 2>&1
    fi
  done
done

/usr/bin/python3 - "$out" "$rounds" $caps autotune <<'PY'
import json, statistics, sys
out, rounds, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows, choices = {}, []
for config in configs:
    rows[config] = []
    for r in range(1, rounds + 1):
        m = json.loads(open(f"{out}/{config}-{r}/metrics.jsonl").readline())
        rows[config].append(m["samples_per_s"])
        if config == "autotune" and m.get("autotune"):
            choices.append(m["autotune"])
print(f"| {'configuration':>16} | " + " | ".join(f"round {r}" for r in range(1, rounds + 1)) + " |   median |")
print(f"|{'-' * 18}|" + "|".join("-" * 9 for _ in range(rounds)) + f"|{'-' * 10}|")
median = {c: statistics.median(v) for c, v in rows.items()}
for c in configs:
    name = c if c == "autotune" else f"{c} MiB"
    print(f"| {name:>16} | " + " | ".join(f"{v:7.0f}" for v in rows[c]) + f" | {median[c]:8.0f} |")
best = max((c for c in configs if c != "autotune"), key=lambda c: median[c])
print(f"# best fixed cap: {best} MiB, {median[best]:.0f} samples/s; autotune {median['autotune']:.0f} samples/s = "
      f"{median['autotune'] / median[best]:.1%} of it (the tuning's own steps included)")
for a in choices:
    print(f"# autotune chose: {a['summary']} ({a['steps']} steps)")
PY
