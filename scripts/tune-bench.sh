#!/usr/bin/env bash
# gyre tune's targets on real gyre train trials (docs/tune.md, "Measured"):
#   1. ASHA (eta 3) against grid search on the same 27 configurations of the mlp, 9 epochs each:
#      the best test accuracy of each and the compute each used (worker-epochs), and ASHA's slot
#      utilisation;
#   2. PBT on lr and momentum against random search with the same budget (8 trials x 9 epochs).
# Usage: scripts/tune-bench.sh [OUT_DIR] [--quick]   (--quick: 3 epochs and 4-sample PBT, minutes)
# Uses build/bin/gyre; prints one line per experiment and writes OUT_DIR/summary.jsonl.
set -euo pipefail
out=${1:-runs/tune-bench-$(date +%Y%m%d-%H%M%S)}
quick=${2:-}
gyre=${GYRE:-$(dirname "$0")/../build/bin/gyre}
mkdir -p "$out"
epochs=9 samples=8
if [ "$quick" = "--quick" ]; then epochs=3 samples=4; fi
common=(--model mlp --slots 2 --threads 1 --max-t "$epochs" --metric accuracy --mode max --progress off --json)
grid=(--param lr=grid:0.01,0.03,0.1 --param momentum=grid:0,0.5,0.9 --param batch=grid:32,64,128)

run() {
  local name=$1
  shift
  local start=$SECONDS
  "$gyre" tune "${common[@]}" "$@" --dir "$out/$name" > "$out/$name.log" 2>&1 || {
    echo "tune-bench: $name failed; see $out/$name.log" >&2
    exit 1
  }
  local summary
  summary=$(grep '^{' "$out/$name.log" | tail -1)
  echo "{\"experiment\":\"$name\",\"wall_s\":$((SECONDS - start)),\"summary\":$summary}" >> "$out/summary.jsonl"
  /usr/bin/python3 - "$name" "$summary" <<'PY'
import json, sys
name, s = sys.argv[1], json.loads(sys.argv[2])
print(f"{name:8s} best accuracy {100 * s['best_accuracy']:.2f}% (trial {s['best_trial']}, {s['best_config']}), "
      f"{s['worker_iterations']:.0f} worker-epochs, {s['elapsed_s']:.0f} s, slot utilisation {100 * s['utilisation']:.1f}%")
PY
}

run grid "${grid[@]}"
run asha "${grid[@]}" --scheduler asha --eta 3
run random --param lr=loguniform:0.001:0.5 --param momentum=uniform:0:0.99 --samples "$samples" --seed 1
run pbt --param lr=loguniform:0.001:0.5 --param momentum=uniform:0:0.99 --samples "$samples" --seed 1 \
  --scheduler pbt --perturbation-interval 1 --pbt-mutate lr,momentum
echo "tune-bench: summaries in $out/summary.jsonl"
