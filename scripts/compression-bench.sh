#!/usr/bin/env bash
# Gradient compression on shaped links: the cnn on 2 network-namespace hosts (one worker each,
# tests/netns/netns.sh, links shaped to --rate), once per --compression, with time to a target
# test accuracy, the final accuracy, samples/s and gradient bytes per step.
#
#   scripts/compression-bench.sh [--rate 1gbit] [--epochs 1] [--batch 128] [--target 0.85]
#       [--eval-every 20] [--compressions "none fp16 topk:0.01 powersgd:4"] [--build build]
#       [--timeout 1800]
#
# Runs, for each compression C,
#   gyre run -H H1:1,H2:1 --rsh-agent tests/netns/netns-rsh --network-interface gy0 --
#       gyre_train_worker --model cnn --epochs E --batch B --threads 1 --compression C
#       --eval-every K --run-dir DIR --progress off
# and reads DIR/eval.jsonl (the test accuracy of snapshots every K steps, with the training time
# at each) and DIR/metrics.jsonl. Prints one row per compression and the speedup of the time to
# the target against `none`. Root only (exit 77 where namespaces cannot be created). A benchmark,
# not a test: the figures depend on the machine's load; docs/training.md quotes a run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rate=1gbit epochs=1 batch=128 target=0.85 every=20 build=build timeout=1800
compressions="none fp16 topk:0.01 powersgd:4"
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --eval-every) every=$2; shift 2 ;;
    --compressions) compressions=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) sed -n '5,7p' "${BASH_SOURCE[0]}" | sed 's/^# //' >&2; exit 2 ;;
  esac
done
gyre=$root/$build/bin/gyre
worker=$root/$build/bin/gyre_train_worker
[ -x "$gyre" ] && [ -x "$worker" ] || { echo "compression-bench.sh: build $build first (no $gyre or $worker)" >&2; exit 2; }

netns=$root/tests/netns
prefix="gyc$$"
out=$(mktemp -d)
cleanup() {
  "$netns/netns.sh" down "$prefix" 2 || true
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

"$netns/netns.sh" up "$prefix" 2 --rate "$rate" --owner $$ >"$out/info"
link=$("$netns/netns.sh" check "$prefix")
echo "# 2 hosts, links $rate: $link"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for c in $compressions; do
  dir=$out/run-${c//[:.]/_}
  timeout "$((timeout + 60))" "$gyre" run -H "${prefix}1:1,${prefix}2:1" --rsh-agent "$netns/netns-rsh" \
    --network-interface gy0 --no-tag-output --timeout "$timeout" -- \
    "$worker" --model cnn --epochs "$epochs" --batch "$batch" --threads 1 --compression "$c" \
    --eval-every "$every" --run-dir "$dir" --progress off >"$out/log" 2>&1 ||
    { echo "compression $c failed:"; tail -20 "$out/log"; exit 1; }
  echo "$c $dir" >>"$out/runs"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$out/runs" "$target" <<'PY'
import json, sys
runs, target = sys.argv[1], float(sys.argv[2])
rows = []
for line in open(runs):
    c, d = line.split()
    evals = [json.loads(l) for l in open(f"{d}/eval.jsonl")]
    metrics = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
    reach = next((e for e in evals if e["test_acc"] >= target), None)
    rows.append({"c": c, "to": reach["time_s"] if reach else None, "at": reach["step"] if reach else None,
                 "final": metrics[-1]["test_accuracy"], "sps": sum(m["samples_per_s"] for m in metrics) / len(metrics),
                 "bytes": metrics[-1]["bytes_per_step"]})
base = rows[0]
print(f"{'compression':<14} {'bytes/step':>11} {'samples/s':>10} {'to ' + str(target):>10} {'at step':>8} "
      f"{'speedup':>8} {'final acc':>9}")
for r in rows:
    to = f"{r['to']:.1f} s" if r["to"] is not None else "never"
    speed = (f"{base['to'] / r['to']:.2f}x" if r["to"] and base["to"] else "-")
    print(f"{r['c']:<14} {r['bytes'] / 1e6:>9.3f}MB {r['sps']:>10.0f} {to:>10} {str(r['at'] or '-'):>8} {speed:>8} "
          f"{r['final'] * 100:>8.2f}%")
PY
