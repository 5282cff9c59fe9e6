#!/usr/bin/env bash
# Large-batch benchmark (issue 21): the cnn trained for the same epochs at global batch 128 with
# SGD (the reference) and at a large global batch with SGD (the rate scaled linearly, Goyal et
# al.), LARS and LAMB, each with a warm-up and a cosine schedule; prints each run's final test
# accuracy, its distance to the reference in points, and its throughput, and says whether the
# best large-batch rule is within 1 point of the reference.
# Usage: scripts/large-batch.sh [BUILD_DIR]; GYRE_LB_EPOCHS (default 5), GYRE_LB_BATCH (4096),
# GYRE_LB_NP (2 workers) change the runs. Exits non-zero on a miss.
set -euo pipefail
B="${1:-build}"
EPOCHS="${GYRE_LB_EPOCHS:-5}"
BATCH="${GYRE_LB_BATCH:-4096}"
NP="${GYRE_LB_NP:-2}"
work=$(mktemp -d /tmp/gyre-large-batch.XXXXXX)
trap 'rm -rf "$work"' EXIT

# name batch flags...
run() {
  local name=$1 batch=$2
  shift 2
  "$B/bin/gyre" train --model cnn --np "$NP" --epochs "$EPOCHS" --batch "$batch" --lr-schedule cosine --progress off \
    --run-dir "$work/$name" "$@" >"$work/$name.log" 2>&1 || {
    echo "large-batch: $name failed:"
    tail -20 "$work/$name.log"
    exit 1
  }
}

scale=$((BATCH / 128))
run sgd-128 128 --lr 0.05
run sgd-"$BATCH" "$BATCH" --lr "$(/usr/bin/python3 -c "print(0.05 * $scale)")" --warmup-epochs 1
run lars-"$BATCH" "$BATCH" --optimizer lars --lr 10 --warmup-epochs 1 --weight-decay 0.0005
run lamb-"$BATCH" "$BATCH" --optimizer lamb --lr 0.02 --warmup-epochs 1 --weight-decay 0.01

/usr/bin/python3 - "$work" "$BATCH" "$EPOCHS" <<'PY'
import json, sys
work, batch, epochs = sys.argv[1], sys.argv[2], sys.argv[3]
def last(name):
    return json.loads(open(f"{work}/{name}/metrics.jsonl").read().splitlines()[-1])
ref = last("sgd-128")
print(f"{'run':<14} {'batch':>6} {'test acc':>9} {'vs 128':>8} {'samples/s':>10}")
best = None
for name in ["sgd-128", f"sgd-{batch}", f"lars-{batch}", f"lamb-{batch}"]:
    m = last(name)
    diff = (m["test_accuracy"] - ref["test_accuracy"]) * 100
    print(f"{name:<14} {m['batch']:>6} {m['test_accuracy']*100:>8.2f}% {diff:>+7.2f} {m['samples_per_s']:>10.0f}")
    if name.startswith(("lars", "lamb")) and (best is None or diff > best[1]):
        best = (name, diff)
ok = best[1] >= -1.0
print(("ok" if ok else "MISS") + f": the best large-batch rule, {best[0]}, is {best[1]:+.2f} points from batch 128 "
      f"after {epochs} epochs (within 1 point is the target)")
sys.exit(0 if ok else 1)
PY
